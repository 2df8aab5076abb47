"""`slm-rerank calibrate`: measure the lexical order and the judge on cases mined from the
repository's own history, and (``--write``) keep the judge weight that measured best."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from slm_rerank.cli.model_flags import model_options
from slm_rerank.cli.terminal import emit, fail, text_or_json, warn
from slm_rerank.errors import SlmRerankError

#: the weights tried by default; today's weight (profile or user config) is always added
DEFAULT_WEIGHTS = "0.1,0.25,0.5,1,2"
#: the model flags calibrate and bench --cases take
MODEL_FLAGS = ("model", "base_url", "host", "api", "scorer", "rerank_top", "timeout", "cache",
               "budget", "cascade")


def _weights(ctx: click.Context, param: click.Parameter, text: str) -> list[float]:
    from slm_rerank.config_keys import MAX_JUDGE_WEIGHT

    try:
        values = sorted({float(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a list of numbers such as 0.25,0.5,1",
                                 ctx, param) from None
    if not values or any(not 0.0 <= v <= MAX_JUDGE_WEIGHT for v in values):
        raise click.BadParameter(f"give one or more weights from 0 to {MAX_JUDGE_WEIGHT:g}, "
                                 "comma-separated", ctx, param)
    return values


#: shared with `bench --cases` (each flag is declared once in the CLI)
fast_option = click.option("--fast", is_flag=True,
                           help="Measure the lexical order alone; no model server is asked.")
weights_option = click.option(
    "--weights", default=DEFAULT_WEIGHTS, show_default=True, callback=_weights,
    metavar="W,W,...", help="Judge weights to fuse by (the weight in use is always added).")


def _rules() -> str:
    from slm_rerank.calibration.mining import RULES

    return "\b\nA commit is skipped when it is:\n" + "\n".join(
        f"  {name:<15} {meaning}" for name, meaning in RULES)


#: seconds between two progress lines on stderr when it is not a terminal (a pipe, a log)
LOG_EVERY = 10.0


def _command_name() -> str:
    context = click.get_current_context(silent=True)
    return (context.info_name if context is not None else None) or "calibrate"


class Progress:
    """Where a long run is, on stderr. On a terminal, a bar for mining and one for the
    measurement (the judge's own bar is hushed meanwhile: two bars on one line garble
    both). Off a terminal (a pipe, a log file), one plain line every ``LOG_EVERY`` seconds,
    so that a run of minutes is not silent and never writes a carriage return."""

    def __init__(self, command: str | None = None) -> None:
        from slm_rerank.model import progress

        self.command = command or _command_name()
        self.bar: Any = None
        self.hushed: bool | None = None  # the judge's bar setting before this one hushed it
        try:
            self.lines = not progress.QUIET and not sys.stderr.isatty()
        except (AttributeError, ValueError):  # no stderr, or a closed one
            self.lines = False
        self.next_line = time.monotonic() + LOG_EVERY

    def mined(self, looked_at: int, total: int, cases: int) -> None:
        """After each commit mined: ``looked_at`` of ``total``, ``cases`` found so far."""
        from slm_rerank.model import progress

        if self.bar is None:
            self.bar = progress.Progress(total, label="mining")
        self.bar.advance()
        self._line(f"{looked_at} of {total} commits mined, {cases} cases found")

    def __call__(self, done: int, total: int) -> None:
        """After each case measured (``run.Advance``)."""
        from slm_rerank.model import progress

        if self.hushed is None:
            self._close_bar()  # mining's
            self.bar = progress.Progress(total, label="measuring", delay=0.0)
            self.hushed, progress.QUIET = progress.QUIET, True
        self.bar.advance()
        self._line(f"{done} of {total} cases measured")

    def _line(self, text: str) -> None:
        if not self.lines or time.monotonic() < self.next_line:
            return
        self.next_line = time.monotonic() + LOG_EVERY
        try:
            click.echo(f"slm-rerank: {self.command}: {text}", err=True)
        except (OSError, ValueError):  # stderr closed (a reader gone): the run goes on
            self.lines = False

    def _close_bar(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def close(self) -> None:
        """Clear the bar; a later command in this process gets the judge's bar back."""
        from slm_rerank.model import progress

        self._close_bar()
        if self.hushed is not None:
            progress.QUIET, self.hushed = self.hushed, None


