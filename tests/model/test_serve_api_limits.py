"""serve-api's bounds at start-up and at the door: the API key file is read with a size
cap and never waited on for ever; the listen queue holds as many connections as the
server serves, so a burst of clients gets HTTP answers, not SYN retransmits and resets."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from search_fixtures import free_port

from slm_rerank import rerank_server
from slm_rerank.errors import ConfigError
from slm_rerank.rerank_server import read_api_key

CLI = Path(sys.executable).parent / "slm-rerank"
#: generous: a refused key file ends start-up in about a second
BOUND = 60


def _one_gigabyte_of_memory() -> None:
    # Without a cap, reading /dev/zero would eat the shared machine's memory; with this
    # limit the unfixed read dies of MemoryError instead.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_a_device_as_api_key_file_is_refused_naming_the_option_not_read_for_ever(
        tmp_path: Path) -> None:
    run = subprocess.run([str(CLI), "serve-api", "--port", str(free_port()),
                          "--api-key-file", "/dev/zero"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=BOUND, stdin=subprocess.DEVNULL,
                         preexec_fn=_one_gigabyte_of_memory)

    assert run.returncode == 1, run.stderr
    assert "--api-key-file /dev/zero is a device or socket, not a file holding a key" \
        in run.stderr
    assert "Traceback" not in run.stderr


def test_an_api_key_file_longer_than_any_key_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("k" * (rerank_server.KEY_FILE_CAP + 1))

    with pytest.raises(ConfigError, match=f"--api-key-file {key_file} is longer than"):
        read_api_key(None, key_file)


def test_an_api_key_from_a_pipe_is_read(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"k-from-a-pipe\n")
    os.close(write_end)
    try:
        key = read_api_key(None, Path(f"/proc/self/fd/{read_end}"))
    finally:
        os.close(read_end)

    assert key == "k-from-a-pipe"


def test_a_pipe_that_never_delivers_the_key_is_an_error_within_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rerank_server, "KEY_PIPE_SECONDS", 0.5)
    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    holder = os.open(fifo, os.O_RDWR)  # a writer that never writes
    outcome: list[BaseException | str | None] = []

    def read() -> None:
        try:
            outcome.append(read_api_key(None, fifo))
        except BaseException as exc:  # noqa: BLE001 - the thread hands it to the test
            outcome.append(exc)

    try:
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout=BOUND)
        assert not reader.is_alive(), "read_api_key blocked on a FIFO nobody writes"
    finally:
        os.close(holder)
    assert isinstance(outcome[0], ConfigError)
    assert "did not deliver the key within 0.5 s" in str(outcome[0])
