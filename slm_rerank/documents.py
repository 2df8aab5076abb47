"""Rerank any documents, not only code chunks: the documents API for RAG pipelines.

    import slm_rerank

    hits = slm_rerank.rerank_documents("how do I rotate the API key?", [
        "Keys are rotated from Settings > Security ...",
        {"id": "faq-7", "text": "Billing happens monthly ...", "metadata": {"url": "..."}},
    ], top_n=5)
    for hit in hits:
        print(hit.rank, hit.score, hit.document)      # the caller's own object back

A document is a string, a mapping with ``text`` (or ``page_content`` / ``content``) and
optionally ``id`` and ``metadata``, or an object with such attributes (a LangChain
``Document`` has ``page_content`` and ``metadata``). Every result keeps the caller's object
and carries the signals: the scorer's raw score, the normalised [0, 1] score, the rank and
which scorer gave them. Any installed scorer judges them (``yesno`` by default; ``graded``,
``listwise``, ``rerank-endpoint`` when installed), through the same server discovery,
profiles, score cache and fault handling as the code search.

``slm_rerank.rrf.fuse`` merges several ranked lists first (BM25 and vector hits, say); its
output can be passed here as it is (each ``Fused`` item's upstream score is kept).
"""

from __future__ import annotations

import asyncio
import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slm_rerank.cache_folder import cache_path, usable_folder
from slm_rerank.event_loop import refuse_running_loop
from slm_rerank.host import Host
from slm_rerank.overrides import overrides
from slm_rerank.registrations import Document, Endpoint, ModelProfile

#: The keys (or attributes) a document's text is read from, in this order.
TEXT_FIELDS = ("text", "page_content", "content")


@dataclass
class RankedDocument:
    """One document after reranking, with the caller's object and the signals."""

    #: the object the caller passed, unchanged
    document: Any
    #: its id: the caller's (``id`` key or attribute), else its position as a string
    id: str
    #: its position in the input list
    index: int
    #: 1 for the best
    rank: int
    #: the normalised relevance in [0, 1] (the scorer's P(relevant)); None when the model
    #: gave no verdict for it (see ``DocumentsResult.degraded``)
    score: float | None
    #: the scorer's own number (a logit, a grade, a rank) when it has one
    raw_score: float | None
    #: the scorer that judged it
    scorer: str
    #: the best upstream score (from ``rrf.fuse`` or the caller's ``score`` field), if any
    upstream_score: float | None = None
    #: what the scorer said about this verdict (cached, repaired, bounded...)
    note: str | None = None


@dataclass
class DocumentsResult(Sequence[RankedDocument]):
    """The reranked documents, best first, and how the judging went."""

    results: list[RankedDocument]
    #: why some documents have no verdict (they follow the judged ones in input order)
    degraded: str | None = None
    #: the scorer, server, model id and profile that ran
    scorer: str = ""
    endpoint: str | None = None
    model_id: str | None = None
    profile: str | None = None
    notes: list[str] = field(default_factory=list)
    #: what changed the judged text from the caller's (documents cut to fit a prompt, text
    #: that was not valid Unicode): a service in front of this should pass these on
    warnings: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[RankedDocument]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: Any) -> Any:
        return self.results[index]


def document_text(item: Any) -> str:
    """The text of one document, as TEXT_FIELDS find it; a clear error otherwise."""
    if isinstance(item, str):
        return item
    for name in TEXT_FIELDS:
        value = item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)
        if isinstance(value, str):
            return value
    if hasattr(item, "item"):  # an rrf.Fused entry: its document
        return document_text(item.item)
    raise TypeError(f"document {item!r:.80} has no text: give a string, or a mapping or "
                    f"object with one of {', '.join(TEXT_FIELDS)}, or pass text=...")


def document_id(item: Any, index: int) -> str:
    """The caller's id of a document, else its position."""
    if isinstance(item, Mapping):
        value, metadata = item.get("id"), item.get("metadata")
    else:
        value, metadata = getattr(item, "id", None), getattr(item, "metadata", None)
    if value is None and isinstance(metadata, Mapping):  # metadata may be anything, or None
        value = metadata.get("id")
    return str(index) if value is None else str(value)


