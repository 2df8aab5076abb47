"""Query expander ``llm`` (``--expand``): a model names the words a query lacks.

A question asks in the asker's words ("where is the user logged out"), the code answers
in its own (``signout``, ``revoke_session``). The model is asked at temperature 0 for
other words the code may use, in a few-shot completion layout that base models continue
as well as instruction-tuned ones; its comma-separated answer is read strictly: stop words,
generic programming words, words the query already has, numbers, over-long tokens and prose
are dropped. The words left enter recall at half a typed word's weight, so a synonym can
add a candidate but not outweigh a word the user typed.

Answers are kept for 30 days in ``expansions.json`` in the cache folder (``cache.py``).
A server that fails raises ``TransientError``, an answer that is prose ``ContractError``:
the host notes either under ``-v`` and searches with the typed words.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import slm_rerank
from slm_rerank.errors import ContractError, TransientError
from slm_rerank.plugin_kit import STOP_WORDS, light, sha256, split_identifier, stem
from slm_rerank.registrations import ExpandRequest, PluginOption, QueryExpander, WeightedTerm
from slm_rerank_expand.cache import ExpansionCache, cache_key

#: Two worked examples, then the query: the answer is one line of comma-separated words.
PROMPT = """Search terms for finding code. For each question, list other words the code may use.

Question: where are retries configured
Words: backoff, attempts, max_retries, retry_policy

Question: how does the user log out
Words: logout, signout, session, revoke, token

Question: {query}
Words:"""
#: tokens the model may write: eight words and their commas, with room for identifiers
MAX_TOKENS = 32
#: characters of the query put in the prompt: a pasted issue leads with its title
QUERY_CHARS = 300
#: an expanded word's weight against the strongest typed word's
WEIGHT = 0.5
MAX_TERMS = 8
#: longer than this is not a word a person or a program would type
MAX_WORD = 32
#: bumped when the reading rules below change: the cache keeps words, not answers
RULES_VERSION = 2
PROMPT_VERSION = sha256(
    f"{PROMPT}\0{MAX_TOKENS}\0{QUERY_CHARS}\0{RULES_VERSION}".encode()).hexdigest()[:16]

#: Words every codebase has: searching for them adds noise, not recall.
GENERIC = frozenset("""
arg args argument arguments attribute bool call calls class classes code config def dict
error example file files func function functions get helper helpers impl import int item
items list main method methods misc module modules none null obj object objects option
options param parameter parameters return returns self set str string thing things true
false type types util utils val value values var variable variables word words
""".split())

_WORD = re.compile(r"[^\W\d][\w.\-]*")
#: a number after a separator: a version or a value (python-3.8, sqrt_4), not a name
_NUMBERED = re.compile(r"[-._]\d")
#: each worked example's answer words: a small model given a long query copies them
EXAMPLES = tuple(
    frozenset(word.strip().lower() for word in line[len("Words:"):].split(","))
    for line in PROMPT.splitlines() if line.startswith("Words:") and line != "Words:")
#: an item of more words than this is a sentence, not a term
_MAX_ITEM_WORDS = 3


def prompt_for(query: str) -> str:
    """The prompt for ``query``: its first ``QUERY_CHARS`` characters on one line."""
    line = " ".join(query.split())[:QUERY_CHARS]
    return PROMPT.replace("{query}", line)


def _forms(word: str) -> set[str]:
    return {word, light(word), stem(word)}


def _nothing_new(word: str, typed: set[str]) -> bool:
    """An identifier made only of typed or generic words, or repeating one of its parts
    (``html_escape_string_escape``: a small model looping), names nothing new."""
    parts = split_identifier(word)
    if len(parts) != len(set(parts)):
        return True
    return all(p in GENERIC or p in STOP_WORDS or _forms(p) & typed for p in parts)


def parse(answer: str, query: str) -> list[str]:
    """The usable words of a model's answer, in its order, at most once each.

    Raises ``ContractError`` when the answer holds no list at all (empty, or only
    sentences); a list whose words are all dropped is a valid answer with no words.
    """
    typed: set[str] = set()
    for token in re.findall(r"\w+", query):
        for part in [token.lower(), *split_identifier(token)]:
            typed |= _forms(part)
    words: list[str] = []
    listed = False
    for item in re.split(r"[,;\n]+", answer):
        parts = item.split()
        if not parts or len(parts) > _MAX_ITEM_WORDS:
            continue
        listed = True
        for part in parts:
            word = part.strip("`'\"*•:()[]{}<>.-_").lower()
            if (len(word) < 3 or len(word) > MAX_WORD or not _WORD.fullmatch(word)
                    or _NUMBERED.search(word)
                    or word in STOP_WORDS or word in GENERIC or _forms(word) & typed
                    or word in words or _nothing_new(word, typed)):
                continue
            words.append(word)
    if not listed:
        shown = " ".join(answer.split())[:120] or "nothing"
        raise ContractError(f"the model answered prose, not a list of words: {shown!r}")
    # Two words of one worked example are a copy of it, not an answer; one alone may be
    # the right word (``signout`` for a question about logging out).
    copied = {w for example in EXAMPLES if len(example.intersection(words)) >= 2
              for w in example}
    return [w for w in words if w not in copied]


def expand(request: ExpandRequest) -> list[WeightedTerm]:
    """Words the query lacks, at half weight; none when no model server was found."""
    if request.endpoint is None:
        return []
    model = request.endpoint.model_id or request.endpoint.base_url
    key = cache_key(model, PROMPT_VERSION, request.query)
    cache = ExpansionCache(request.cache_dir) if request.cache_dir is not None else None
    words = cache.get(key) if cache else None
    if words is None:
        words = parse(ask(request), request.query)
        if cache:
            cache.put(key, words)
    limit = int(request.options.get("max_terms", MAX_TERMS))
    return [WeightedTerm(word, WEIGHT) for word in words[:limit]]


def ask(request: ExpandRequest) -> str:
    """The model's raw answer, within the request's deadline (the run's ``--timeout``).

    The deadline is a total: a server that sends its answer a byte at a time is cut off
    when it passes, not when one read has waited too long.
    """
    assert request.endpoint is not None
    endpoint = request.endpoint
    left = (request.deadline - time.monotonic() if request.deadline is not None
            else NO_DEADLINE_SECONDS)
    if left <= 0:
        raise TransientError("no time was left to ask the model (--timeout)",
                             endpoint.base_url)

    # imported here: the plugin is loaded on every run, --fast too, which needs neither
    import asyncio

    from slm_rerank.plugin_kit import ModelClient

    async def run() -> str:
        # the client's own bound is a backstop: the deadline below speaks first, and says
        # what applies to expansion
        async with ModelClient(timeout=left + 1.0) as model:
            return await asyncio.wait_for(
                model.generate(endpoint, prompt_for(request.query), max_tokens=MAX_TOKENS,
                               stop=("\n",)), left)

    try:
        return asyncio.run(run())
    except asyncio.TimeoutError:
        raise TransientError(f"model server {endpoint.base_url} named no words within "
                             f"{left:.1f} s (the time --timeout left); raise --timeout",
                             endpoint.base_url) from None


#: how long a request without a deadline may wait (a caller outside the pipeline)
NO_DEADLINE_SECONDS = 10.0


LLM = QueryExpander(
    "llm", "words the query lacks, named by the model at temperature 0 (--expand)", expand,
    options=(PluginOption("max_terms", MAX_TERMS, "most expanded words searched per query"),))


@slm_rerank.hookimpl
def register_query_expanders(register: Callable[[QueryExpander], None]) -> None:
    register(LLM)
