"""Every git command slm-rerank runs: built here, so that a repository's configuration
starts no process, and bounded, so that a wedged or huge repository ends as an error.

A repository is untrusted input: its ``.git/config``, ``.git/info/attributes`` and
``.gitattributes`` may arrive with it (an archive, a shared volume, a CI cache), and git
runs commands they name as a side effect of reading: a filter driver's ``clean``,
``smudge`` or ``process`` command (``git status``, ``git diff``, ``git archive``), the
``core.fsmonitor`` hook (anything that reads the index), ``gpg.program`` (``git log`` when
``log.showSignature`` is set, ``%G?`` in an ``export-subst`` file of ``git archive``),
textconv and external diff drivers, hooks (``post-index-change`` after ``git diff``
refreshes the index), a pager, ssh, credential helpers and askpass programs, and
``gc``/``maintenance`` run in the background. ``git_command`` turns each of these off for
one call:

- the filters of every driver name configured (read first by ``git config --name-only``,
  which reads configuration files and starts nothing): ``clean``, ``smudge`` and
  ``process`` empty (git then applies none) and ``required`` false;
- ``core.fsmonitor=false``, ``core.hooksPath=/dev/null`` (no hook can be found there),
  ``--no-pager``, ``log.showSignature=false`` and every gpg program empty (git cannot run
  an empty command: a signature shows as unverified), ``--no-ext-diff --no-textconv`` on
  the commands that print diffs, ``--ignore-submodules=dirty`` on ``diff`` and ``status``
  (otherwise git runs ``git status`` inside each submodule, under the submodule's own
  configuration, which this call never read);
- no transport at all (``protocol.allow=never``: a partial clone's lazy fetch, ssh,
  ``ext::`` remotes), no credential helper or askpass, no terminal prompt, no automatic gc
  or maintenance, no optional index write;
- the environment variables that would point git at another repository or another
  program (``GIT_DIR``, ``GIT_EXTERNAL_DIFF``, ``GIT_SSH_COMMAND``, ...) dropped.

Child git processes inherit the ``-c`` settings (git passes them on in
``GIT_CONFIG_PARAMETERS``). The bounded runner (``git_stream``, ``git_output``) and the
streaming start of the git candidate source (``start_git``) both build their commands
here; ``tests/test_git_runner_sites.py`` fails when a git call bypasses this module.
"""

from __future__ import annotations

import io
import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from slm_rerank.errors import ConfigError

#: seconds one git call may take in total
GIT_TIMEOUT = 60.0
#: bytes one git call may print on stdout
GIT_MAX_BYTES = 64_000_000
#: bytes of git's stderr kept for an error message
STDERR_BYTES = 2000
#: bytes ``git config --name-only`` may print: the filter driver names of a repository
NAMES_MAX_BYTES = 1_000_000
#: filter drivers one repository may configure; more, and git is not run there at all
MAX_DRIVERS = 256

#: variables that point git at a repository other than the one asked about, or at a
#: program to run; the call names its repository with ``-C``, and git finds it from there
_DROPPED_ENV = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX",
    "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE", "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE", "GIT_INTERNAL_SUPER_PREFIX", "GIT_NAMESPACE",
    "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS", "GIT_PAGER", "PAGER", "GIT_EDITOR",
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS",
)
#: what every call adds to the environment
_SET_ENV = {
    "GIT_TERMINAL_PROMPT": "0",  # no prompt for credentials
    "GIT_OPTIONAL_LOCKS": "0",  # no index refresh written (and no hook after it)
    "GIT_NO_LAZY_FETCH": "1",  # a partial clone fetches nothing (git 2.39.4, 2.45.1 on)
    "LC_ALL": "C",  # the user's locale out of the output
    # the values of the settings given with --config-env (a driver name holding "=")
    "SLM_RERANK_GIT_EMPTY": "",
    "SLM_RERANK_GIT_FALSE": "false",
}
#: the settings every call gets, whatever the repository configures
_FIXED = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "log.showSignature=false",
    "gpg.program=",
    "gpg.openpgp.program=",
    "gpg.x509.program=",
    "gpg.ssh.program=",
    "gpg.ssh.defaultKeyCommand=",
    "protocol.allow=never",
    "core.sshCommand=",
    "credential.helper=",
    "core.askPass=",
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
    "status.submoduleSummary=false",
    "color.ui=false",
)
#: options each subcommand gets after its name (before the caller's own)
_AFTER = {
    "diff": ("--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty"),
    "log": ("--no-ext-diff", "--no-textconv"),
    "show": ("--no-ext-diff", "--no-textconv"),
    "diff-tree": ("--no-ext-diff", "--no-textconv"),
    "status": ("--ignore-submodules=dirty",),
}
#: the filter settings that run a command; all three empty, no driver runs
_FILTER_KEYS = ("clean", "smudge", "process")