def _valid_unicode(text: str) -> str:
    """``text`` with lone surrogates (from JSON's ``"\\ud800"`` or a bad decode) replaced
    by U+FFFD; a surrogate pair left split in a str is joined. No server takes them in
    UTF-8, and hashing them for the score cache would fail."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _check_each(values: list[Any], what: str) -> None:
    """A TypeError naming the first document whose ``text=`` / ``id=`` callable gave no
    str (a 5 failed deep in the prompt assembly; an arbitrary object became the id)."""
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"documents[{index}]: {what}=... gave {type(value).__name__} "
                            f"{value!r:.40}, not a str")


def check_list(value: Any, name: str = "documents",
               kinds: str = "strings, mappings or objects") -> None:
    """A TypeError unless ``value`` is a list-like of items (a string is not one)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list (of {kinds}), not "
                        f"{type(value).__name__}; pass list({name})")


def _upstream(item: Any, index: int, warnings: list[str]) -> float | None:
    """The score a retriever gave ``item`` (an RRF result's, a mapping's ``score``), if any.

    A NaN or infinite one is no ranking: it is reported as None, and a warning says so.
    """
    value = getattr(item, "upstream_score", None)
    if value is None and isinstance(item, Mapping):
        value = item.get("score")
    # numbers.Real, not float: a vector store's numpy float32 is no float
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if not math.isfinite(value):
        warnings.append(f"documents[{index}] has an upstream score of {float(value)!r}, which "
                        "is not a finite number: its upstream_score is None")
        return None
    return float(value)


def _fit(query: str, texts: Sequence[str], endpoint: Endpoint | None,
         profile: ModelProfile | None, prompt_chars: int, notes: list[str]
         ) -> tuple[str, list[str]]:
    """Query and texts cut to what one prompt may hold: ``prompt_chars`` per document, and
    within the server's context (a slot's) when it reports one."""
    from slm_rerank.model.passages import fit_query

    asked, room = fit_query(query, endpoint, profile, notes)
    budget = prompt_chars if room is None else max(min(prompt_chars, room - len(asked)), 0)
    cut = sum(1 for t in texts if len(t) > budget)
    if cut:
        notes.append(f"{cut} of {len(texts)} documents were cut to their first {budget} "
                     "characters")
    return asked, [t[:budget] for t in texts]


