"""Scorer ``yesno``: P(relevant) from the top-K logprobs of the model's first answer token.

Each document is put in the profile's layout and the server is asked for the top-K
candidates of one token. Then

    lp_yes = log(sum of p over every candidate that is a yes-word of the profile)
    lp_no  = the same for the no-words
    P      = sigmoid(lp_yes - lp_no)

which is the two-way softmax Qwen3-Reranker is scored with: the normaliser over the whole
vocabulary cancels, so P is P(yes | the answer is yes or no). ``DocumentScore.raw`` is the
logit ``lp_yes - lp_no``.

A side missing from the top-K has a probability no larger than the smallest one returned,
so it is set to that bound and the verdict says so (``bounded="yes"``: P is an upper bound;
``"no"``: a lower bound) instead of inventing a constant. With neither side in the top-K the
model gave no verdict: both bounds are equal, P = 0.5, and ``bounded="both"``.

Candidates are matched to answer words by token id when the server can tokenize the words
(done once per server and model, kept for the process), else by their text, stripped of
whitespace and case-folded.

Length normalisation (``ModelProfile.length_exponent``) is not applied here: P is what the
model said about the document as sent. The exponent is for the host's fusion, which knows
every document's length.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import slm_rerank
from slm_rerank.errors import ConfigError, ContractError
from slm_rerank.plugin_kit import sigmoid
from slm_rerank.registrations import (
    DocumentScore,
    Endpoint,
    ModelProfile,
    PluginOption,
    Scorer,
    ScoreRequest,
)

if TYPE_CHECKING:
    from slm_rerank.plugin_kit import ModelClient, NextToken, TokenChoice

DEFAULT_TOP_K = 20

# --- reading one answer -------------------------------------------------------------------


@dataclass(frozen=True)
class AnswerIds:
    """The token ids of a profile's yes-words and no-words on one server."""

    yes: frozenset[int]
    no: frozenset[int]


@dataclass(frozen=True)
class Verdict:
    """What one top-K list says: P(yes), the logit it came from, and what was bounded."""

    probability: float
    logit: float
    bounded: str | None = None
    note: str | None = None


def answer_key(token: str) -> str:
    """A token's text as matched against answer words: no whitespace, case-folded.

    "▁" (SentencePiece) and "Ġ" (byte-level BPE) are how some servers spell a leading space.
    """
    return token.replace("\u2581", " ").replace("\u0120", " ").strip().casefold()


def _side(choice: TokenChoice, yes: frozenset[str], no: frozenset[str],
          ids: AnswerIds | None) -> str | None:
    if ids is not None and choice.id is not None:
        return "yes" if choice.id in ids.yes else "no" if choice.id in ids.no else None
    key = answer_key(choice.token)
    return "yes" if key in yes else "no" if key in no else None


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def yes_no_verdict(top: Sequence[TokenChoice], yes_words: Sequence[str],
                   no_words: Sequence[str], ids: AnswerIds | None = None) -> Verdict:
    """P(yes) against P(no) from one token's top-K candidates (see the module docstring).

    ``ids`` matches candidates by token id where a candidate carries one; without ids (or
    for a candidate without one) its text decides. Candidates with probability 0 carry no
    mass and are ignored; ``top`` must hold at least one with a finite logprob.
    """
    listed = [c for c in top if math.isfinite(c.logprob)]
    if not listed:
        raise ValueError("no candidate with a finite logprob")
    yes = frozenset(answer_key(w) for w in yes_words)
    no = frozenset(answer_key(w) for w in no_words)
    found: dict[str, list[float]] = {"yes": [], "no": []}
    for choice in listed:
        side = _side(choice, yes, no, ids)
        if side is not None:
            found[side].append(choice.logprob)
    floor = min(c.logprob for c in listed)
    k = len(top)
    if not found["yes"] and not found["no"]:
        first = max(listed, key=lambda c: c.logprob).token
        return Verdict(0.5, 0.0, "both",
                       f"neither a yes- nor a no-word is in the top {k} (the model's first "
                       f"choice was {first!r}): no verdict, both sides bounded by the "
                       f"smallest returned logprob ({floor:.2f})")
    bounded = note = None
    lp_yes = _logsumexp(found["yes"]) if found["yes"] else floor
    lp_no = _logsumexp(found["no"]) if found["no"] else floor
    if not found["yes"]:
        bounded = "yes"
        note = (f"no yes-word in the top {k}: its logprob is at most the smallest returned "
                f"({floor:.2f}), so this probability is an upper bound")
    elif not found["no"]:
        bounded = "no"
        note = (f"no no-word in the top {k}: its logprob is at most the smallest returned "
                f"({floor:.2f}), so this probability is a lower bound")
    logit = lp_yes - lp_no
    return Verdict(sigmoid(logit), logit, bounded, note)


# --- answer-word token ids, once per server ------------------------------------------------


