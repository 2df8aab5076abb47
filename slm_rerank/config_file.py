"""Reading a config file, and changing one: read, change and replace it whole, one writer
at a time.

``read_toml`` reads a file of the user's and checks every key (``config_keys``); a file
larger than MAX_CONFIG_BYTES is refused before it is parsed.

``config set`` and ``calibrate --write`` both rewrite the user's ``config.toml``. Each reads
the file, changes its own key and puts the result in place; two at once each wrote what they
had read, and one's change was lost (189 of 400 updates, two writers). ``update_toml``
holds an advisory lock (``flock`` on the folder holding it, ``locked``) from the read to
the rename, and waits for another writer at most LOCK_SECONDS. The new text goes
to a temporary file renamed over the old one: a crash or a full disk leaves the old file
whole, and a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from slm_rerank.config_keys import check_value
from slm_rerank.errors import ConfigError
from slm_rerank.safefile import flock_held

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: A config file larger than this is refused before it is parsed.
MAX_CONFIG_BYTES = 1_000_000

#: Seconds a writer waits for another to finish with the same file. A change takes
#: milliseconds; a lock held this long is a stuck process, and waiting with it helps no one.
LOCK_SECONDS = 10.0
#: The mode of a config file written where none was (an existing file keeps its own).
NEW_FILE_MODE = 0o644


def parse_file(path: Path) -> dict[str, Any]:
    """One config file's TOML, unchecked, or a ConfigError naming the file."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES // 1_000_000} MB; "
                              "is this really a config file?")
        return tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: not UTF-8 ({exc.reason} at byte "
                          f"{exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def read_toml(path: Path) -> dict[str, Any]:
    """Read one config file of the user's; every key is checked."""
    data = parse_file(path)
    for key, value in data.items():
        check_value(key, value, str(path))
    return data


@contextlib.contextmanager
def locked(path: Path, seconds: float | None = None) -> Iterator[None]:
    """Hold the lock of ``path``: ``flock`` on the folder holding it, so no lock file is
    left beside a repository's ``.slm-rerank.toml`` (and none can be planted there);
    ConfigError after ``seconds`` (LOCK_SECONDS unless given) of waiting for another
    writer."""
    wait = LOCK_SECONDS if seconds is None else seconds
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot lock its folder {folder}: {exc.strerror or exc}; "
                          "nothing was written") from None
    with flock_held(fd, wait, lambda: ConfigError(
            f"{path}: another process has been changing it for over {wait:g} s (it holds "
            f"a lock on {folder}); nothing was written: retry when it is done"), poll=0.02):
        yield


def update_toml(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``change`` to the TOML file at ``path`` (``{}`` if there is none) and write it
    back, holding its lock from the read to the rename.

    A symlinked config (a dotfiles checkout) is changed where it points, the link kept.
    ConfigError names the file when it cannot be read, locked or written.
    """
    import tempfile  # here: a search reads config files, and only a writer needs it

    import tomli_w

    target = Path(os.path.realpath(path))
    with locked(target):
        data = read_toml(target) if target.is_file() else {}
        change(data)
        text = tomli_w.dumps(data)
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            mode = NEW_FILE_MODE
        try:
            fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                             dir=target.parent)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(temporary, mode)
            os.replace(temporary, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None
