"""The things plugins register, one frozen dataclass per hook family, and the data they see.

Everything here crosses the boundary between the host and a plugin, so it is plain data:
dataclasses, tuples and callables, no host internals.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from slm_rerank import digests

# --- settings a plugin owns ---------------------------------------------------------------


@dataclass(frozen=True)
class PluginOption:
    """One setting a registered thing owns, read from ``[plugins.<name>]`` in config files.

    Its type is the type of ``default`` (str, int, float, bool or a list of strings);
    ``None`` as default means an optional string.
    """

    key: str
    default: Any
    help: str


# --- output -------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputFormatter:
    """Turns a finished report into text for stdout.

    ``render(report, tty=...)`` returns the whole output; ``tty`` is true when stdout is a
    terminal, so a formatter may align a table for people and write plain lines for pipes.
    """

    noun: ClassVar[str] = "output formatter"
    name: str
    description: str
    render: Callable[..., str]
    options: tuple[PluginOption, ...] = ()


# --- finding candidates -------------------------------------------------------------------


@dataclass(frozen=True)
class SourceQuery:
    """What a candidate source is asked for."""

    root: Path
    #: lower-case literals to find in file bodies (matched case-insensitively, as substrings)
    terms: Sequence[str]
    #: regular files or directories (absolute, inside root) to restrict the search to;
    #: empty means all of root
    paths: Sequence[Path] = ()
    #: glob patterns (relative to root) that files must match; empty means any
    globs: Sequence[str] = ()
    #: files larger than this many bytes are not searched
    max_filesize: int = 2_000_000
    #: also report in ``SourceHits.skipped`` the files the tool drops silently (binary,
    #: over ``max_filesize``), even where finding them costs extra work (``-v`` asks)
    explain: bool = False


@dataclass
class SourceHits:
    """What a candidate source found: every searchable file, and body matches per file."""

    #: every text file in scope, as POSIX paths relative to the root
    files: list[str] = field(default_factory=list)
    #: path -> lower-case term -> number of occurrences in the file's body
    body_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: files the source met but could not read, with why (shown by ``-v``)
    skipped: dict[str, str] = field(default_factory=dict)
    #: byte sizes of files in ``body_counts``, where the source knows them as they are now
    #: (the others are stat'ed for length normalisation)
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CandidateSource:
    """Where candidate files come from (ripgrep, git, ...).

    ``unavailable(root)`` returns None when the source can search ``root``, else a short
    reason (``"rg not found on PATH"``). ``search(query)`` returns ``SourceHits``, and raises
    ``slm_rerank.errors.SourceError`` (with the tool's stderr) when the tool itself fails.
    """

    noun: ClassVar[str] = "candidate source"
    name: str
    description: str
    unavailable: Callable[[Path], str | None]
    search: Callable[[SourceQuery], SourceHits]
    #: lower runs first when several sources are available
    priority: int = 100
    options: tuple[PluginOption, ...] = ()


# --- model servers ------------------------------------------------------------------------

#: How a server is asked: llama.cpp's native ``/completion``, OpenAI ``/v1/completions``,
#: OpenAI ``/v1/chat/completions`` (real messages), or Ollama's ``/api/generate``.
SERVER_KINDS: tuple[str, ...] = ("llama.cpp", "openai-completions", "openai-chat", "ollama")


@dataclass(frozen=True)
class Endpoint:
    """One model server: where it is, how to ask it, which model it serves, how many at once.

    A port belongs here, not to a model family: the same Qwen GGUF may be served on any
    port by any server kind.
    """

    base_url: str
    kind: str = "llama.cpp"
    #: the model id the server reports (``/v1/models`` ``data[0].id``), if known
    model_id: str | None = None
    #: requests the server runs at once (llama.cpp ``/props`` ``total_slots``)
    slots: int = 1
    api_key: str | None = field(default=None, repr=False)
    #: tokens one request may use (llama.cpp: the context of one slot), if known
    context_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in SERVER_KINDS:
            raise ValueError(f"endpoint {self.base_url}: unknown server kind {self.kind!r} "
                             f"(known: {', '.join(SERVER_KINDS)})")
        if self.slots < 1:
            raise ValueError(f"endpoint {self.base_url}: slots must be at least 1")


# --- query expansion ----------------------------------------------------------------------


@dataclass(frozen=True)
class ExpandRequest:
    """What a query expander is given: the query and, when one is configured, a model."""

    query: str
    endpoint: Endpoint | None = None
    profile: ModelProfile | None = None
    #: ``time.monotonic()`` value after which the expander must return what it has
    deadline: float | None = None
    #: this expander's ``[plugins.<name>]`` settings, validated against its options
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the run's cache folder, for an expander that keeps its answers (None: keep nothing)
    cache_dir: Path | None = None


@dataclass(frozen=True)
class WeightedTerm:
    """A recall term and its weight (1.0 = as strong as a word the user typed)."""

    term: str
    weight: float = 0.5


@dataclass(frozen=True)
class QueryExpander:
    """Adds recall terms for a query: ``expand(ExpandRequest)`` returns ``WeightedTerm``s.

    An expander that calls a model raises ``TransientError`` when the server fails; the
    pipeline then searches with the literal terms and says so.
    """

    noun: ClassVar[str] = "query expander"
    name: str
    description: str
    expand: Callable[[ExpandRequest], list[WeightedTerm]]
    options: tuple[PluginOption, ...] = ()
    #: whether it asks a model (the host finds the server first); a thesaurus does not
    needs_endpoint: bool = True


# --- model profiles -----------------------------------------------------------------------

@dataclass(frozen=True)
class Turn:
    """One chat message of a chat layout; ``content`` may use the layout fields."""

    role: Literal["system", "user", "assistant"]
    content: str


#: the intents of a code query a profile may word a question for (``ModelProfile.intents``;
#: ``slm_rerank/model/intent.py`` says how a query's is decided): a bug report or task, a
#: question of where or how, a request for tests, a request for docs
INTENTS = ("change", "locate", "tests", "docs")


@dataclass(frozen=True)
class ModelProfile:
    """How to talk to one model family: prompt layouts, answer words, which ids it claims.

    A profile describes two layouts of one question, filled with ``{instruction}``,
    ``{query}`` and ``{document}``: ``completion``, a raw prompt string for completion
    endpoints (the model's own chat template written out, or a few-shot layout for base
    models), and ``chat``, real role/content turns for chat endpoints (empty when the
    model has no chat template). Both put the instruction and query before the document so
    that a server's prompt cache reuses the shared prefix across documents.

    ``claims`` are regular expressions searched (case-insensitively) in the model id a
    server reports. When several profiles claim one id, the longest matched text wins (the
    most specific claim: ``gemma-3.*-it`` beats ``gemma``); an equal-length tie between two
    profiles is an error naming both, resolved with ``--model``.

    ``judge_weight`` says how far the verdict may move the lexical order; ``weight_measured``
    says where that weight was measured (e.g. ``"docs/benchmarks.md, judge weight:
    Qwen2.5-Coder-1.5B-Instruct"``), empty when it never was: ``slm-rerank plugins``,
    ``endpoints`` and a search's ``-v`` and JSON show "not measured" beside such a weight.
    """

    noun: ClassVar[str] = "model profile"
    name: str
    description: str
    instruction: str
    completion: str
    yes_words: tuple[str, ...]
    no_words: tuple[str, ...]
    chat: tuple[Turn, ...] = ()
    claims: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    #: chunk-length normalisation exponent (see docs: score * (tokens/ref) ** exponent)
    length_exponent: float = 0.0
    #: how far the model's verdict may move the lexical order: w in logit = w*logit(p) + z.
    #: 1.0 for an instruction-tuned judge; lower for a weak (base) model.
    judge_weight: float = 1.0
    #: the weight for a short query (one line: a title, a question) when it was measured to
    #: differ from ``judge_weight`` (a small judge knows less from a title than from a whole
    #: issue); None: ``judge_weight`` for every query
    short_query_weight: float | None = None
    options: tuple[PluginOption, ...] = ()
    #: the instruction to use for each intent of a code query (``model/intent.py``:
    #: "change", "locate", "tests", "docs"), as (intent, instruction) pairs; an intent not
    #: listed, and every documents-API query, keeps ``instruction``
    intents: tuple[tuple[str, str], ...] = ()

    def for_intent(self, intent: str | None) -> ModelProfile:
        """This profile asking the question of ``intent`` (itself when it words none)."""
        wording = dict(self.intents).get(intent or "")
        if wording is None or wording == self.instruction:
            return self
        return dataclasses.replace(self, instruction=wording)
    #: where ``judge_weight`` was measured (a benchmark table and its case set); empty: never
    weight_measured: str = ""

    def render_completion(self, query: str, document: str) -> str:
        """The raw prompt for a completion endpoint."""
        return _fill(self.completion, self.instruction, query, document)

    def render_chat(self, query: str, document: str) -> list[dict[str, str]]:
        """The messages for a chat endpoint (empty when the profile has no chat layout)."""
        return [{"role": t.role, "content": _fill(t.content, self.instruction, query, document)}
                for t in self.chat]

    @property
    def prompt_version(self) -> str:
        """A digest of everything that shapes the prompt or reads the answer.

        It changes whenever a layout, the instruction, the answer words or the stop strings
        change, so the score cache never serves a score asked in another way.
        """
        parts = [self.name, self.instruction, self.completion,
                 *(f"{t.role}\0{t.content}" for t in self.chat),
                 "\0".join(self.yes_words), "\0".join(self.no_words), "\0".join(self.stop),
                 repr(self.length_exponent)]
        return digests.sha256("\x1f".join(parts).encode()).hexdigest()[:16]

    def claim_length(self, model_id: str) -> int:
        """Length of the longest text of ``model_id`` this profile claims (0: no claim)."""
        best = 0
        for pattern in self.claims:
            for match in re.finditer(pattern, model_id, re.IGNORECASE):
                best = max(best, len(match.group(0)))
        return best


def _fill(template: str, instruction: str, query: str, document: str) -> str:
    # str.replace, not str.format: a query or a chunk of code is full of braces.
    return (template.replace("{instruction}", instruction).replace("{query}", query)
            .replace("{document}", document))


# --- scoring ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """One thing to judge: its text, a stable id, and a hash of the text for the cache."""

    id: str
    text: str
    content_hash: str
    #: where it came from, for prompts that show it (``path``, ``lines``, ``symbol``)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, id: str, text: str, **metadata: Any) -> Document:
        # surrogatepass: a lone surrogate of any kind (from a file name, a JSON client)
        # hashes instead of raising; this is a digest, never decoded again
        digest = digests.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return cls(id=id, text=text, content_hash=digest, metadata=metadata)


@dataclass(frozen=True)
class ScoreRequest:
    """What a scorer is asked: judge each document against the query."""

    query: str
    documents: Sequence[Document]
    profile: ModelProfile | None = None
    endpoint: Endpoint | None = None
    #: ``time.monotonic()`` value after which the scorer stops; what it yielded is kept
    deadline: float | None = None
    #: this scorer's ``[plugins.<name>]`` settings, validated against its options
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the run's pooled ``slm_rerank.model.client.ModelClient``; a scorer that talks to a
    #: model server uses it (one keep-alive connection pool, slots-bounded concurrency)
    client: Any = None


@dataclass(frozen=True)
class DocumentScore:
    """A verdict on one document of a ``ScoreRequest``.

    ``probability`` is P(relevant) in [0, 1]. ``bounded`` names the answer side ("yes" or
    "no", or "both") that was missing from the server's top-K and was bounded by the
    smallest returned logprob, so the probability is a bound, not a measurement; bounded
    scores are never cached. ``raw`` is the scorer's own number (a logit, a grade) when it has one.
    ``prompt_tokens`` and ``cached_tokens`` say what the verdict cost, for the token budget
    (``model/stage.py``); a scorer that cannot tell leaves them None.
    """

    index: int
    probability: float
    raw: float | None = None
    bounded: str | None = None
    note: str | None = None
    #: the prompt's tokens as the server counted them, and how many of those it took from
    #: its prompt cache (a prefix shared with an earlier prompt); None when it did not say
    prompt_tokens: int | None = None
    cached_tokens: int | None = None


@dataclass(frozen=True)
class Scorer:
    """How relevance scores are obtained for a batch of documents.

    ``score(request)`` is an async iterator of ``DocumentScore``, yielded as they come, in
    any order (each names its document's index). It raises ``TransientError`` for a fault
    that may pass and ``ContractError`` for an answer it cannot use; the host keeps what was
    yielded before either, and stops iterating at the request's deadline.
    """

    noun: ClassVar[str] = "scorer"
    name: str
    description: str
    score: Callable[[ScoreRequest], AsyncIterator[DocumentScore]]
    #: whether it needs a model endpoint (the host finds one before calling it)
    needs_endpoint: bool = True
    options: tuple[PluginOption, ...] = ()
    #: True when a document's verdict depends only on the query and that document: then
    #: verdicts are cached, and documents may be spread over several servers. A scorer
    #: that compares documents with each other (a listwise judge) sets False, and gets
    #: every document of the query in one request.
    per_document: bool = True
