"""`slm-rerank hook claude-prompt`: ranked places as context for a Claude Code prompt.

Claude Code runs a ``UserPromptSubmit`` hook with a JSON object on stdin (``prompt``,
``cwd``, ``session_id``, ``transcript_path``, ``hook_event_name``, ...). On exit code 0 it
parses a JSON object on stdout and adds ``hookSpecificOutput.additionalContext`` to the
context the model sees; exit code 2 would *block* the prompt and any other code is a
non-blocking error shown in verbose mode. So this hook exits 0 whatever happens, prints
nothing unless it has context to give, and says at most one line on stderr.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slm_rerank.errors import ConfigError
from slm_rerank.hook import stdio
from slm_rerank.hook.prompt_classifier import (
    MAX_FILE_SHARE,
    QUERY_CHARS,
    Decision,
    by_vocabulary,
    classify,
)
from slm_rerank.hook.stdio import (
    DEADLINE_ENV,
    DEFAULT_DEADLINE,
    deadline_from,
    held_stderr,
    read_stdin,
    say_one_line,
    started_at,
)
from slm_rerank.report import visible

if TYPE_CHECKING:
    from slm_rerank.hook.vocabulary import Vocabulary
    from slm_rerank.lexical.plan import SearchPlan

__all__ = ["CALLER", "DEFAULT_DEADLINE", "DEADLINE_ENV", "Decision", "Outcome", "classify",
           "deadline_from", "main", "render", "run"]

CALLER = "claude-code-hook"
#: places listed in the context: enough to point the way, short enough to read at a glance
TOP_K = 5
#: the share of the time left that reading the repository's vocabulary may take: a cold
#: read of a large tree must leave the search its time (what it read is kept for next time)
VOCABULARY_SHARE = 0.5
#: the most stdin read: a prompt with a long paste fits; a runaway writer stops here
MAX_STDIN_BYTES = 2_000_000
#: The hook's search plan (``lexical.plan``): the query terms searched for and the candidate
#: files read and sliced. A plain-English prompt gives many common words, and on a large
#: tree every one of them costs rg time and a count in hundreds of files, and every file
#: read costs its slicing and scoring; the hook shows TOP_K places and has no time for that.
HOOK_TERMS = 10
HOOK_FILES = 16

# --- the hook -------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one hook run decided and what it prints (``None``: nothing)."""

    output: str | None
    #: the usage-log record: decision (query, skip, timeout, error), reason, queried
    hook: dict[str, Any]
    query: str = ""
    latency_ms: float = 0.0
    #: the search still runs in a thread: the process must end without waiting for it
    abandoned: bool = False
    top_paths: list[str] = dataclasses.field(default_factory=list)


def _configured_deadline(cwd: Path) -> float | None:
    """``hook_deadline`` from the settings that apply in ``cwd``; None if they cannot be read."""
    from slm_rerank.config import load_settings

    try:
        return load_settings(start=cwd).hook_deadline
    except Exception:  # a broken config file must not cost the prompt: the default applies
        return None


class InputTooLong(ValueError):
    """The hook's stdin held more than MAX_STDIN_BYTES: valid, perhaps, but not read whole."""


def parse_input(data: bytes) -> tuple[str, str | None]:
    """``(prompt, cwd)`` from the hook's stdin; ValueError says what is wrong with it."""
    if not data.strip():
        raise ValueError("stdin is empty; expected the UserPromptSubmit JSON object")
    if len(data) > MAX_STDIN_BYTES:  # main reads one byte more than the cap to tell
        raise InputTooLong(f"hook input too long: over {MAX_STDIN_BYTES} bytes (the cap on "
                           "stdin), so the prompt was not searched and no context is given")
    # A prompt is text; bytes that are not UTF-8 are replaced, never a reason to fail.
    doc = json.loads(data.decode("utf-8", errors="replace"))
    if not isinstance(doc, dict):
        raise ValueError(f"stdin holds a JSON {type(doc).__name__}, not the "
                         "UserPromptSubmit object")
    prompt = doc.get("prompt")
    if not isinstance(prompt, str):
        raise ValueError("the hook input has no string 'prompt'")
    cwd = doc.get("cwd")
    return prompt, cwd if isinstance(cwd, str) and cwd else None


