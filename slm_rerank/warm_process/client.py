"""The command's side: hand a ``--fast`` search or a hook run to the warm process, or say why not.

Runs before click and the host are imported, so the standard library only (and
``hook.stdio`` and ``plain_json``, which are standard library too). A command the warm
process cannot answer exactly as this process would, or one it fails to answer in time,
runs in this process; with ``-v`` a search says why on stderr (one line), and the answer is
the same either way.

Where the socket lives: ``$XDG_RUNTIME_DIR/slm-rerank/``, else the user's cache folder
(``$XDG_CACHE_HOME`` or ``~/.cache``) under ``slm-rerank/warm/``; a path too long for a
Unix socket falls back to ``/tmp/slm-rerank-warm-UID/``. The folder must be this user's
and closed to everyone else (mode 0700), the socket file this user's with no access for
others, or it is not used. The socket's name is a digest of what shapes an answer and is
not sent with each request: the interpreter, the package version, the user, and the
environment names that choose settings, folders, plugins, tools and the locale
(``KEYED_PREFIXES``, ``KEYED_NAMES``). A different environment is a different warm process;
the whole environment is also sent and applied, so a name outside the key still counts.
"""

from __future__ import annotations

# What this side imports is what every command pays before it can ask: ``_socket``, not
# ``socket`` (and its enums and selectors); ``plain_json``, not ``json``; no ``typing``.
import _socket
import os
import stat
import sys
import time

from slm_rerank import plain_json
from slm_rerank.digests import sha256  # not hashlib: it loads OpenSSL, 8 ms of a command
from slm_rerank.warm_process import wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


#: ``0``, ``false``, ``no`` or ``off``: never use or start the warm process (also the
#: ``warm_process`` setting of the user's config file; never a repository's)
SWITCH_ENV = "SLM_RERANK_WARM_PROCESS"
OFF_WORDS = frozenset({"0", "false", "no", "off"})
#: a search's own deadline for the warm process's answer (a ``--fast`` search has none of
#: its own): past it the search runs in this process
SEARCH_DEADLINE = 60.0
#: how long past its deadline a command's answer is waited for: a command ends a little
#: after its deadline as it would in its own process (the hook, timed out, logs and exits),
#: and running it again here would take longer and repeat it (its usage-log record)
ANSWER_GRACE = 0.25
#: a warm process that has not accepted the connection and the request within this long is
#: taken to be hung, and the command runs in this process
ACK_SECONDS = 1.0
#: environment names that choose the warm process (each its own socket): by prefix and by name
KEYED_PREFIXES = ("SLM_", "XDG_", "LC_", "PYTHON", "GIT_")
KEYED_NAMES = frozenset({"HOME", "PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR",
                         "RIPGREP_CONFIG_PATH", "NO_COLOR", "TERM"})
#: the longest socket path used (the system's limit is 107 bytes)
MAX_SOCKET_PATH = 100


class Refused(Exception):
    """The socket's folder or file is not safe to use (another user's, or open to others)."""


# Plain classes, not dataclasses: importing ``dataclasses`` (and ``inspect`` with it) is a
# third of what this side costs before it can ask.
class Request:
    """One command as this process would run it."""

    __slots__ = ("args", "kind", "started", "stdin", "stdin_given", "stdin_in_time",
                 "stdin_silent", "verbose")

    def __init__(self, kind: str, args: list[str], verbose: bool, stdin: bytes = b"",
                 stdin_in_time: bool = True, started: float = 0.0) -> None:
        self.kind = kind  # "search" or "hook"
        self.args = args
        self.verbose = verbose
        #: stdin as read here: the hook's, or a search's file names or query (``piped``);
        #: ``b""`` for a search whose stdin is a terminal or /dev/null (it runs with it empty)
        self.stdin = stdin
        self.stdin_in_time = stdin_in_time
        #: a search's stdin was read here (``piped.given``), and whether a pipe went silent
        self.stdin_given = False
        self.stdin_silent = False
        self.started = started


class Answer:
    """What the warm process said: the command's exit code and output, or why it did not."""

    __slots__ = ("exit_code", "fallback", "start", "stderr", "stdout")

    def __init__(self, exit_code: int | None, stdout: bytes = b"", stderr: bytes = b"",
                 fallback: str | None = None, start: bool = False) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        #: why the command runs in this process instead (None when answered)
        self.fallback = fallback
        #: whether this process should start a warm process once it has answered
        self.start = start