class GitError(ConfigError):
    """git failed, timed out or printed too much; the message names the command."""


class GitTimeout(GitError):
    """git ran past its deadline (and was killed, with whatever it started)."""


@dataclass(frozen=True)
class GitCommand:
    """One git call, ready to start: its argument vector and its whole environment."""

    argv: list[str]
    env: dict[str, str]


def _command(args: Sequence[str]) -> str:
    return "git " + " ".join(args)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    return {**env, **_SET_ENV}


def _settings(drivers: Sequence[str]) -> list[str]:
    """``-c`` options for the fixed settings and each filter driver's."""
    options = [arg for setting in _FIXED for arg in ("-c", setting)]
    for name in drivers:
        for key, value in [*((k, "EMPTY") for k in _FILTER_KEYS), ("required", "FALSE")]:
            if "=" in name:  # -c splits at the first "="; --config-env at the last
                options.append(f"--config-env=filter.{name}.{key}=SLM_RERANK_GIT_{value}")
            else:
                options += ["-c", f"filter.{name}.{key}={'' if value == 'EMPTY' else 'false'}"]
    return options


def _with_safe_flags(args: Sequence[str]) -> list[str]:
    """``args`` with the subcommand's own safety options right after its name."""
    at = 0
    while at < len(args) and args[at].startswith("-"):
        at += 2 if args[at] in ("-c", "-C") else 1
    if at >= len(args) or args[at] not in _AFTER:
        return list(args)
    return [*args[:at + 1], *_AFTER[args[at]], *args[at + 1:]]


def _argv(repo: Path, drivers: Sequence[str], args: Sequence[str]) -> list[str]:
    return ["git", "--no-pager", *_settings(drivers), "-C", os.fsdecode(repo),
            *_with_safe_flags(args)]


#: the call that reads the driver names: ``git config`` reads files and starts nothing
NAMES_ARGS = ("config", "-z", "--name-only", "--get-regexp", r"^filter\.")


def parse_driver_names(output: bytes) -> list[str]:
    """The filter driver names in ``git config -z --name-only`` output, each once.

    A name is ``filter.<driver>.<key>``: the driver is what lies between the first dot and
    the last (it may hold dots itself, and keeps its case).
    """
    drivers: dict[str, None] = {}
    for raw in output.split(b"\0"):
        name = os.fsdecode(raw.strip(b"\n"))
        head, dot, _key = name.rpartition(".")
        if dot and head.startswith("filter.") and len(head) > len("filter."):
            drivers[head[len("filter."):]] = None
    return list(drivers)


def _checked_drivers(repo: Path, output: bytes) -> list[str]:
    drivers = parse_driver_names(output)
    if len(drivers) > MAX_DRIVERS:
        raise GitError(f"{repo}: its git configuration names {len(drivers)} filter drivers "
                       f"(at most {MAX_DRIVERS}); slm-rerank runs no git there. Remove the "
                       "filter.* settings you do not use")
    return drivers


def git_command(repo: Path, args: Sequence[str], *, timeout: float = 10.0) -> GitCommand:
    """``git -C repo ARGS`` with every process the repository could name turned off.

    Runs ``git config`` once (within ``timeout`` seconds) to learn the filter drivers.
    """
    names = io.BytesIO()
    _run(_argv(repo, (), NAMES_ARGS), names, timeout=timeout, max_bytes=NAMES_MAX_BYTES,
         shown=NAMES_ARGS, repo=repo, ok=(0, 1))
    return GitCommand(_argv(repo, _checked_drivers(repo, names.getvalue()), args), _env())


def _one_line(stderr: bytes) -> str:
    """git's stderr on one line, its lines joined by " | "."""
    lines = stderr.decode("utf-8", "replace").splitlines()
    return " | ".join(line.strip() for line in lines if line.strip())


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:  # already gone
        process.kill()