def ranking(report: Any, fast: bool) -> str:
    """How the places were ordered, as the context says it: by a model only when one judged
    them (a degraded run that judged none, or a cascade that asked none, is the lexical
    order)."""
    if fast:
        return "lexical ranking"
    scored = report.model.scored if report.model is not None else 0
    if report.degraded is None:
        # nothing judged and nothing wrong: the cascade found the lexical order decisive
        return "ranked by a model" if scored else "lexical ranking; no model was needed"
    if not scored:
        return "lexical ranking; the model was unavailable"
    return (f"ranked by a model for {scored} of the chunks, lexically for the rest; the model "
            "stopped early")


def render(report: Any, fast: bool) -> str | None:
    """The hook's JSON answer: ranked ``file:line`` places as additional context.

    Paths and symbols are the repository's: escaped (``report.visible``), so a file name
    holding a newline cannot add a line of its own to what the agent reads.
    """
    if not report.results:
        return None
    lines = [f"slm-rerank: places in this repository that may answer the prompt "
             f"({ranking(report, fast)}; read them before searching):"]
    for c in report.results[:TOP_K]:
        symbol = f"  {visible(c.symbol)}" if c.symbol else ""
        lines.append(f"- {visible(c.path)}:{c.start_line}{symbol}")
    context = "\n".join(lines)
    return json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                              "additionalContext": context}})


def _host_for(cwd: Path, deadline: float) -> tuple[Any, bool, bool]:
    """The host for ``cwd`` with its own logging off (the hook logs its decision itself),
    whether the user's settings keep a usage log, and whether to stay in fast mode."""
    from slm_rerank.host import Host

    host = Host.from_environment(start=cwd)
    settings = host.settings
    # A model only when the user pointed at one; scanning ports for a server costs time a
    # prompt hook does not have.
    listed = settings.endpoints
    fast = not (settings.base_url or (isinstance(listed, list) and listed) or (
        settings.model and isinstance(listed, dict) and settings.model in listed))
    changes: dict[str, Any] = {"usage_log": False, "top_k": TOP_K}
    if not fast:
        # the model stage keeps what it has past its timeout: leave room to print
        changes["timeout"] = max(0.1, min(settings.timeout, deadline * 0.8))
    host = host.with_overrides("the prompt hook ({key})", **changes)
    return host, settings.usage_log, fast


def _record(judged: Decision, **fields: Any) -> dict[str, Any]:
    """The usage-log record of a decision: which rule, whether it judged a code question."""
    record = {**fields, "reason": judged.reason, "code": judged.code}
    if judged.evidence:
        record["evidence"] = judged.evidence
    return record


def hook_plan(prompt: str, vocabulary: Vocabulary | None, terms: int = HOOK_TERMS,
              files: int = HOOK_FILES) -> SearchPlan:
    """The hook's search: at most ``terms`` of the prompt's terms, ``files`` files read.

    The terms kept are those of identifier or file-name shape, then the words the
    repository's own names hold (its vocabulary, when the repository rule read it) in at
    most MAX_FILE_SHARE of its files, then the rest, each group in the query's order of
    terms (weightiest, then longest, first).
    """
    from slm_rerank.lexical.plan import SearchPlan, choose_terms
    from slm_rerank.lexical.terms import extract

    found = extract(prompt[:QUERY_CHARS]).terms
    if vocabulary is None:
        def files_naming(word: str) -> int | None:
            return None
        ceiling = 0
    else:
        def files_naming(word: str) -> int | None:
            hit = vocabulary.lookup(word)
            return None if hit is None else hit[0]
        ceiling = max(2, math.ceil(MAX_FILE_SHARE * vocabulary.files))
    chosen = choose_terms(found, files_naming, ceiling, terms) if found else None
    return SearchPlan(terms=chosen, max_files=files)