def answer_ids_from(yes_words: Sequence[str], no_words: Sequence[str],
                    tokenized: Sequence[list[int] | None]) -> AnswerIds | None:
    """The ids of the answer words that are one token each, or None to match by text.

    ``tokenized`` holds the server's tokens for each of ``yes_words + no_words``. None when
    the server cannot tokenize, when a side has no one-token word (its first token would
    be some prefix, not the word), or when two words share an id: a tokenizer that turns
    "yes" and " yes" into one id adds a space prefix to a lone word, so the ids it gives
    are not the ones the model emits after a prompt.
    """
    if any(tokens is None for tokens in tokenized):
        return None
    words = [*yes_words, *no_words]
    owner: dict[int, str] = {}
    sides: dict[str, set[int]] = {"yes": set(), "no": set()}
    for i, (word, tokens) in enumerate(zip(words, tokenized, strict=True)):
        if tokens is None or len(tokens) != 1:
            continue
        (token_id,) = tokens
        if owner.setdefault(token_id, word) != word:
            return None
        sides["yes" if i < len(yes_words) else "no"].add(token_id)
    if not sides["yes"] or not sides["no"]:
        return None
    return AnswerIds(frozenset(sides["yes"]), frozenset(sides["no"]))


#: (base URL, model id, yes-words, no-words) -> their ids on that server, or None (by text)
ANSWER_IDS: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], AnswerIds | None] = {}


async def answer_ids(client: ModelClient, endpoint: Endpoint,
                     profile: ModelProfile) -> AnswerIds | None:
    """The profile's answer-word ids on ``endpoint``, asked once per process."""
    key = (endpoint.base_url, endpoint.model_id or "", tuple(profile.yes_words),
           tuple(profile.no_words))
    if key not in ANSWER_IDS:
        # One at a time: a handful of tiny requests, once per process, and a failure
        # leaves no request of ours running.
        tokenized: list[list[int] | None] = []
        try:
            for word in (*profile.yes_words, *profile.no_words):
                tokenized.append(await client.tokenize(endpoint, word))
        except ContractError:
            # Tokenizing only lets us match by id; a server that answers it oddly is
            # matched by text. A TransientError is not caught: scoring would fail too.
            tokenized = [None]
        ANSWER_IDS[key] = answer_ids_from(profile.yes_words, profile.no_words, tokenized)
    return ANSWER_IDS[key]


# --- the scorer ----------------------------------------------------------------------------


def _needs(request: ScoreRequest) -> tuple[ModelProfile, Endpoint, ModelClient]:
    if request.profile is None or request.endpoint is None or request.client is None:
        missing = [name for name, value in (("profile", request.profile),
                                            ("endpoint", request.endpoint),
                                            ("client", request.client)) if value is None]
        raise ConfigError(f"scorer 'yesno' was called without a model {' or '.join(missing)}; "
                          "it needs an endpoint (set endpoint or SLM_ENDPOINT) and a model "
                          "profile")
    return request.profile, request.endpoint, request.client


async def score(request: ScoreRequest) -> AsyncIterator[DocumentScore]:
    """Judge each document with one next-token request; yield each verdict as its batch returns.

    Prompts go in batches of ``endpoint.slots`` (what the server runs at once), one batch
    at a time, so the verdicts of early documents arrive while later ones are computed and
    a deadline keeps everything already judged.
    """
    profile, endpoint, client = _needs(request)
    top_k = int(request.options.get("top_k", DEFAULT_TOP_K))
    chat = endpoint.kind == "openai-chat"
    if chat and not profile.chat:
        raise ConfigError(f"endpoint {endpoint.base_url} is a chat endpoint, but model profile "
                          f"'{profile.name}' has no chat layout (a base model has no chat "
                          "template); serve it on a completion endpoint, or choose another "
                          "profile with --model")
    ids = await answer_ids(client, endpoint, profile)
    size = max(1, endpoint.slots)
    documents = list(request.documents)
    for start in range(0, len(documents), size):
        batch = documents[start:start + size]
        answers: list[NextToken]
        if chat:
            answers = await client.next_token_chat(
                endpoint, [profile.render_chat(request.query, d.text) for d in batch],
                top_k=top_k)
        else:
            answers = await client.next_token(
                endpoint, [profile.render_completion(request.query, d.text) for d in batch],
                top_k=top_k, stop=profile.stop)
        if len(answers) != len(batch):
            raise ContractError(f"{endpoint.base_url} answered {len(answers)} times for "
                                f"{len(batch)} prompts", endpoint.base_url)
        for offset, answer in enumerate(answers):
            index = start + offset
            if not any(math.isfinite(c.logprob) for c in answer.top):
                raise ContractError(f"{endpoint.base_url} gave no candidate with a nonzero "
                                    f"probability for document {index}; is logprobs "
                                    "support switched on?", endpoint.base_url)
            verdict = yes_no_verdict(answer.top, profile.yes_words, profile.no_words, ids)
            yield DocumentScore(index, verdict.probability, verdict.logit, verdict.bounded,
                                verdict.note, answer.prompt_tokens, answer.cached_tokens)


YESNO = Scorer(
    name="yesno",
    description="P(relevant) = sigmoid(logprob of yes - logprob of no) of the first answer token",
    score=score,
    needs_endpoint=True,
    options=(PluginOption("top_k", DEFAULT_TOP_K,
                          "candidates asked for the answer token (servers cap it; vLLM "
                          "allows 20 by default)"),),
)


@slm_rerank.hookimpl
def register_scorers(register: Callable[[Scorer], None]) -> None:
    register(YESNO)