def _run(argv: list[str], sink: BinaryIO, *, timeout: float, max_bytes: int,
         shown: Sequence[str], repo: Path, ok: tuple[int, ...] = (0,),
         total: float | None = None) -> int:
    """Run ``argv`` (a git command built here), copying its stdout into ``sink``, within
    ``timeout`` seconds (what is left of the caller's ``total``, which errors name)."""
    from slm_rerank.lexical.matches import ToolsClosed, track_tool

    deadline = time.monotonic() + timeout
    said_timeout = f"took longer than {total if total is not None else timeout:g} s"
    with tempfile.TemporaryFile() as errors:
        try:
            # recorded with the search's tools: a caller that abandons the search (the
            # prompt hook at its deadline, mcp when its client leaves) ends it with them
            process = track_tool(lambda: subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
                # its own process group: on a timeout, whatever git started is stopped too
                start_new_session=True, env=_env()))
        except ToolsClosed as exc:
            raise GitError(f"{_command(shown)} in {repo} not run: {exc}") from None
        except OSError as exc:
            raise GitError(f"cannot run git ({exc.strerror or exc}); install git or put it "
                           "on PATH") from None
        assert process.stdout is not None
        copied, fault = 0, None
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(process.stdout, selectors.EVENT_READ)
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        fault = said_timeout
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
        except BaseException:
            # a full disk under the sink, a stop signal unwinding calibrate: git must not
            # run on, orphaned, past the deadline nobody is left to enforce
            _kill(process)
            process.wait()
            raise
        if fault:
            _kill(process)
        process.stdout.close()
        try:
            # the deadline is a total: a git that closed its output but runs on past it
            # is not waited for (one already killed is, as it ends at once)
            code = process.wait(
                timeout=None if fault else max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            _kill(process)
            code = process.wait()
            fault = fault or said_timeout
        if fault:
            kind = GitTimeout if fault.startswith("took") else GitError
            raise kind(f"{_command(shown)} in {repo} {fault}; try a smaller --commits")
        if code not in ok:
            errors.seek(0)
            said = _one_line(errors.read(STDERR_BYTES))
            raise GitError(f"{_command(shown)} in {repo} failed (exit {code}): {said}")
    return copied


def git_stream(repo: Path, args: Sequence[str], sink: BinaryIO, *,
               timeout: float = GIT_TIMEOUT, max_bytes: int = GIT_MAX_BYTES,
               ok: tuple[int, ...] = (0,)) -> int:
    """Run ``git -C repo ARGS`` (built by ``git_command``) and copy its stdout into
    ``sink``; the bytes copied.

    Raises GitError when git exits with a status not in ``ok`` (with the head of its
    stderr), GitTimeout (a GitError) when it runs past
    ``timeout`` seconds in total (reading the driver names included), or prints more than
    ``max_bytes``.
    """
    started = time.monotonic()
    command = git_command(repo, args, timeout=timeout)
    left = timeout - (time.monotonic() - started)
    if left <= 0:
        raise GitTimeout(f"{_command(args)} in {repo} took longer than {timeout:g} s; try a "
                       "smaller --commits")
    return _run(command.argv, sink, timeout=left, max_bytes=max_bytes, shown=args,
                repo=repo, ok=ok, total=timeout)


def git_output(repo: Path, args: Sequence[str], *, timeout: float = GIT_TIMEOUT,
               max_bytes: int = GIT_MAX_BYTES, ok: tuple[int, ...] = (0,)) -> bytes:
    """What ``git -C repo ARGS`` prints, under the same deadline and cap as ``git_stream``."""
    with tempfile.SpooledTemporaryFile(max_size=1 << 20) as sink:
        git_stream(repo, args, sink, timeout=timeout, max_bytes=max_bytes,  # type: ignore[arg-type]
                   ok=ok)
        sink.seek(0)
        return sink.read()


def start_git(repo: Path, args: Sequence[str], *, timeout: float = 10.0
              ) -> subprocess.Popen[bytes]:
    """``git -C repo ARGS`` (built by ``git_command``) started through
    ``plugin_kit.start_tool``: stdout and stderr piped, killed with the search's other
    tools when its caller gives up.

    The driver names are read first, within ``timeout`` seconds, also through
    ``start_tool``. Raises GitError when they cannot be read, OSError when git cannot
    start.
    """
    from slm_rerank.lexical.matches import start_tool

    probe = start_tool(_argv(repo, (), NAMES_ARGS), env=_env())
    try:
        out, err = probe.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        probe.kill()
        probe.communicate()
        raise GitTimeout(f"{_command(NAMES_ARGS)} in {repo} took longer than {timeout:g} s"
                         ) from None
    if probe.returncode < 0:  # a caller giving up on the search killed it (kill_tools)
        raise GitError(f"{_command(NAMES_ARGS)} in {repo} was killed by signal "
                       f"{-probe.returncode}")
    if probe.returncode not in (0, 1):
        said = _one_line(err[:STDERR_BYTES])
        raise GitError(f"{_command(NAMES_ARGS)} in {repo} failed (exit {probe.returncode})"
                       f": {said}")
    return start_tool(_argv(repo, _checked_drivers(repo, out), args), env=_env())