def _by_repository(prompt: str, cwd: Path, host: Any, seconds: float
                   ) -> tuple[Decision, Vocabulary | None]:
    """The repository rule's decision on a prompt the shapes left open, its vocabulary read
    (from the cache, or built) within ``seconds``; and that vocabulary (None: not read)."""
    from slm_rerank.cache_folder import cache_path
    from slm_rerank.hook import vocabulary

    started = time.perf_counter()
    try:
        loaded = vocabulary.load(cwd, cache_path(host.settings), seconds)
    except vocabulary.OutOfTime:
        return Decision(False, "repository vocabulary not read in time (kept for next time)"
                        ), None
    judged = by_vocabulary(prompt, loaded.vocabulary)
    took = (time.perf_counter() - started) * 1000
    return dataclasses.replace(judged, evidence=f"{judged.evidence}; vocabulary "
                               f"{'cached' if loaded.cached else 'built'} in {took:.0f} ms"
                               ), loaded.vocabulary


def run(data: bytes, deadline: float, force_fast: bool = False, spent: float = 0.0) -> Outcome:
    """Decide on the prompt in ``data`` and, for a code question, search within ``deadline``.

    The shapes decide first; a prompt they leave open is judged by the repository's
    vocabulary, read in the search's thread, so that its time counts against the deadline.
    ``spent``: seconds of the deadline already gone (reading stdin).
    """
    started = time.perf_counter() - spent

    def elapsed_ms() -> float:
        return (time.perf_counter() - started) * 1000

    try:
        prompt, cwd_text = parse_input(data)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return Outcome(None, {"decision": "error", "queried": False,
                              "reason": str(exc) if isinstance(exc, InputTooLong)
                              else f"unreadable hook input: {exc}"},
                       latency_ms=elapsed_ms())
    decision = classify(prompt)
    if not decision.code and decision.final:
        return Outcome(None, _record(decision, decision="skip", queried=False),
                       query=prompt, latency_ms=elapsed_ms())
    cwd = Path(cwd_text) if cwd_text else Path.cwd()
    if not cwd.is_dir():
        return Outcome(None, {"decision": "error", "queried": False,
                              "reason": f"cwd {cwd} from the hook input is not a folder"},
                       query=prompt, latency_ms=elapsed_ms())
    result: dict[str, Any] = {"decision": decision}

    def search() -> None:
        try:
            from slm_rerank.api import search as api_search

            host, _, fast = _host_for(cwd, deadline)
            words = None
            if not decision.code:
                left = deadline - (time.perf_counter() - started)
                judged, words = _by_repository(prompt, cwd, host, left * VOCABULARY_SHARE)
                result["decision"] = judged
                if not judged.code:
                    return
            result["searching"] = True
            fast = fast or force_fast
            report = api_search(prompt[:QUERY_CHARS], cwd, fast=fast, caller=CALLER,
                                host=host, top_k=TOP_K, plan=hook_plan(prompt, words))
            result["output"] = render(report, fast)
            result["top_paths"] = [c.path for c in report.results[:TOP_K]]
            result["fast"] = fast
        except ConfigError as exc:  # the search never ran: say so, not what failed later
            result["config"] = f"config error, no context given: {exc}"
        except Exception as exc:  # noqa: BLE001 - the user's prompt must never fail for it
            result["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=search, name="slm-rerank-hook", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - (time.perf_counter() - started)))
    decision = result["decision"]
    if worker.is_alive():
        # The search goes on in its thread: end the tools it started (rg, git), which would
        # otherwise run on, orphaned, after the hook has answered.
        from slm_rerank.lexical.matches import kill_tools

        kill_tools()
        searching = bool(result.get("searching"))
        record = _record(decision, decision="timeout", queried=searching, deadline_s=deadline)
        if not decision.code:  # still reading the repository's words: not judged yet
            record.update(reason="repository vocabulary not read in time", code=None)
        return Outcome(None, record, query=prompt, latency_ms=elapsed_ms(), abandoned=True)
    if "config" in result:
        return Outcome(None, {"decision": "error", "queried": False,
                              "reason": result["config"]},
                       query=prompt, latency_ms=elapsed_ms())
    if "error" in result:
        return Outcome(None, {"decision": "error", "queried": bool(result.get("searching")),
                              "reason": f"{decision.reason}; search failed: "
                                        f"{result['error']}"},
                       query=prompt, latency_ms=elapsed_ms())
    if not decision.code:
        return Outcome(None, _record(decision, decision="skip", queried=False),
                       query=prompt, latency_ms=elapsed_ms())
    output = result.get("output")
    return Outcome(output, _record(decision, decision="query", queried=True,
                                   fast=result.get("fast", True), results=output is not None),
                   query=prompt, latency_ms=elapsed_ms(), top_paths=result["top_paths"])


def log(outcome: Outcome, cwd_hint: Path) -> str | None:
    """Append ``outcome`` to the usage log; the reason it could not, or None."""
    from slm_rerank import usage
    from slm_rerank.cache_folder import cache_path
    from slm_rerank.config import load_settings

    try:
        settings = load_settings(start=cwd_hint if cwd_hint.is_dir() else None)
        if not settings.usage_log:
            return None
        folder = cache_path(settings)
        folder.mkdir(parents=True, exist_ok=True)
        usage.append_hook(folder, outcome.query, CALLER, outcome.latency_ms, outcome.hook,
                          outcome.top_paths)
    except ConfigError as exc:  # nothing wrong with the log: the settings cannot be read
        return f"config error, so no usage log was written: {exc}"
    except Exception as exc:  # noqa: BLE001 - logging must not cost the prompt either
        return f"cannot write the usage log: {exc}"
    return None


def _cwd_hint(data: bytes) -> Path:
    try:
        _, cwd = parse_input(data)
    except ValueError:
        return Path.cwd()
    return Path(cwd) if cwd else Path.cwd()


def run_deadline(deadline_option: str | None, data: bytes) -> float:
    """The deadline the hook works to for the input ``data``: the option, the environment,
    else the settings that apply in the prompt's folder."""
    return deadline_from(deadline_option, os.environ, _configured_deadline(_cwd_hint(data)))


def main(deadline_option: str | None, force_fast: bool) -> None:
    """The command: never raises, always exits 0 (anything else would reach the user).

    Says at most one line on stderr, whatever else wrote there meanwhile.
    """
    started = started_at()
    outcome: Outcome | None = None
    problem: str | None = None
    with held_stderr() as held:
        try:
            # the option or the environment bound the read; the settings are read after it
            data, in_time = read_stdin(deadline_from(deadline_option, os.environ),
                                       MAX_STDIN_BYTES + 1)
            deadline = run_deadline(deadline_option, data)
            if in_time:
                outcome = run(data, deadline, force_fast, time.monotonic() - started)
            else:
                outcome = Outcome(None, {
                    "decision": "error", "queried": False,
                    "reason": f"stdin was left open without a complete JSON object for "
                              f"{time.monotonic() - started:.1f} s (the deadline); no "
                              "context given"}, latency_ms=(time.monotonic() - started) * 1000)
            fell_back = stdio.given.warm_process if stdio.given is not None else None
            if fell_back is not None:  # in the log, not on stderr: the one line is the hook's
                outcome.hook["warm_process"] = f"{fell_back}; the hook ran in its own process"
            problem = log(outcome, _cwd_hint(data))
            if outcome.hook["decision"] == "error":
                # What went wrong with the prompt first: a log that failed for the same
                # reason (a broken config file) would only repeat it, less clearly.
                problem = outcome.hook["reason"]
            if outcome.output:
                sys.stdout.write(outcome.output + "\n")
                sys.stdout.flush()
        except Exception as exc:  # noqa: BLE001
            problem = f"{type(exc).__name__}: {exc}"
    say_one_line("slm-rerank hook", problem, held)
    if outcome is not None and outcome.abandoned:
        # The search thread may hold subprocesses or a pool the interpreter would wait for
        # at exit: end now, output and log already flushed. First the tools it may have
        # started since run() killed them, and no new one after (close).
        from slm_rerank.lexical.matches import kill_tools

        kill_tools(close=True)
        os._exit(0)
    sys.exit(0)
