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
import re
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slm_rerank.errors import ConfigError
from slm_rerank.report import visible

#: default time the hook may take from reading stdin to printing, in seconds
DEFAULT_DEADLINE = 5.0
DEADLINE_ENV = "SLM_RERANK_HOOK_DEADLINE"
CALLER = "claude-code-hook"
#: places listed in the context: enough to point the way, short enough to read at a glance
TOP_K = 5
#: the longest prompt searched; a pasted log beyond this adds only noise and time
QUERY_CHARS = 4000
#: the most stdin read: a prompt with a long paste fits; a runaway writer stops here
MAX_STDIN_BYTES = 2_000_000

# --- the classifier -------------------------------------------------------------------------
# Each rule names a kind of evidence that the prompt is about this codebase's code. They are
# general shapes of code talk, not phrases of any particular prompt.

_FENCE = re.compile(r"```|~~~")
_ERROR = re.compile(
    r"Traceback \(most recent call last\)"
    r"|\b[A-Z]\w*(?:Error|Exception|Warning)\b"            # TypeError, NullPointerException
    # [ \t], not \s, after ^: \s crosses newlines, so each of a run of blank lines started a
    # rescan of the rest (16,000 newlines took 19 s, before the hook's deadline applies)
    r"|^[ \t]*(?:error|panic|fatal|FAILED)(?:\[\w+\])?[:!]|^[ \t]*npm ERR!"  # compilers
    r"|\bsegmentation fault\b|\bstack trace\b|\bcore dumped\b"
    r"|^[ \t]+at [\w.$<>]+\(|^[ \t]+File \"[^\"]+\", line \d+",  # JS/Java, Python frames
    re.MULTILINE | re.IGNORECASE,
)
_SOURCE_EXT = (
    "py|pyi|js|jsx|ts|tsx|mjs|cjs|go|rs|java|kt|kts|scala|c|h|cc|cpp|cxx|hpp|hh|cs|rb|php|"
    "swift|m|mm|lua|pl|sh|bash|zsh|sql|vue|svelte|ex|exs|erl|hs|ml|clj|dart|r|jl|zig|nim|"
    "toml|ya?ml|json|ini|cfg|proto|graphql|gradle|cmake|mk"
)
_PATH = re.compile(
    rf"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:{_SOURCE_EXT})(?::\d+)?(?![\w/])"
    r"|(?<![\w/])(?:src|lib|app|pkg|cmd|tests?|internal)/[\w./-]+",
    re.IGNORECASE,
)
_SNAKE = re.compile(r"\b_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_SCREAMING = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_CAMEL = re.compile(r"\b(?:[A-Z][a-z0-9]+){2,}\w*\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?")
_CALL = re.compile(r"\b[A-Za-z_]\w*\((?:[^()\s]*|[^()]{0,40})\)")
_BACKTICKS = re.compile(r"`[^`\n]+`")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
#: questions that ask where code is or how it behaves
_LOCATE = re.compile(
    r"\b(?:where(?:'s| is| are| do| does| did)?\b"
    r"|which (?:file|files|module|function|class|method|package|component|plugin|part)"
    r"|how (?:(?:does|do|is|are) (?:the |a |an |our |this |we )?|(?:the|our|this) )"
    r"[\w -]{2,40}"
    r"(?:work|works|handled?|computed?|built|parsed?|decides?|decided|implemented|picked?"
    r"|chosen|registered?|configured|loaded|called|turned|stored|read|written|handle|"
    r"register|pick)"
    r"|what (?:calls|uses|handles|sets|reads|writes|parses|happens (?:in|when|if))"
    r"|who calls|is there (?:a|an|any) (?:\w+ )?(?:test|function|helper|class|code|logic)"
    r"|(?:defined|implemented|declared|initiali[sz]ed|instantiated|registered) (?:in|at|by)?)",
    re.IGNORECASE,
)
#: verbs that ask for work on code: with a named thing they make the prompt about code
_CODE_WORK = re.compile(
    r"^\s*(?:please |can you |could you )?(?:fix|refactor|rename|implement|add|remove|delete|"
    r"move|extract|inline|write|explain|debug|optimi[sz]e|rewrite|change|make|find|look at|"
    r"check)\b", re.IGNORECASE)
#: the prompt is about process, the session or a tool, not this codebase's code
_PROCESS = re.compile(
    r"^\s*(?:please |ok(?:ay)?,? |now |then |can you |could you |let'?s )?"
    r"(?:commit|push|pull|merge|rebase|squash|amend|stash|cherry-pick|tag|bump|release|"
    r"deploy|publish|install|re-?run|run|make|open|revert|undo|continue|proceed|go ahead|"
    r"stop|thanks?|thank you|ty|lgtm|yes|yep|no|nope|sure|great|perfect|nice|cool|hmm|"
    r"good (?:morning|night|job)|summari[sz]e|draft|write (?:a|the) (?:commit|changelog|"
    r"email|message|pr|release))\b"
    r"|^\s*/\w+"                                           # a slash command
    r"|\b(?:status|ci|pipeline|build|job|pr|pull request) (?:pass|passed|green|red|fail)"
    r"|\bhow does (?:git|docker|npm|pip|make|bash|ssh|k8s|kubectl) \w+",
    re.IGNORECASE,
)
#: words that name parts of a program: with a code-work verb, or with words that describe
#: behaviour, they make a prompt about the code even without an identifier in it
_CODE_NOUN = re.compile(
    r"\b(?:functions?|methods?|class(?:es)?|modules?|constants?|variables?|tests?|api|"
    r"endpoints?|parsers?|formatters?|scorers?|cache|handlers?|schema|types?|structs?|"
    r"interfaces?|fields?|arguments?|parameters?|flags?|regex|callbacks?|plugins?|"
    r"tokenizer|lookup|loop|query|queries|config|settings|enum|decorators?|imports?|"
    r"exceptions?|codebase|code)\b", re.IGNORECASE)
#: words that describe what code does wrong or how it behaves
_BEHAVIOUR = re.compile(
    r"\b(?:wrong(?:ly)?|broken|breaks|fails?|crash(?:es)?|doesn'?t|isn'?t|never|always|"
    r"instead of|is called|gets called|returns?|throws?|raises?|leaks?|hangs?|ignores?|"
    r"escapes?|drops?|skips?)\b", re.IGNORECASE)
_WORDS_ONLY = re.compile(r"[A-Za-z']+")
#: snake_case words that are plain English (not identifiers) in prose
_PROSE_SNAKE = frozenset({"e_g", "i_e"})


@dataclass
class Decision:
    """Whether a prompt is a code question, and the rule that said so."""

    code: bool
    reason: str


def _symbols(text: str) -> list[str]:
    found = [m.group() for m in _SNAKE.finditer(text) if m.group() not in _PROSE_SNAKE]
    found += [m.group() for m in _SCREAMING.finditer(text)]
    found += [m.group() for m in _CAMEL.finditer(text)]
    found += [m.group() for m in _CALL.finditer(text)]
    # dotted names, but not a sentence end glued to the next word or an abbreviation
    found += [m.group() for m in _DOTTED.finditer(text)
              if not re.fullmatch(r"(?:[a-z]\.)+[a-z]?", m.group(), re.IGNORECASE)]
    return found


def _strong_symbol(text: str) -> bool:
    """A call or a dotted name: code even after a process verb ("make Host.validate() ...")."""
    return any(m.group().endswith(")") or "." in m.group() and not re.fullmatch(
        r"(?:[a-z]\.)+[a-z]?", m.group(), re.IGNORECASE)
        for m in (*_CALL.finditer(text), *_DOTTED.finditer(text)))


def classify(prompt: str) -> Decision:
    """Decide whether ``prompt`` asks about code in the repository (then context helps).

    Strong evidence (a code fence, error text) wins over everything; a prompt that opens
    with a process, session or tool verb (commit, run the tests, thanks) is silent unless it
    carries such evidence; otherwise a source path, a code-form symbol, a flag in backticks or
    a question that locates code makes it a code question.
    """
    text = prompt.strip()
    if not text:
        return Decision(False, "empty prompt")
    if _FENCE.search(text):
        return Decision(True, "code fence")
    if _ERROR.search(text):
        return Decision(True, "error text")
    if _PROCESS.search(text) and not _strong_symbol(text):
        return Decision(False, "process, status or tool request")
    if _PATH.search(text):
        return Decision(True, "source path")
    if _BACKTICKS.search(text):
        return Decision(True, "code span")
    if _symbols(text):
        return Decision(True, "code-form symbol")
    if _LOCATE.search(text):
        return Decision(True, "question that locates code")
    if _CODE_WORK.search(text) and (_FLAG.search(text) or _CODE_NOUN.search(text)):
        return Decision(True, "work on a named part of the code")
    if _CODE_NOUN.search(text) and _BEHAVIOUR.search(text):
        return Decision(True, "behaviour of a part of the code")
    if len(_WORDS_ONLY.findall(text)) <= 3:
        return Decision(False, "short reply")
    return Decision(False, "no code in the prompt")


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


def deadline_from(option: str | None, environ: Mapping[str, str],
                  configured: float | None = None) -> float:
    """The deadline in seconds: the option, else $SLM_RERANK_HOOK_DEADLINE, else the
    ``hook_deadline`` setting, else 5 s.

    A value that is not a positive finite number falls back to the default: a typo in a
    hook's environment must not cost the user's prompt.
    """
    for value in (option, environ.get(DEADLINE_ENV)):
        if value is None or value == "":
            continue
        try:
            seconds = float(value)
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds > 0:
            return seconds
    return configured if configured is not None else DEFAULT_DEADLINE


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
    them (a degraded run that judged none is the lexical order)."""
    if fast:
        return "lexical ranking"
    scored = report.model.scored if report.model is not None else 0
    if report.degraded is None:
        return "ranked by a model"
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
    host.settings = dataclasses.replace(settings, **changes)
    return host, settings.usage_log, fast


def run(data: bytes, deadline: float, force_fast: bool = False) -> Outcome:
    """Decide on the prompt in ``data`` and, for a code question, search within ``deadline``."""
    started = time.perf_counter()

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
    if not decision.code:
        return Outcome(None, {"decision": "skip", "queried": False, "reason": decision.reason},
                       query=prompt, latency_ms=elapsed_ms())
    cwd = Path(cwd_text) if cwd_text else Path.cwd()
    if not cwd.is_dir():
        return Outcome(None, {"decision": "error", "queried": False,
                              "reason": f"cwd {cwd} from the hook input is not a folder"},
                       query=prompt, latency_ms=elapsed_ms())
    result: dict[str, Any] = {}

    def search() -> None:
        try:
            from slm_rerank.api import search as api_search

            host, _, fast = _host_for(cwd, deadline)
            fast = fast or force_fast
            report = api_search(prompt[:QUERY_CHARS], cwd, fast=fast, caller=CALLER,
                                host=host, top_k=TOP_K)
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
    reason = decision.reason
    if worker.is_alive():
        # The search goes on in its thread: end the tools it started (rg, git), which would
        # otherwise run on, orphaned, after the hook has answered.
        from slm_rerank.lexical.matches import kill_tools

        kill_tools()
        return Outcome(None, {"decision": "timeout", "queried": True, "reason": reason,
                              "deadline_s": deadline}, query=prompt, latency_ms=elapsed_ms(),
                       abandoned=True)
    if "config" in result:
        return Outcome(None, {"decision": "error", "queried": False,
                              "reason": result["config"]},
                       query=prompt, latency_ms=elapsed_ms())
    if "error" in result:
        return Outcome(None, {"decision": "error", "queried": True,
                              "reason": f"{reason}; search failed: {result['error']}"},
                       query=prompt, latency_ms=elapsed_ms())
    output = result.get("output")
    return Outcome(output, {"decision": "query", "queried": True, "reason": reason,
                            "fast": result.get("fast", True), "results": output is not None},
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


def main(deadline_option: str | None, force_fast: bool) -> None:
    """The command: never raises, always exits 0 (anything else would reach the user)."""
    try:
        # One byte over the cap, so that parse_input can tell a too-long input from a cut one
        data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1) if sys.stdin is not None else b""
    except (OSError, ValueError):
        data = b""
    outcome: Outcome | None = None
    problem: str | None = None
    try:
        deadline = deadline_from(deadline_option, os.environ,
                                 _configured_deadline(_cwd_hint(data)))
        outcome = run(data, deadline, force_fast)
        problem = log(outcome, _cwd_hint(data))
        if outcome.hook["decision"] == "error":
            # What went wrong with the prompt first: a log that failed for the same reason
            # (a broken config file) would only repeat it, less clearly.
            problem = outcome.hook["reason"]
        if outcome.output:
            sys.stdout.write(outcome.output + "\n")
            sys.stdout.flush()
    except Exception as exc:  # noqa: BLE001
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        try:
            # one line; Claude Code shows a hook's stderr in verbose mode only
            print(f"slm-rerank hook: {visible(' '.join(problem.split()))[:300]}",
                  file=sys.stderr)
            sys.stderr.flush()
        except Exception:  # noqa: BLE001, S110 - a closed stderr leaves nothing to tell
            pass
    if outcome is not None and outcome.abandoned:
        # The search thread may hold subprocesses or a pool the interpreter would wait for
        # at exit: end now, output and log already flushed. First the tools it may have
        # started since run() killed them, and no new one after (close).
        from slm_rerank.lexical.matches import kill_tools

        kill_tools(close=True)
        os._exit(0)
    sys.exit(0)
