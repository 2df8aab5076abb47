"""A user's own labelled queries for ``bench --cases``: one JSON object a line.

    {"query": "where are retries configured", "gold_files": ["src/http.py"],
     "gold_lines": {"src/http.py": [[10, 24]]}, "id": "retries"}

``query`` and ``gold_files`` are required, ``gold_lines`` and ``id`` optional; any other
key, or a value of the wrong shape, is an error naming the file, the line and the key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slm_rerank.calibration.mining import Case
from slm_rerank.errors import ConfigError
from slm_rerank.query_limit import MAX_QUERY_BYTES, too_long
from slm_rerank.report import visible

#: a cases file larger than this is refused before it is read
MAX_CASES_BYTES = 20_000_000
KNOWN_KEYS = ("query", "gold_files", "gold_lines", "id")


def _fault(path: Path, number: int, message: str) -> ConfigError:
    return ConfigError(visible(f"{path} line {number}: {message}"))


def _plain(gold: str) -> str:
    """``gold`` as the search names a file: "./src//a.py" is "src/a.py" (else it would never
    match a result, and the case would count as a silent miss)."""
    return "/".join(part for part in gold.split("/") if part not in ("", "."))


def _case(path: Path, number: int, obj: Any) -> Case:
    if not isinstance(obj, dict):
        raise _fault(path, number, f"expected a JSON object, got {type(obj).__name__}")
    unknown = [key for key in obj if key not in KNOWN_KEYS]
    if unknown:
        raise _fault(path, number, f"unknown key {unknown[0]!r} (known: "
                                   f"{', '.join(KNOWN_KEYS)})")
    for key in ("query", "gold_files"):
        if key not in obj:
            raise _fault(path, number, f"key {key!r} is missing")
    query = obj["query"]
    if not isinstance(query, str) or not query.strip():
        raise _fault(path, number, "key 'query' must be a non-empty string")
    if len(query.encode("utf-8", "surrogatepass")) > MAX_QUERY_BYTES:
        raise _fault(path, number, "key 'query': " + too_long("the query"))
    gold = obj["gold_files"]
    if (not isinstance(gold, list) or not gold
            or not all(isinstance(p, str) and p.strip() for p in gold)):
        raise _fault(path, number, "key 'gold_files' must be a non-empty list of paths "
                                   "relative to the searched root")
    if any(p.startswith("/") or ".." in p.split("/") for p in gold):
        raise _fault(path, number, "key 'gold_files': each path must be relative to the "
                                   "searched root, without '..'")
    gold = list(dict.fromkeys(_plain(p) for p in gold))
    if "" in gold:
        raise _fault(path, number, "key 'gold_files': a path names no file")
    lines = obj.get("gold_lines", {})
    if not isinstance(lines, dict):
        raise _fault(path, number, "key 'gold_lines' must be an object: path -> "
                                   "[[start, end], ...]")
    spans: dict[str, list[tuple[int, int]]] = {}
    for named, ranges in lines.items():
        file = _plain(named)
        if file not in gold:
            raise _fault(path, number, f"key 'gold_lines': {named!r} is not in gold_files")
        if not isinstance(ranges, list) or not all(
                isinstance(r, list) and len(r) == 2
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in r)
                and r[0] <= r[1] for r in ranges):
            raise _fault(path, number, f"key 'gold_lines': {named!r} must hold [start, end] "
                                       "pairs of line numbers from 1, start <= end")
        spans[file] = [(r[0], r[1]) for r in ranges]
    case_id = obj.get("id", f"line {number}")
    if not isinstance(case_id, str):
        raise _fault(path, number, "key 'id' must be a string")
    return Case(id=case_id, query=query, gold_files=tuple(gold), gold_lines=spans)


def load_cases(path: Path) -> list[Case]:
    """Every case of a ``.jsonl`` file, each line checked; blank lines are skipped."""
    from slm_rerank import safefile

    try:  # a FIFO nobody writes: an error after PIPE_SECONDS, not a hang
        raw = safefile.read_named(path, MAX_CASES_BYTES + 1)
    except (safefile.NotRegularFile, safefile.PipeTimeout) as exc:
        raise ConfigError(f"{exc}; give the .jsonl file of cases") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CASES_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CASES_BYTES // 1_000_000} MB; split it")
    cases = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise _fault(path, number, "not UTF-8") from None
        except (json.JSONDecodeError, RecursionError) as exc:
            raise _fault(path, number, f"not JSON: {exc}") from None
        cases.append(_case(path, number, obj))
    if not cases:
        raise ConfigError(f"{path}: holds no case (one JSON object a line)")
    return cases