def switched_off(environ: Mapping[str, str]) -> bool:
    return environ.get(SWITCH_ENV, "").strip().lower() in OFF_WORDS


def request_kind(args: Sequence[str]) -> str | None:
    """``search`` for a ``--fast`` search, ``hook`` for the prompt hook, None for anything
    else (another command, ``--help``: run here)."""
    if "--help" in args:
        return None
    if query_on_stdin(args) and not stdin_is_data():
        return None  # the query on a terminal: read where it is typed
    if list(args[:2]) == ["hook", "claude-prompt"]:
        return "hook"
    if "--fast" in args and args and (args[0] == "search" or args[0].startswith("-")):
        return "search"
    return None


def query_on_stdin(args: Sequence[str]) -> bool:
    """Whether the search reads its query from stdin (``--query-file -``)."""
    return any(a == "--query-file=-" or (a == "--query-file" and args[i + 1:i + 2] == ["-"])
               for i, a in enumerate(args))


def stdin_is_data() -> bool:
    """Whether stdin is a pipe or a file: a search reads file names (or its query) from it."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def key(environ: Mapping[str, str]) -> str:
    """The digest naming the warm process for this interpreter, version, user and environment."""
    from slm_rerank import __version__

    keyed = sorted((name, value) for name, value in environ.items()
                   if name.startswith(KEYED_PREFIXES) or name in KEYED_NAMES)
    parts = [wire.FORMAT, os.getuid(), sys.executable, sys.version, __version__, keyed]
    text = plain_json.dumps(parts)
    return sha256(text.encode("ascii")).hexdigest()[:20]


def socket_folder(environ: Mapping[str, str]) -> str:
    """The folder holding the warm processes' sockets (see the module's docstring)."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        folder = os.path.join(runtime, "slm-rerank")
    else:
        cache = environ.get("XDG_CACHE_HOME", "")
        if not os.path.isabs(cache):
            cache = os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(cache, "slm-rerank", "warm")
    if len(folder) + 26 > MAX_SOCKET_PATH:
        folder = f"/tmp/slm-rerank-warm-{os.getuid()}"  # noqa: S108 - checked: ours, 0700
    return folder


def socket_path(environ: Mapping[str, str]) -> str:
    return os.path.join(socket_folder(environ), key(environ) + ".sock")


def check_folder(folder: str, create: bool) -> None:
    """Raise Refused unless ``folder`` is a real folder of this user's, mode 0700 (made so
    when ``create`` and it is missing); FileNotFoundError when missing and not ``create``."""
    if create and not os.path.lexists(folder):
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise Refused(f"{folder} is not a folder (a link or a file); remove it")
    if info.st_uid != os.getuid():
        raise Refused(f"{folder} belongs to user {info.st_uid}, not to this user "
                      f"({os.getuid()}); remove it or set XDG_RUNTIME_DIR")
    if info.st_mode & 0o077:
        raise Refused(f"{folder} is open to other users (mode {stat.S_IMODE(info.st_mode):o}); "
                      "make it 0700 (chmod 700) or remove it")


def check_socket(path: str) -> None:
    """Raise Refused unless ``path`` is a socket of this user's that no one else may use;
    FileNotFoundError when it is missing."""
    check_folder(os.path.dirname(path), create=False)
    info = os.lstat(path)
    if not stat.S_ISSOCK(info.st_mode):
        raise Refused(f"{path} is not a socket; remove it")
    if info.st_uid != os.getuid():
        raise Refused(f"{path} belongs to user {info.st_uid}, not to this user ({os.getuid()})")
    if info.st_mode & 0o077:
        raise Refused(f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o})")