async def arerank_documents(
    query: str,
    documents: Sequence[Any],
    *,
    scorer: str | None = None,
    top_n: int | None = None,
    base_url: str | None = None,
    model: str | None = None,
    timeout: float | None = None,
    cache: bool | None = None,
    host: Host | None = None,
    text: Callable[[Any], str] | None = None,
    id: Callable[[Any, int], str] | None = None,
    instruction: str | None = None,
) -> DocumentsResult:
    """Rerank ``documents`` for ``query``; the coroutine behind ``rerank_documents``."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string")
    check_list(documents)
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int)
                              or top_n < 1):
        raise ValueError(f"top_n must be a positive integer, not {top_n!r}")
    warnings: list[str] = []
    texts = [(text or document_text)(d) for d in documents]
    _check_each(texts, "text")
    cleaned = [_valid_unicode(t) for t in texts]
    changed = sum(a is not b for a, b in zip(texts, cleaned, strict=True))
    if changed:
        warnings.append(f"{changed} of {len(texts)} documents held UTF-16 surrogates (not "
                        "valid Unicode): pairs were joined, lone ones judged as U+FFFD")
    texts = cleaned
    if _valid_unicode(query) is not query:
        query = _valid_unicode(query)
        warnings.append("the query held UTF-16 surrogates (not valid Unicode): pairs were "
                        "joined, lone ones asked as U+FFFD")
    ids = [(id or document_id)(d, i) for i, d in enumerate(documents)]
    _check_each(ids, "id")
    given = overrides(scorer=scorer, base_url=base_url, model=model, timeout=timeout,
                      cache=cache)
    plugins = (host or Host.from_environment(start=Path.cwd())).with_overrides(
        "rerank_documents({key}=...)", **given)
    plugins.validate()
    settings = plugins.settings
    out = DocumentsResult([], scorer=settings.scorer, warnings=warnings)
    if not documents:
        return out
    from slm_rerank.model.fusion import apply_verdicts
    from slm_rerank.model.stage import judge_documents_async

    def prepare(narrowest: Endpoint | None, profile: ModelProfile | None,
                notes: list[str]) -> tuple[str, list[Document]]:
        cuts: list[str] = []
        asked, fitted = _fit(query, texts, narrowest, profile, settings.prompt_chars, cuts)
        notes.extend(cuts)
        warnings.extend(cuts)
        return asked, [Document.of(ids[i], t, index=i) for i, t in enumerate(fitted)]

    cache_dir = None
    if settings.score_cache:
        folder = usable_folder(cache_path(settings))
        cache_dir = folder.path
        warnings.extend([folder.warning] if folder.warning else [])
    judgement = await judge_documents_async(query, prepare, plugins, settings, cache_dir,
                                            noun="documents",
                                            unjudged="follow in input order",
                                            instruction=instruction)
    verdicts = judgement.scores
    # the seam every front door meets the verdicts at: with no lexical evidence the
    # verdicts alone order the judged, the unjudged follow in input order
    order = apply_verdicts(len(documents), judgement, settings, threshold=None, query=query)
    for rank, i in enumerate((f.index for f in order.kept), 1):
        verdict = verdicts.get(i)
        out.results.append(RankedDocument(
            document=documents[i], id=ids[i], index=i, rank=rank,
            score=verdict.probability if verdict else None,
            raw_score=verdict.raw if verdict else None, scorer=settings.scorer,
            upstream_score=_upstream(documents[i], i, warnings),
            note=verdict.note if verdict else None))
    unsent = sum(1 for v in verdicts.values() if (v.note or "").startswith("not sent"))
    if unsent:
        # a rerank API's pool: ranked below every judged one, by design, but not judged
        out.warnings.append(f"{unsent} of {len(documents)} documents were beyond the scorer's "
                            "pool and not sent: they rank below every judged one")
    if top_n is not None:
        out.results = out.results[:top_n]
    # documents shortened after their tokens were counted, any the server refused, and a
    # score cache the disk refused
    out.warnings.extend(judgement.shortened + judgement.warnings)
    out.degraded = judgement.degraded
    out.endpoint = judgement.endpoint.base_url if judgement.endpoint else None
    out.model_id = judgement.endpoint.model_id if judgement.endpoint else None
    out.profile = judgement.profile.profile.name if judgement.profile else None
    out.notes = judgement.notes
    return out


def rerank_documents(query: str, documents: Sequence[Any], **options: Any) -> DocumentsResult:
    """Rerank ``documents`` (strings, mappings or objects with text) for ``query``.

    Options: ``scorer`` (default the ``scorer`` setting, ``yesno``), ``top_n`` (how many to
    return), ``base_url`` and ``model`` (the server and profile, as ``-e`` and ``--model``),
    ``timeout``, ``cache`` (the score cache), ``host`` (a ``Host`` to reuse), ``text`` and
    ``id`` (functions reading a document's text and id, for other shapes), ``instruction``
    (the question the judge is asked in place of the profile's relevance instruction, in
    the profile's layout: a judge of another question, such as the review's). Settings
    otherwise come from the usual layers. A server that fails degrades the result
    (``result.degraded``; the unjudged follow the judged in input order, with ``score``
    None); a bad argument raises ``ValueError``/``TypeError``, a bad setting or an answer
    that cannot be parsed ``slm_rerank.errors.SlmRerankError``. Inside a running event loop,
    ``await arerank_documents(...)`` instead.
    """
    refuse_running_loop("rerank_documents()",
                        "use `await slm_rerank.arerank_documents(...)` there")
    return asyncio.run(arerank_documents(query, documents, **options))
