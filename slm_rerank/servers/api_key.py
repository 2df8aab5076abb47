"""The API key ``serve-api`` requires: read from a variable or a file, never from argv."""

from __future__ import annotations

import os
from pathlib import Path

#: The longest API key file read: a key is a few dozen characters; more is the wrong file.
KEY_FILE_CAP = 4096
#: Seconds a pipe given as --api-key-file (``<(pass show key)``) has to deliver the key.
KEY_PIPE_SECONDS = 10.0


def _read_key_file(path: Path) -> bytes:
    """The bytes of ``--api-key-file``: a regular file, or a pipe that delivers in time.

    Bounded in size (KEY_FILE_CAP) and, for a pipe, in time (``safefile.read_named``):
    ``/dev/zero`` was read for ever, and a FIFO nobody writes blocked start-up without end.
    A pipe is allowed because ``--api-key-file <(pass show rerank)`` keeps the key off the
    disk.
    """
    from slm_rerank import safefile
    from slm_rerank.errors import ConfigError

    where = f"--api-key-file {path}"
    try:
        data = safefile.read_named(path, KEY_FILE_CAP + 1, KEY_PIPE_SECONDS)
    except safefile.NotRegularFile as exc:
        if exc.what == "a directory":
            raise ConfigError(f"{where} is a directory; give the file that holds the key") \
                from None
        raise ConfigError(f"{where} is {exc.what}, not a file holding a key; give a file "
                          "(or a pipe such as <(pass show KEY))") from None
    except safefile.PipeTimeout:
        raise ConfigError(f"{where}: the pipe did not deliver the key within "
                          f"{KEY_PIPE_SECONDS:g} s") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > KEY_FILE_CAP:
        raise ConfigError(f"{where} is longer than {KEY_FILE_CAP} bytes, which no API key "
                          "is; is it the right file? Put only the key in it")
    return data


def read_api_key(env_name: str | None, key_file: Path | None) -> str | None:
    """The API key from the named environment variable or file; never from the command
    line, where ``ps`` would show it to every user of the machine."""
    from slm_rerank.errors import ConfigError

    if env_name and key_file:
        raise ConfigError("--api-key-env and --api-key-file both given; pass one")
    if env_name:
        key = os.environ.get(env_name, "").strip()
        where = f"--api-key-env {env_name}"
        if not key:
            raise ConfigError(f"{where}: that environment variable is unset or empty; "
                              "export the key in it")
    elif key_file:
        where = f"--api-key-file {key_file}"
        try:
            key = _read_key_file(key_file).decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where}: cannot read it ({exc})") from None
        if not key:
            raise ConfigError(f"{where}: the file is empty; put the key in it")
    else:
        return None
    # An HTTP header carries ASCII: a client cannot send a key with other characters (or a
    # line break inside it), so the server would refuse every request.
    if not all(" " < c < "\x7f" for c in key):
        raise ConfigError(f"{where}: the key holds spaces, control or non-ASCII characters, "
                          "which no client can send in an Authorization header; use "
                          "printable ASCII (e.g. `openssl rand -hex 32`)")
    return key
