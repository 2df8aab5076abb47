"""Running git for calibration: a deadline on every call and a cap on what it may print.

The repository is the user's (``calibrate`` is run by them, on their own history), but its
history is still data of any size: a call that hangs or prints gigabytes must end as an
error naming the command, not as a stuck or swollen process.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from slm_rerank.errors import ConfigError

#: seconds one git call may take in total
GIT_TIMEOUT = 60.0
#: bytes one git call may print on stdout
GIT_MAX_BYTES = 64_000_000
#: bytes of git's stderr kept for an error message
STDERR_BYTES = 2000


class GitError(ConfigError):
    """git failed, timed out or printed too much; the message names the command."""


def _command(args: Sequence[str]) -> str:
    return "git " + " ".join(args)


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:  # already gone
        process.kill()


def git_stream(repo: Path, args: Sequence[str], sink: BinaryIO, *,
               timeout: float = GIT_TIMEOUT, max_bytes: int = GIT_MAX_BYTES) -> int:
    """Run ``git -C repo ARGS`` and copy its stdout into ``sink``; the bytes copied.

    Raises GitError when git exits non-zero (with the head of its stderr), runs past
    ``timeout`` seconds in total, or prints more than ``max_bytes``.
    """
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(
                ["git", "-C", str(repo), *args], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=errors,
                # its own process group: on a timeout, whatever git started (a hook, an
                # ssh, a filter) is stopped with it
                start_new_session=True,
                # no pager, no prompt for credentials, the user's locale out of the output
                env={**os.environ, "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0",
                     "LC_ALL": "C"})
        except OSError as exc:
            raise GitError(f"cannot run git ({exc.strerror or exc}); install git or put it "
                           "on PATH") from None
        assert process.stdout is not None
        copied, fault = 0, None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    fault = f"took longer than {timeout:g} s"
                    break
                if not selector.select(min(left, 1.0)):
                    continue
                chunk = os.read(process.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                copied += len(chunk)
                if copied > max_bytes:
                    fault = f"printed more than {max_bytes} bytes"
                    break
                sink.write(chunk)
        if fault:
            _kill(process)
        process.stdout.close()
        try:
            code = process.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            _kill(process)
            code = process.wait()
            fault = fault or f"took longer than {timeout:g} s"
        if fault:
            raise GitError(f"{_command(args)} in {repo} {fault}; try a smaller --commits")
        if code != 0:
            errors.seek(0)
            said = errors.read(STDERR_BYTES).decode("utf-8", "replace").strip()
            raise GitError(f"{_command(args)} in {repo} failed (exit {code}): {said}")
    return copied


def git_output(repo: Path, args: Sequence[str], *, timeout: float = GIT_TIMEOUT,
               max_bytes: int = GIT_MAX_BYTES) -> bytes:
    """What ``git -C repo ARGS`` prints, under the same deadline and cap as ``git_stream``."""
    with tempfile.SpooledTemporaryFile(max_size=1 << 20) as sink:
        git_stream(repo, args, sink, timeout=timeout, max_bytes=max_bytes)  # type: ignore[arg-type]
        sink.seek(0)
        return sink.read()


def history_root(path: Path) -> Path:
    """The top of the git work tree holding ``path``, once it is known to have a full history.

    A folder outside git, a repository without a commit, and a shallow clone (its oldest
    commits have no parent to search in) are each a clear error saying what to do.
    """
    try:
        top = git_output(path, ["rev-parse", "--show-toplevel"], timeout=10.0)
    except GitError:
        raise GitError(f"{path} is not inside a git repository; calibrate mines cases from "
                       "a repository's history (run it in a git clone)") from None
    root = Path(os.fsdecode(top.rstrip(b"\n")))
    try:
        git_output(root, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], timeout=10.0)
    except GitError:
        raise GitError(f"{root} has no commits yet: there is no history to mine cases "
                       "from") from None
    shallow = git_output(root, ["rev-parse", "--is-shallow-repository"], timeout=10.0)
    if shallow.strip() == b"true":
        raise GitError(f"{root} is a shallow clone: its oldest commits lack the parent "
                       "tree each case is searched in; run 'git fetch --unshallow' (or "
                       "clone without --depth) first")
    return root
