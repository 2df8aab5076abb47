"""The systems under comparison, each turning (case, query text) into a timed file ranking:
`fast` runs the slm-rerank CLI, the others are the baselines."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from baselines import Bm25Cache, find_rg, rg_count_rank
from cases import Case, Ranking

SYSTEMS = ("fast", "bm25-all", "bm25-src", "bm25-code", "rg-count")
#: What a run measures unless told otherwise (bm25-code is asked for by name).
DEFAULT_SYSTEMS = ("fast", "bm25-all", "bm25-src", "rg-count")
#: The BM25 systems and the file set (``baselines.FILE_SETS``) each indexes.
BM25_FILE_SETS = {"bm25-all": "all", "bm25-src": "src", "bm25-code": "code"}
TOP_K = 10


@dataclass
class IndexBuild:
    system: str
    tree: str
    documents: int
    seconds: float


def resolve_command(cmd: str, repo_root: Path) -> list[str] | None:
    """The tool's argv prefix from --cmd (a path or a shell-quoted command line); a relative
    path is taken from the repository root. None when the program can't be found."""
    argv = shlex.split(cmd)
    if not argv:
        return None
    program = argv[0]
    if "/" in program:
        candidate = Path(program)
        if not candidate.is_absolute():
            candidate = repo_root / candidate
        if not candidate.is_file():
            return None
        argv[0] = str(candidate)
    elif shutil.which(program) is None:
        return None
    return argv


def parse_tool_output(stdout: str) -> tuple[list[str], list[tuple[str, int, int]], dict]:
    """Ranked unique paths, the (path, start, end) of each result in order, and extras
    (tool-reported timing, degraded) from the tool's JSON document."""
    doc = json.loads(stdout)
    paths: list[str] = []
    citations: list[tuple[str, int, int]] = []
    for item in doc.get("results") or []:
        path = str(item["path"]).removeprefix("./")
        start, end = item.get("start_line"), item.get("end_line")
        if start is not None and end is not None:
            citations.append((path, int(start), int(end)))
        if path not in paths:
            paths.append(path)
    extra = {
        "tool_total_ms": (doc.get("timings") or {}).get("total_ms"),
        "degraded": doc.get("degraded"),
    }
    return paths, citations, extra


@dataclass
class Runner:
    """Runs any of the systems; keeps the BM25 indexes of the current tree and a scratch
    directory for query files."""

    tool_argv: list[str] | None = None
    timeout: float = 600.0
    rg: str | None = None
    builds: list[IndexBuild] = field(default_factory=list)
    _bm25: Bm25Cache = field(default_factory=Bm25Cache)
    _scratch: tempfile.TemporaryDirectory | None = None

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def rank(self, system: str, case: Case, tree: Path, mode: str) -> Ranking:
        text = case.text(mode)
        try:
            if system == "fast":
                return self._fast(case, tree, mode, text)
            if system in BM25_FILE_SETS:
                return self._bm25_rank(system, tree, text)
            if system == "rg-count":
                return self._rg_count(tree, text)
        except Exception as exc:  # a failing system scores as a miss, the run goes on
            citations = [] if system == "fast" else None
            return Ranking([], 0.0, citations, error=f"{type(exc).__name__}: {exc}")
        raise ValueError(f"unknown system {system!r}")

    # -- systems ---------------------------------------------------------------------------

    def _bm25_rank(self, system: str, tree: Path, text: str) -> Ranking:
        index, built = self._bm25.get(tree, BM25_FILE_SETS[system])
        if built:
            self.builds.append(IndexBuild(system, tree.name, len(index.paths), index.build_seconds))
        started = time.perf_counter()
        paths = index.search(text, TOP_K)
        return Ranking(paths, time.perf_counter() - started)

    def _rg_count(self, tree: Path, text: str) -> Ranking:
        if self.rg is None:
            self.rg = find_rg()
            if self.rg is None:
                raise RuntimeError("ripgrep not found (pip install ripgrep)")
        started = time.perf_counter()
        paths = rg_count_rank(self.rg, tree, text, TOP_K)
        return Ranking(paths, time.perf_counter() - started)

    def _fast(self, case: Case, tree: Path, mode: str, text: str) -> Ranking:
        if self.tool_argv is None:
            raise RuntimeError("no slm-rerank command")
        argv = [*self.tool_argv, *self._query_args(case, mode, text)]
        argv += ["--fast", "--root", str(tree), "--format", "json", "-k", str(TOP_K)]
        self._run_tool(argv)  # warm-up: same query, result discarded
        started = time.perf_counter()
        proc = self._run_tool(argv)
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            message = proc.stderr.strip().splitlines()[-1:] or [""]
            return Ranking([], seconds, [], error=f"exit {proc.returncode}: {message[0]}")
        paths, citations, extra = parse_tool_output(proc.stdout)
        return Ranking(paths, seconds, citations, extra=extra)

    def _run_tool(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=self.timeout, check=False
        )

    def _query_args(self, case: Case, mode: str, text: str) -> list[str]:
        """`-q TEXT` for a title; a query file for the whole issue (argv limits) and for any
        text an option parser could mistake for an option."""
        if mode == "title" and not text.startswith("-") and "\0" not in text:
            return ["-q", text]
        if self._scratch is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="slm-bench-")
        # Mined case ids name their repository (owner/name@commit): no folders in the name.
        name = re.sub(r"[^A-Za-z0-9_.@-]", "_", case.id)
        query_file = Path(self._scratch.name) / f"{name}.{mode}.txt"
        query_file.write_text(text, encoding="utf-8")
        return ["--query-file", str(query_file)]
