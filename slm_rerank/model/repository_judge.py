"""What ``calibrate --write`` measured of a judge on one repository: whether asking it
helps there, and the weight its verdict is fused by.

The fused score of a judged chunk is one linear model (``fusion.py``):
``w * logit(judge) + z + prior``, where ``z`` is the learned ranker's (or the fixed
order's) score, standardised over the judged chunks. The judge's verdict is its last
feature and ``w`` its coefficient: the profile ships a default (measured on the
benchmark's dev cases), the user's ``[judge_weights]`` table may hold one measured for a
model id on the user's code, and this file holds the one measured on this repository's
own history, with whether the judge adds anything here at all.

Where ``calibrate`` found on at least ``MIN_CASES`` cases that no fused order it measured
measurably beats the order without the judge (``finding``), a search in the repository asks the
judge nothing (its 30-100 s a query on a CPU are saved) and says so with ``-v``;
``--ask-judge`` (``ask_judge_anyway``) asks it all the same.

The file lives in the user's cache, named by a hash of the work tree's real path (as the
repository's ranker model is): a repository's own files can neither name nor supply it.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slm_rerank.errors import SlmRerankError

FORMAT = 1
#: a findings file larger than this is not one (a model id a line: a few hundred bytes)
MAX_BYTES = 256_000


class FindingsError(SlmRerankError):
    """A findings file that cannot be used; the message names it."""


@dataclass(frozen=True)
class JudgeFinding:
    """One judge (by model id) on one repository, as ``calibrate --write`` measured it."""

    model_id: str
    #: False: the judge added nothing here, and a search does not ask it
    ask: bool
    #: the weight a search here fuses its verdicts by; None: the weight in use elsewhere
    weight: float | None
    #: one line: what was measured and why this was decided
    reason: str
    cases: int
    written_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"ask": self.ask, "weight": self.weight, "reason": self.reason,
                "cases": self.cases, "written_at": self.written_at}


def findings_path(cache_dir: Path, root: Path) -> Path:
    """Where the findings for the repository holding ``root`` are kept."""
    from slm_rerank.lexical.ranker import repository_digest

    return cache_dir / "judges" / f"{repository_digest(root)}.json"


def parse_findings(data: Any, where: str) -> dict[str, JudgeFinding]:
    """The findings of a decoded file, by model id; ``FindingsError`` names what is wrong."""
    from slm_rerank.config_keys import MAX_JUDGE_WEIGHT

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise FindingsError(f"{where}: not a judge findings file of format {FORMAT}")
    models = data.get("models")
    if not isinstance(models, dict):
        raise FindingsError(f"{where}: 'models' must be a table of model ids")
    out = {}
    for model_id, entry in models.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("ask"), bool):
            raise FindingsError(f"{where}: model {model_id!r}: 'ask' must be true or false")
        weight = entry.get("weight")
        if weight is not None and (isinstance(weight, bool)
                                   or not isinstance(weight, (int, float))
                                   or not math.isfinite(weight)
                                   or not 0.0 <= weight <= MAX_JUDGE_WEIGHT):
            raise FindingsError(f"{where}: model {model_id!r}: 'weight' must be a number "
                                f"from 0 to {MAX_JUDGE_WEIGHT:g}, or null")
        cases = entry.get("cases", 0)
        out[model_id] = JudgeFinding(
            model_id, entry["ask"], None if weight is None else float(weight),
            str(entry.get("reason", ""))[:500],
            cases if isinstance(cases, int) and not isinstance(cases, bool) else 0,
            str(entry.get("written_at", ""))[:40])
    return out


def load_findings(path: Path) -> dict[str, JudgeFinding]:
    """The findings kept at ``path`` (none when there is no file)."""
    from slm_rerank import safefile
    from slm_rerank.report import display_path

    where = display_path(str(path))
    try:
        fd = safefile.open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return {}
    except OSError as exc:  # NotRegularFile (a symlink, a FIFO) is an OSError too
        raise FindingsError(f"cannot read judge findings {where}: {exc}") from exc
    try:
        raw = safefile.read_at_most(fd, MAX_BYTES + 1)
    except OSError as exc:
        raise FindingsError(f"cannot read judge findings {where}: {exc}") from exc
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        raise FindingsError(f"{where}: over {MAX_BYTES} bytes, not a judge findings file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FindingsError(f"{where}: not valid JSON ({exc})") from exc
    return parse_findings(data, where)


def write_finding(path: Path, finding: JudgeFinding) -> None:
    """Keep ``finding`` at ``path`` beside the other model ids' (an unusable file is
    replaced). Raises ``OSError``."""
    from slm_rerank import safefile

    try:
        kept = load_findings(path)
    except FindingsError:
        kept = {}
    kept[finding.model_id] = finding
    document = {"format": FORMAT,
                "models": {m: f.to_json() for m, f in sorted(kept.items())}}
    safefile.replace_file(path, json.dumps(document, indent=1) + "\n")


@dataclass(frozen=True)
class RepositoryJudge:
    """The findings a search in one repository follows, and a warning when the file could
    not be used (the judge is then asked, by the weight in use elsewhere)."""

    findings: Mapping[str, JudgeFinding] = field(default_factory=dict)
    path: Path | None = None
    warning: str | None = None

    def weight(self, model_id: str | None) -> JudgeFinding | None:
        """The finding whose weight a search fuses ``model_id``'s verdicts by, if any."""
        found = self.findings.get(model_id) if model_id else None
        return found if found is not None and found.weight is not None else None

    def declined(self, model_ids: Sequence[str | None]) -> str | None:
        """Why the judge is not asked, when every server's model was found to add nothing
        in this repository; None when it is asked."""
        found = [self.findings.get(m) if m else None for m in model_ids]
        if not found or any(f is None or f.ask for f in found):
            return None
        first = found[0]
        assert first is not None
        return (f"calibrate --write measured that {first.model_id} adds nothing in this "
                f"repository ({first.reason}; {first.written_at or 'undated'}); pass "
                "--ask-judge to ask it anyway")