@contextlib.contextmanager
def terminate_cleanly() -> Iterator[None]:
    """Let SIGTERM, SIGHUP (the terminal closed) and SIGQUIT unwind like Ctrl-C while the
    command runs, so the temporary trees are removed; the previous handlers are put back
    after (a caller's own process). A signal the process was started with ignored stays
    ignored: ``nohup slm-rerank calibrate`` must outlive its terminal."""
    from slm_rerank.calibration.trees import STOP_SIGNALS

    taken: dict[int, Any] = {}
    try:
        for number in STOP_SIGNALS:
            if number == signal.SIGINT:  # Python's own: KeyboardInterrupt
                continue
            previous = signal.getsignal(number)
            if previous is signal.SIG_IGN:
                continue
            signal.signal(number, lambda signum, frame: sys.exit(128 + signum))
            taken[number] = previous
    except ValueError:  # not the main thread: signals are not ours to take
        pass
    try:
        yield
    finally:
        for number, previous in taken.items():
            signal.signal(number, previous)


class _WithRules(click.Command):
    """A command whose --help ends with the mining rules, read only when --help is asked
    (importing the miner would cost every search's start-up)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.epilog = _rules()
        super().format_epilog(ctx, formatter)


@click.command(cls=_WithRules)
@click.argument("repo", default=".",
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--commits", type=click.IntRange(1, 100_000), default=300, show_default=True,
              help="How many commits back to look (newest first).")
@click.option("--with-body", is_flag=True,
              help="The query is the whole commit message, not the subject alone.")
@fast_option
@weights_option
@click.option("--learn", is_flag=True,
              help="Fit the learned ranker to REPO's history (train on its older cases, "
                   "test on the newest third) and measure it against the shipped model "
                   "and the fixed order; no model server is asked.")
@click.option("--write", is_flag=True,
              help="Store the best weight for the server's model id in the user config "
                   "(only when the cases tell it apart from the weight in use); with "
                   "--learn, keep the fitted model in the user cache for REPO (only when "
                   "it beats the shipped one).")
@text_or_json
@model_options(only=MODEL_FLAGS)
def calibrate(repo: Path, commits: int, with_body: bool, fast: bool, weights: list[float],
              learn: bool, write: bool, format_name: str, **model_flags: Any) -> None:
    """Measure ranking on cases mined from REPO's history (default: here).

    Each case is a commit that fixed something: its subject is the query, the source
    files it changed are the answer, and it is searched in the tree as it was before the
    commit (laid out in the cache folder, removed afterwards). Prints Hit@1/5/10 and
    MRR@10 of the lexical order, the judge alone and the fused order at each weight, with a
    95 % interval on each one's difference from the lexical order.

    With --learn, fits the learned ranker to the cases instead: the oldest two thirds
    train, the newest third tests, and the fixed order, the shipped model and the
    repository's model are measured there (Hit@1, Hit@5, MRR@10, with 95 % intervals).
    """
    if learn:
        with terminate_cleanly():
            _learn(repo, commits, with_body, write, format_name, model_flags)
        return
    if write and fast:
        raise click.UsageError("--write stores a judge weight, which --fast does not "
                               "measure; drop one of them")
    with terminate_cleanly():
        _calibrate(repo, commits, with_body, fast, weights, write, format_name, model_flags)


def _calibrate(repo: Path, commits: int, with_body: bool, fast: bool, weights: list[float],
               write: bool, format_name: str, model_flags: dict[str, Any]) -> None:
    from slm_rerank.calibration.trees import commit_tree, sweep

    progress = Progress()
    try:
        root, mined = _mined(repo, commits, with_body, progress)
        header = [f"{root}: {len(mined.cases)} cases from the last {mined.looked_at} commits "
                  f"(query: {'whole message' if with_body else 'subject'})",
                  "skipped: " + (", ".join(f"{n} {why}" for why, n
                                           in mined.skipped.most_common()) or "none")]

        def trees(cache: Path) -> Callable[[Any], Any]:
            sweep(cache / "calibrate")  # what killed runs left behind
            return lambda case: commit_tree(root, case.tree, cache)

        measure(root, mined.cases, trees, fast, weights, write, format_name, model_flags,
                header, {"repository": str(root), "commits_looked_at": mined.looked_at,
                         "skipped": dict(mined.skipped), "with_body": with_body}, progress)
    except SlmRerankError as exc:
        fail(str(exc))


def _mined(repo: Path, commits: int, with_body: bool, progress: Progress
           ) -> tuple[Path, Any]:
    """The history's root and the cases mined from its last ``commits`` commits; a
    history with no case fails in one line."""
    from slm_rerank.calibration.mining import history_root, mine

    root = history_root(repo.resolve())
    try:
        mined = mine(root, commits, with_body, advance=progress.mined)
    finally:
        progress.close()
    if not mined.cases:
        skipped = ", ".join(f"{n} {why}" for why, n in mined.skipped.most_common())
        fail(f"no case in the last {mined.looked_at} commits of {root} (skipped: "
             f"{skipped or 'none'}); raise --commits")
    return root, mined


def _learn(repo: Path, commits: int, with_body: bool, write: bool, format_name: str,
           model_flags: dict[str, Any]) -> None:
    """``calibrate --learn`` (``calibration/per_repository.py``)."""
    from slm_rerank.calibration import per_repository as per

    started = time.monotonic()
    progress = Progress()
    try:
        root, mined = _mined(repo, commits, with_body, progress)
        why = per.too_few_mined(len(mined.cases))
        if why:
            fail(f"calibrate --learn: {why}; nothing written")
        _fit_and_measure(root, mined, with_body, write, format_name, model_flags, progress,
                         started)
    except SlmRerankError as exc:
        fail(str(exc))


def _fit_and_measure(root: Path, mined: Any, with_body: bool, write: bool, format_name: str,
                     model_flags: dict[str, Any], progress: Progress, started: float) -> None:
    from slm_rerank import __version__
    from slm_rerank.cache_folder import cache_path, ensure_writable
    from slm_rerank.calibration import per_repository as per
    from slm_rerank.calibration.output import render_learn_json, render_learn_text
    from slm_rerank.calibration.run import MEASURED_TOP_K
    from slm_rerank.calibration.trees import commit_tree, sweep
    from slm_rerank.host import Host
    from slm_rerank.lexical.history import read_history
    from slm_rerank.lexical.ranker import repository_model_path, shipped_model
    from slm_rerank.overrides import overrides

    shipped = shipped_model()  # a RankerError names the file and what to do
    host = Host.from_environment(start=root, flags=overrides(**model_flags)).with_overrides(
        "calibrate --learn ({key} of a measured search)", top_k=MEASURED_TOP_K)
    cache = ensure_writable(cache_path(host.settings))
    sweep(cache / "calibrate")  # what killed runs left behind
    log = per.commit_dates(root, mined.looked_at)
    history_notes: list[str] = []

    def history_at(commit: str) -> Any:
        return read_history(root, cache_dir=cache, notes=history_notes,
                            deadline_s=per.HISTORY_DEADLINE, rev=commit)

    def tree_of(case: Any) -> Any:
        return commit_tree(root, case.tree, cache)  # a mined case's tree is its parent

    try:
        extraction = per.extract_examples(mined.cases, {c[:12]: d for c, d in log}, tree_of,
                                          history_at, host, cache, progress)
    finally:
        progress.close()
    for line in extraction.bad_trees[:5]:
        warn(f"tree could not be laid out, left out: {line}")
    if len(extraction.bad_trees) > 5:
        warn(f"... and {len(extraction.bad_trees) - 5} more cases whose tree could not be "
             "laid out")
    split = per.time_split(extraction.examples)
    why = per.too_few(split)
    if why:
        fail(f"calibrate --learn: {why}; nothing written")
    query = "whole message" if with_body else "subject"
    about: dict[str, Any] = {
        "repository": str(root),
        "commits": {"looked_at": mined.looked_at, "newest": log[0][0] if log else None,
                    "oldest": log[-1][0] if log else None},
        "query": query,
        "split": {"train": len(split.train),
                  "train_with_answer_found": sum(e.useful for e in split.train),
                  "test": len(split.test), "train_until": per.iso_date(split.train_until),
                  "test_from": per.iso_date(split.test_from),
                  "rule": "sorted by commit date, then by place in the history; the newest "
                          f"{per.TEST_SHARE:.0%} test, the rest train"},
        "started_from": {"name": shipped.name, "meta": shipped.meta},
    }
    model = per.fit_repository(split.train, shipped, f"{shipped.name}+{root.name}", {})
    measured = per.measure_orders(split.test, shipped, model)
    decision = per.decide(measured)
    document = {**about, "measured": per.measured_json(measured), "rule": per.RULE,
                "wins": decision.wins, "decision": decision.reason}
    written = None
    path = repository_model_path(cache, root)
    if write and decision.wins:
        kept = dataclasses.replace(model, meta={
            **document, "slm_rerank": __version__,
            "recipe": "slm-rerank calibrate --learn: listwise softmax over each case's "
                      "candidate files, starting from and pulled towards the shipped model",
            "written_at": per.iso_date(int(time.time()))})
        try:
            per.write_model(path, kept)
        except OSError as exc:
            fail(f"cannot write the repository's model to {path} "
                 f"({exc.strerror or exc}); set cache_dir or SLM_RERANK_CACHE_DIR to a "
                 "writable folder")
        written = f"{path} (a search in {root} now orders files by it; delete the file to "
        written += "go back to the shipped model)"
    elif write:
        stays = (f"; the model kept earlier at {path} stays in use (delete it to use the "
                 "shipped one)" if path.exists() else "")
        warn(f"--write: nothing written: {decision.reason}{stays}")
    seconds = time.monotonic() - started
    verdict = (f"{'wins' if decision.wins else 'does not win'}: {decision.reason}")
    if format_name == "json":
        emit(render_learn_json({**document, "cases": len(extraction.examples),
                                "left_out": dict(extraction.dropped),
                                "skipped": dict(mined.skipped),
                                "without_history": extraction.no_history,
                                "written": str(path) if written else None,
                                "seconds": round(seconds, 1)}))
        return
    header = [
        f"{root}: {len(mined.cases)} cases from the last {mined.looked_at} commits "
        f"(query: {query}), {len(extraction.examples)} searched in their parent's tree",
        "skipped: " + (", ".join(f"{n} {why}" for why, n in mined.skipped.most_common())
                       or "none"),
    ]
    if extraction.dropped:
        header.append("left out: " + ", ".join(f"{n} ({reason})" for reason, n
                                              in sorted(extraction.dropped.items())))
    if not host.settings.learned_order:
        header.append("note: learned_order = false (from "
                      f"{host.settings.origins.get('learned_order', 'default')}): a search "
                      "keeps the fixed lexical order, whatever model is kept")
    if extraction.no_history:
        header.append(f"{extraction.no_history} cases searched without their change history "
                      f"({history_notes[0] if history_notes else 'it could not be read'})")
    header += [
        f"split by time: {len(split.train)} oldest cases train (commits up to "
        f"{per.iso_date(split.train_until)}), {len(split.test)} newest test (from "
        f"{per.iso_date(split.test_from)})",
        f"fitted from the shipped model {shipped.name!r} on "
        f"{about['split']['train_with_answer_found']} training cases whose answer the "
        f"lexical stage found; {seconds:.0f} s in all",
    ]
    emit(render_learn_text(header, measured, shipped.name, per.RULE,
                           f"this repository's model {verdict}", written))


def measure(root: Path, cases: list[Any], trees: Callable[[Path], Any], fast: bool,
            weights: list[float],
            write: bool, format_name: str, model_flags: dict[str, Any], header: list[str],
            about: dict[str, Any], progress: Progress | None = None,
            per_case: bool = False) -> None:
    """Run the measurement over ``cases`` and print it; ``write``: keep the best weight.

    ``trees`` gives, for the cache folder, what lays out each case's tree. ``per_case``
    (``bench --cases``, the user's own labelled cases) prints each case's result, and
    ends with an error when not one case could be measured."""
    from slm_rerank.cache_folder import cache_path, ensure_writable
    from slm_rerank.calibration.output import case_results, render_json, render_text
    from slm_rerank.calibration.run import judge_finding, run_cases
    from slm_rerank.host import Host
    from slm_rerank.overrides import overrides

    host = Host.from_environment(start=root, flags=overrides(**model_flags))
    settings = host.settings
    cache = ensure_writable(cache_path(settings))
    progress = progress or Progress()
    try:
        measured = run_cases(cases, trees(cache), host, cache, weights, fast, progress)
    finally:
        progress.close()
    for line in (measured.model.degraded if measured.model else [])[:5]:
        warn(f"degraded, left out: {line}")
    for line in measured.bad_trees[:5]:
        warn(f"tree could not be laid out, left out: {line}")
    if len(measured.bad_trees) > 5:
        warn(f"... and {len(measured.bad_trees) - 5} more cases whose tree could not be laid "
             "out")
    if per_case and not measured.results:
        reasons = measured.dropped.most_common()
        why = (reasons[0][0] if len(reasons) == 1
               else ", ".join(f"{n}: {reason}" for reason, n in reasons))
        hint = (f"; gold files are paths relative to {root}"
                if any("gold" in reason for reason in measured.dropped) else "")
        fail(f"no case could be measured: all {len(cases)} were left out ({why}){hint}")
    shown = case_results(cases, measured) if per_case else None
    written = _write(measured) if write else None
    here = judge_finding(measured)
    kept = _write_finding(root, cache, here, measured) if write else None
    if format_name == "json":
        emit(render_json(measured, about, written, shown, here, kept))
    else:
        emit(render_text(measured, header, written, shown, here, kept))


def _write_finding(root: Path, cache: Path, finding: Any, measured: Any) -> str | None:
    """Keep what was measured of the judge on this repository in the user's cache
    (``repository_judge``); None (and why, on stderr) when there is nothing to keep."""
    from slm_rerank.calibration.measure import MIN_CASES
    from slm_rerank.model.repository_judge import findings_path, write_finding

    if finding is None:
        if measured.model is not None and measured.model.model_id:
            warn(f"--write: nothing kept for this repository's judge: "
                 f"{len(measured.results)} cases judged, at least {MIN_CASES} are needed "
                 "to tell whether it adds anything here; raise --commits")
        return None
    path = findings_path(cache, root)
    try:
        write_finding(path, finding)
    except OSError as exc:
        fail(f"cannot write the judge's findings to {path} ({exc.strerror or exc}); set "
             "cache_dir or SLM_RERANK_CACHE_DIR to a writable folder")
    effect = ("a search here asks it and fuses its verdicts by "
              f"w={finding.weight:g}" if finding.ask and finding.weight is not None
              else "a search here asks it" if finding.ask
              else "a search here does not ask it (--ask-judge asks it anyway)")
    return f"{path}: {effect}; delete the file to forget it"


def _write(measured: Any) -> str | None:
    """Store the chosen weight in the user config; None (and why, on stderr) when not."""
    from slm_rerank.calibration.weights import KEY, write_judge_weight
    from slm_rerank.config import user_config_path

    choice, model = measured.choice, measured.model
    if choice is None or not choice.separated:
        warn(f"--write: nothing written: {choice.reason if choice else 'no model verdicts'}")
        return None
    if not model.model_id:
        warn("--write: nothing written: the model server reported no model id to store "
             "the weight under")
        return None
    path = user_config_path()
    write_judge_weight(path, model.model_id, choice.best)
    return f"{KEY}[{model.model_id!r}] = {choice.best:g} in {path}"

