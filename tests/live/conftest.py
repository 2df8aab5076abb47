"""A real llama.cpp llama-server with the Gemma 3 270M GGUF, for the model-stage tests.

``make install`` installs both (contrib/llama-server/install.py). A missing binary or model
fails the tests that need them, never skips them: CI must not pass without the server. Only
a run that asked to go without it (`make test LLAMA_SERVER=skip`, which sets
$SLM_RERANK_WITHOUT_LLAMA_SERVER=1) skips them, saying so.
Set $SLM_RERANK_LLAMA_SERVER and $SLM_RERANK_GGUF to run against another binary or model.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# The helper the install script's smoke test uses; contrib/ is not a package.
_HELPER = Path(__file__).resolve().parents[2] / "contrib" / "llama-server" / "llamaserver.py"
_spec = importlib.util.spec_from_file_location("llamaserver", _HELPER)
assert _spec is not None and _spec.loader is not None, _HELPER
llamaserver = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("llamaserver", llamaserver)
_spec.loader.exec_module(llamaserver)

WIRE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wire"

# Four slots of 2048 tokens: a head of short chunks scored concurrently, with room for a
# ~1k-token prompt. -c is the whole KV cache, split evenly over the slots in this build.
SLOTS = 4
CTX_PER_SLOT = 2048
# The 270M model loads in ~2 s here; a busy CI machine gets ample slack.
START_TIMEOUT = 60.0
#: Set by `make test LLAMA_SERVER=skip`: the tests that need a llama-server skip instead of failing.
WITHOUT_SERVER_ENV = "SLM_RERANK_WITHOUT_LLAMA_SERVER"


@dataclass
class LlamaServer:
    """A running llama-server on 127.0.0.1 and what a test needs to talk to it."""

    base_url: str
    model_id: str  # data[0].id of /v1/models: the GGUF's file name
    slots: int
    ctx_per_slot: int
    gguf: Path
    process: subprocess.Popen[bytes]
    _proc: llamaserver.ServerProcess = field(repr=False)

    def url(self, path: str) -> str:
        return self.base_url + path

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; the fixture's teardown tolerates it."""
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        """SIGTERM (then SIGKILL), close the log; safe after kill() or a second call."""
        self._proc.stop()

    def log_tail(self, lines: int = 30) -> str:
        return self._proc.log_tail(lines)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under LLAMA_SERVER=skip, skip the tests marked ``bundled_server``: they start the
    bundled llama-server through `slm-rerank serve` / `--local`, not these fixtures."""
    if os.environ.get(WITHOUT_SERVER_ENV) != "1":
        return
    skip = pytest.mark.skip(reason=f"{WITHOUT_SERVER_ENV}=1 (make test LLAMA_SERVER=skip): "
                                   "starts the bundled llama-server")
    for item in items:
        if item.get_closest_marker("bundled_server"):
            item.add_marker(skip)


def installed() -> llamaserver.Installed:
    """The binary and GGUF to run, or a failed test saying to run `make install`."""
    if os.environ.get(WITHOUT_SERVER_ENV) == "1":
        pytest.skip(f"{WITHOUT_SERVER_ENV}=1 (make test LLAMA_SERVER=skip): no llama-server")
    try:
        return llamaserver.find_installed()
    except llamaserver.LlamaServerError as err:
        pytest.fail(str(err), pytrace=False)


def start_server(log_dir: Path, slots: int, ctx_per_slot: int,
                 extra_args: tuple[str, ...] = ()) -> LlamaServer:
    found = installed()
    try:
        proc = llamaserver.start(found, slots=slots, ctx_size=slots * ctx_per_slot,
                                 extra_args=extra_args, log_dir=log_dir, wait=START_TIMEOUT)
    except llamaserver.LlamaServerError as err:
        pytest.fail(f"{err}\n(binary and model from {found.origin}; `make install` "
                    "reinstalls and smoke-tests them)", pytrace=False)
    status, models = llamaserver.http_json(proc.base_url + "/v1/models")
    if status != 200:
        proc.stop()
        pytest.fail(f"GET {proc.base_url}/v1/models answered HTTP {status}: {models}",
                    pytrace=False)
    return LlamaServer(base_url=proc.base_url, model_id=models["data"][0]["id"], slots=slots,
                       ctx_per_slot=ctx_per_slot, gguf=found.gguf, process=proc.process,
                       _proc=proc)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One llama-server for the whole session: 4 slots of 2048 tokens. Do not kill it."""
    server = start_server(tmp_path_factory.mktemp("llama-server"), SLOTS, CTX_PER_SLOT)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def llama_server_factory(tmp_path: Path) -> Iterator[Callable[..., LlamaServer]]:
    """Start disposable servers a test may kill; all are stopped when the test ends.

    ``start(slots=1, ctx_per_slot=1024, extra_args=())`` returns a ready LlamaServer.
    """
    started: list[LlamaServer] = []

    def start(slots: int = 1, ctx_per_slot: int = 1024,
              extra_args: tuple[str, ...] = ()) -> LlamaServer:
        server = start_server(tmp_path, slots, ctx_per_slot, extra_args)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def cache(isolated_home: Path) -> Iterator[Path]:
    """The isolated cache folder; a managed server (slm-rerank serve) left running is
    stopped after the test."""
    from slm_rerank.llama import control as serve

    yield isolated_home
    serve.stop(isolated_home)