def for_repository(root: Path, cache_dir: Path | None) -> RepositoryJudge:
    """The findings for the repository holding ``root``; none without a cache folder."""
    if cache_dir is None:
        return RepositoryJudge()
    path = findings_path(cache_dir, root)
    try:
        return RepositoryJudge(load_findings(path), path)
    except FindingsError as exc:
        return RepositoryJudge({}, path, f"{exc}; the judge is asked as if nothing was "
                                         "measured here (run slm-rerank calibrate --write "
                                         "again, or delete the file)")


# --- deciding, from a calibrate run --------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """What ``finding`` reads of a calibrate run: MRR@10 without the judge and of each
    fused order over the same cases (weight -> its MRR@10 and the low end of the 95 %
    paired interval of its gain over the order without the judge), and the weight chosen
    (None: the run could not tell a better one from the weight in use)."""

    model_id: str
    cases: int
    without: float
    fused: Mapping[float, tuple[float, float]]
    chosen: float | None


def finding(measured: Measured, min_cases: int, now: float | None = None
            ) -> JudgeFinding | None:
    """Whether the judge is asked here: only when the best fused order measured has an
    MRR@10 above the order without the judge, the 95 % interval of the gain above 0; None
    when the cases are too few (``min_cases``) to decide on.

    The fused orders are measured in sample, which favours the judge: a judge whose best
    weight still gains nothing sure is one no weight could make pay for its time."""
    if measured.cases < min_cases or not measured.fused:
        return None
    stamp = time.strftime("%Y-%m-%d", time.gmtime(time.time() if now is None else now))
    best_weight = max(measured.fused, key=lambda w: (measured.fused[w][0], -w))
    best, low = measured.fused[best_weight]
    summary = (f"MRR@10 {measured.without:.3f} without it, at most {best:.3f} fused "
               f"(w={best_weight:g}, gain 95 % interval from {low:+.3f}), "
               f"{measured.cases} cases")
    if not (best > measured.without and low > 0):
        return JudgeFinding(measured.model_id, False, None, summary, measured.cases, stamp)
    return JudgeFinding(measured.model_id, True, measured.chosen, summary, measured.cases,
                        stamp)