class Connection(_socket.socket):
    """A Unix socket that a ``with`` block closes: ``socket.socket`` without its module."""

    __slots__ = ()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(path: str, deadline: float) -> Connection:
    """A connection to the socket at ``path``, checked first (Refused, FileNotFoundError,
    ConnectionRefusedError: nobody listening, or TimeoutError)."""
    check_socket(path)
    sock = Connection(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _header(request: Request) -> dict[str, object]:
    def tty(stream: object) -> bool:
        try:
            return bool(stream.isatty())  # type: ignore[attr-defined]
        except (AttributeError, ValueError, OSError):
            return False

    def codec(stream: object) -> list[str]:
        return [getattr(stream, "encoding", None) or "utf-8",
                getattr(stream, "errors", None) or "strict"]

    mask = os.umask(0o077)  # read by setting it (one thread here), and set back
    os.umask(mask)
    return {"format": wire.FORMAT, "kind": request.kind, "args": request.args,
            "cwd": os.getcwd(), "env": dict(os.environ), "umask": mask,
            "started": request.started,
            "stdin_in_time": request.stdin_in_time, "stdin_given": request.stdin_given,
            "stdin_silent": request.stdin_silent,
            "stdout_tty": tty(sys.stdout), "stderr_tty": tty(sys.stderr),
            "merged": _one_stream(),
            "stdout_codec": codec(sys.stdout), "stderr_codec": codec(sys.stderr)}


def _one_stream() -> bool:
    """Whether stdout and stderr are the same file (``2>&1``): the command then writes both
    to one memory file, in the order it writes them, and the answer's stdout holds both."""
    try:
        out, err = os.fstat(1), os.fstat(2)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


def ask(request: Request, path: str, deadline: float) -> Answer:
    """Send ``request`` to the warm process at ``path``; its answer, or why not (never raises).

    ``deadline`` (``time.monotonic()``) bounds connecting, sending and the acknowledgement;
    the answer is waited for until the deadline the warm process says it works to (the
    hook's, counted from ``request.started``; a search's SEARCH_DEADLINE) and
    ANSWER_GRACE, never longer.
    """
    try:
        sock = connect(path, min(deadline, time.monotonic() + ACK_SECONDS))
    except FileNotFoundError:
        return Answer(None, fallback="no warm process is running", start=True)
    except ConnectionRefusedError:
        _remove_stale(path)
        return Answer(None, fallback="removed a stale socket (nobody was listening)",
                      start=True)
    except Refused as exc:
        return Answer(None, fallback=f"not used: {exc}")
    except OSError as exc:
        return Answer(None, fallback=f"could not connect to {path} ({exc.strerror or exc})")
    try:
        with sock:
            ack_by = min(deadline, time.monotonic() + ACK_SECONDS)
            wire.send_json(sock, _header(request), ack_by)
            wire.send_frame(sock, request.stdin, ack_by)
            ack = wire.receive_json(sock, ack_by)
            if ack.get("accepted") is not True:
                reason = ack.get("reason")
                return Answer(None, fallback=f"the warm process refused the request: "
                                             f"{reason if isinstance(reason, str) else ack}")
            seconds = ack.get("deadline")
            if not isinstance(seconds, (int, float)) or not 0 < seconds <= 3600:
                raise wire.WireError(f"a malformed acknowledgement ({ack})")
            answer_by = request.started + float(seconds) + ANSWER_GRACE
            head = wire.receive_json(sock, answer_by)
            code = head.get("exit")
            if not isinstance(code, int) or isinstance(code, bool):
                failed = head.get("failed")
                if isinstance(failed, str):
                    return Answer(None, fallback=f"the warm process failed: {failed}")
                raise wire.WireError(f"a malformed answer ({head})")
            out = wire.receive_frame(sock, wire.MAX_STDOUT_BYTES, answer_by)
            err = wire.receive_frame(sock, wire.MAX_STDERR_BYTES, answer_by)
            return Answer(code, out, err)
    except wire.WireError as exc:
        return Answer(None, fallback=f"no usable answer from the warm process ({exc})")
    except OSError as exc:  # the folder this command runs in is gone, say
        return Answer(None, fallback=f"not used ({exc.strerror or exc})")


def _remove_stale(path: str) -> None:
    try:
        check_socket(path)  # never remove what is not ours
        os.unlink(path)
    except (OSError, Refused):
        pass


def deadline_option(args: Sequence[str]) -> str | None:
    """The hook's ``--deadline`` value as given (None: not given), the last one winning."""
    option = None
    for i, arg in enumerate(args):
        if arg == "--deadline" and i + 1 < len(args):
            option = args[i + 1]
        elif arg.startswith("--deadline="):
            option = arg.partition("=")[2]
    return option


def read_hook_input(args: Sequence[str], started: float) -> Request:
    """Read the hook's stdin here, as the hook reads it (its deadline, its cap)."""
    from slm_rerank.hook import stdio

    data, in_time = stdio.read_stdin(stdio.deadline_from(deadline_option(args), os.environ),
                                     wire.MAX_STDIN_BYTES)
    return Request("hook", list(args), False, data, in_time, started)


def read_search_input(request: Request) -> None:
    """Read a search's stdin here, as the search reads it (file names, or the query for
    ``--query-file -``), into ``request`` and ``piped.given``: the search takes it from
    there, in the warm process or in this one."""
    from slm_rerank import piped
    from slm_rerank.query_limit import MAX_QUERY_BYTES

    if query_on_stdin(request.args):
        given = piped.Given(piped.read_up_to(0, MAX_QUERY_BYTES + 1), False)
    else:
        given = piped.read_names(0) or piped.Given(b"", False)
    piped.given = given
    request.stdin, request.stdin_silent, request.stdin_given = given.data, given.silent, True


def write_answer(answer: Answer) -> int:
    """Write the answer's stderr and stdout as the command would have; its exit code."""
    code = answer.exit_code if answer.exit_code is not None else 1
    for stream, data in ((sys.stderr, answer.stderr), (sys.stdout, answer.stdout)):
        if not data:
            continue
        try:
            stream.flush()
            stream.buffer.write(data)
            stream.buffer.flush()
        except BrokenPipeError:  # a reader that stopped early (| head): as the command does
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass
        except (OSError, ValueError, AttributeError):
            return 1
    return code


def start(path: str, verbose: bool) -> None:
    """Start a warm process for this environment in the background (it checks the user's
    switch and that no other one runs, and stops itself when idle)."""
    import subprocess

    _note(verbose, "starting one in the background for the next commands")

    try:
        check_folder(os.path.dirname(path), create=True)
        subprocess.Popen(  # noqa: S603 - this interpreter, this package
            [sys.executable, "-m", "slm_rerank.warm_process.server", path],
            cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    except (OSError, Refused):
        pass  # the next command runs in its own process, as this one did


def wants_notes(args: Sequence[str]) -> bool:
    """Whether the command says what the warm process did (a search's ``-v``)."""
    return request_kind(args) == "search" and ("-v" in args or "--verbose" in args)


def _note(verbose: bool, message: str) -> None:
    if verbose:
        print(f"slm-rerank: warm process: {message}", file=sys.stderr)
        sys.stderr.flush()


def try_warm(args: list[str]) -> tuple[int | None, str | None]:
    """Hand the command to the warm process: ``(exit code, None)`` once its answer is
    written; else ``(None, where to start a warm process after this run, or None)``, and
    the command runs in this process (with ``-v``, a search says why)."""
    kind = request_kind(args)
    if kind is None or switched_off(os.environ) or not hasattr(_socket, "SO_PEERCRED"):
        return None, None  # without SO_PEERCRED the warm process could not check its callers
    started = time.monotonic()
    verbose = wants_notes(args)
    if kind == "hook":
        from slm_rerank.hook import stdio

        request = read_hook_input(args, started)
        # the hook in this process, if it runs here, reads what was read and keeps its clock
        stdio.given = stdio.GivenInput(request.stdin, request.stdin_in_time, started)
        deadline = started + stdio.deadline_from(deadline_option(args), os.environ)
    else:
        request = Request("search", list(args), verbose, started=started)
        deadline = started + SEARCH_DEADLINE
        if stdin_is_data():
            read_search_input(request)
            if len(request.stdin) > wire.MAX_STDIN_BYTES:
                _note(verbose, f"not used: stdin holds more than "
                               f"{(wire.MAX_STDIN_BYTES - 1) / 1e6:g} MB; "
                               "searching in this process")
                return None, None
    try:
        path = socket_path(os.environ)
        answer = ask(request, path, deadline)
    except Exception as exc:  # noqa: BLE001 - the command runs here, whatever went wrong
        _note(verbose, f"not used ({type(exc).__name__}: {exc}); searching in this process")
        return None, None
    if answer.fallback is None:
        return write_answer(answer), None
    if kind == "hook":
        from slm_rerank.hook import stdio

        if stdio.given is not None:
            stdio.given.warm_process = answer.fallback
    _note(verbose, f"{answer.fallback}; searching in this process")
    return None, path if answer.start else None
