"""Asking the model for candidate findings about one chunk, and reading its answer strictly.

The model sees one chunk (``File: path:lines`` and its code) and the review's query, and is
asked for one JSON object per finding: ``claim``, ``evidence`` (the code line(s) it rests
on, copied), ``identifiers`` and ``severity``. A candidate always cites the chunk it was
shown, never a path or line the model wrote, so a finding cannot point where the model was
not looking. What cannot be read as such an object is left out and counted: a malformed
answer gives fewer candidates, never an invented one.

Completion endpoints are preferred (llama.cpp's ``/completion``, ``/v1/completions``): a base
model gets a one-shot layout, an instruction-tuned one the profile's own template; a chat
endpoint (or Ollama) gets a real user message on ``/v1/chat/completions``. Each request is
bounded by ``MAX_TOKENS`` and by the deadline the caller passes, and the client caps the body.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slm_rerank.errors import ContractError, RequestRejected, TransientError
from slm_rerank.plugin_kit import endpoint_url, excerpt
from slm_rerank.registrations import Endpoint, ModelProfile
from slm_rerank_review.findings import Candidate

if TYPE_CHECKING:
    from slm_rerank.plugin_kit import ModelClient

#: tokens one answer may take by default (--max-tokens): a few findings of a line or two
MAX_TOKENS = 384
#: the bounds --max-tokens may be set within
MAX_TOKENS_RANGE = (16, 4096)
#: characters of an answer read (a server may send more than it was asked for)
MAX_ANSWER_CHARS = 16_000
#: findings kept per chunk, in the model's order
MAX_PER_CHUNK = 5
#: a claim longer than this is prose, not a finding; evidence longer is not "a line or two"
MAX_CLAIM_CHARS = 600
MAX_EVIDENCE_CHARS = 4_000
MAX_IDENTIFIERS = 16
#: SARIF's levels; what models also write for them
SEVERITIES = {"error": "error", "warning": "warning", "note": "note", "high": "error",
              "critical": "error", "medium": "warning", "low": "note", "info": "note"}

INSTRUCTION = (
    "Review the Document's code for the Query. Report only real defects that the code "
    "itself shows. For each one write a line of JSON: {\"claim\": what is wrong, naming the "
    "code in backticks, \"evidence\": the line or lines of the Document that show it, copied "
    "exactly, \"identifiers\": the names of the code the claim is about, \"severity\": "
    "\"error\", \"warning\" or \"note\"}. Never write code that is not in the Document. "
    "When there is no defect write NONE. Write END after the last line.")

#: a base model follows an example, not an instruction
ONE_SHOT = (
    "{instruction}\n\n"
    "Query: find real defects\n"
    "Document:\nFile: src/cache.py:10-13 (get)\n"
    "def get(self, key):\n"
    "    if key not in self.items:\n"
    "        return self.items[key]\n"
    "    return None\n"
    "Findings:\n"
    "{{\"claim\": \"`get` reads `self.items[key]` exactly when `key` is missing, which "
    "raises KeyError\", \"evidence\": \"if key not in self.items: return self.items[key]\", "
    "\"identifiers\": [\"get\", \"items\", \"key\"], \"severity\": \"error\"}}\n"
    "END\n\n"
    "Query: {query}\n"
    "Document:\n{document}\n"
    "Findings:\n"
)
#: where an answer ends: the marker asked for, or a base model starting another example
STOPS = ("END", "\nQuery:", "\nDocument:")

#: the grammar's bounds: characters of a claim and of its evidence, names listed
GRAMMAR_CLAIM_CHARS, GRAMMAR_EVIDENCE_CHARS, GRAMMAR_NAMES = 240, 400, 8
#: The one-shot layout's answer as a GBNF grammar, which llama.cpp samples within: NONE, or
#: one to MAX_PER_CHUNK finding lines shaped like the example, with bounded strings. A base
#: model copies an example's form only roughly (a 270M one wrote prose or half an object);
#: bound so, each line parses and only what it says is left to the gates. Strings exclude
#: raw control characters and allow JSON's escapes, so a multi-line quote is "\n"-joined.
#: The example's END line may follow (without it, a model that wants to write END after its
#: last finding could only go on to another); the grammar ends the answer, so no stop
#: string is sent with it (llama.cpp matches one anywhere, "END" inside "O_APPEND" too).
FINDINGS_GRAMMAR = "\n".join((
    rf'root ::= ("NONE" | finding ("\n" finding){{0,{MAX_PER_CHUNK - 1}}}) "\nEND"?',
    r'finding ::= "{\"claim\": " claim ", \"evidence\": " evidence '
    r'", \"identifiers\": [" names "], \"severity\": \"" level "\"}"',
    rf'claim ::= "\"" char{{1,{GRAMMAR_CLAIM_CHARS}}} "\""',
    rf'evidence ::= "\"" char{{1,{GRAMMAR_EVIDENCE_CHARS}}} "\""',
    r'char ::= [^"\\\x00-\x1f] | "\\" ["\\/nt]',
    rf'names ::= "" | name (", " name){{0,{GRAMMAR_NAMES - 1}}}',
    r'name ::= "\"" [A-Za-z_$] [A-Za-z0-9_$.]{0,59} "\""',
    r'level ::= "error" | "warning" | "note"',
)) + "\n"


@dataclass(frozen=True)
class ShownChunk:
    """A chunk as the model is shown it: its place on disk and its text then."""

    path: str
    start_line: int
    end_line: int
    text: str
    symbol: str | None = None

    def document(self) -> str:
        symbol = f" ({self.symbol})" if self.symbol else ""
        return f"File: {self.path}:{self.start_line}-{self.end_line}{symbol}\n{self.text}"


@dataclass(frozen=True)
class Proposal:
    """What the model proposed for one chunk."""

    candidates: tuple[Candidate, ...]
    #: objects or lines of the answer that were no usable finding, left out
    malformed: int = 0
    #: the model said there is no defect
    none_said: bool = False


def _instructed(profile: ModelProfile | None) -> bool:
    """An instruction-tuned model, asked in its own template (else: the one-shot layout)."""
    return profile is not None and profile.chat


def completion_prompt(profile: ModelProfile | None, query: str, chunk: ShownChunk) -> str:
    """The raw prompt: the profile's own template for an instruction-tuned model, else the
    one-shot layout (a base model, or no profile)."""
    if _instructed(profile):
        return dataclasses.replace(profile, instruction=INSTRUCTION).render_completion(
            query, chunk.document())
    # str.format fills each field once: braces in the query or the code stay as they are
    return ONE_SHOT.format(instruction=INSTRUCTION, query=query, document=chunk.document())


def chat_messages(query: str, chunk: ShownChunk) -> list[dict[str, str]]:
    """Real messages: one user turn (every template takes it; Gemma 2 has no system role)."""
    return [{"role": "user",
             "content": f"{INSTRUCTION}\n\nQuery: {query}\n\nDocument:\n{chunk.document()}"}]


def _stops(profile: ModelProfile | None) -> list[str]:
    # a profile's "\n" stop ends a yes/no answer; here it would end the first finding
    kept = [s for s in (profile.stop if profile else ()) if s.strip()]
    return [*STOPS, *kept]


async def generate(client: ModelClient, endpoint: Endpoint, profile: ModelProfile | None,
                   query: str, chunk: ShownChunk, deadline: float,
                   max_tokens: int = MAX_TOKENS, refused: list[str] | None = None) -> str:
    """The model's answer for one chunk, within ``deadline`` (a ``time.monotonic()`` value).

    A server that rejects the findings grammar (an older llama.cpp, or one that parses it
    otherwise) is asked again without it, and why it refused goes to ``refused``: the answer
    is then read as strictly as any server's without a grammar. Raises TransientError when
    the deadline passes or the server fails, ContractError when its answer holds no text.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise TransientError("the review's deadline passed before this chunk was asked",
                             endpoint.base_url)
    try:
        return await asyncio.wait_for(_ask(client, endpoint, profile, query, chunk,
                                           max_tokens, refused), left)
    except asyncio.TimeoutError:
        raise TransientError(f"model server {endpoint.base_url} did not finish a review "
                             f"answer within the {left:.0f} s left; raise --timeout or "
                             "review fewer chunks (--top)", endpoint.base_url) from None


async def _ask(client: ModelClient, endpoint: Endpoint, profile: ModelProfile | None,
               query: str, chunk: ShownChunk, max_tokens: int,
               refused: list[str] | None = None) -> str:
    if endpoint.kind in ("llama.cpp", "openai-completions"):
        prompt = completion_prompt(profile, query, chunk)
        if endpoint.kind == "llama.cpp" and not _instructed(profile):
            # the grammar ends the answer: no stop string, which could cut a finding short
            try:
                return await client.generate(endpoint, prompt, max_tokens=max_tokens,
                                             grammar=FINDINGS_GRAMMAR)
            except RequestRejected as exc:
                # a request refused (400, 422), not an answer it could not use nor a missing
                # endpoint: asked again without the grammar; when that fails too, its error
                # is the one to report
                text = await client.generate(endpoint, prompt, max_tokens=max_tokens,
                                             stop=_stops(profile))
                if refused is not None:
                    refused.append(str(exc))
                return text
        return await client.generate(endpoint, prompt, max_tokens=max_tokens,
                                     stop=_stops(profile))
    path = "/v1/chat/completions"
    body: dict[str, Any] = {"messages": chat_messages(query, chunk), "max_tokens": max_tokens,
                            "temperature": 0, "stop": list(STOPS[:1])}
    if endpoint.model_id:
        body["model"] = endpoint.model_id
    answer = await client.post_json(endpoint, path, body)
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        raise ContractError(f"{endpoint_url(endpoint, path)} answered without a message's "
                            f"content: {excerpt(answer)}", endpoint.base_url)
    return text


def parse_answer(answer: str, chunk: ShownChunk) -> Proposal:
    """The candidates an answer holds, each citing ``chunk``; what is not one is counted.

    Objects are found anywhere in the answer (one per line, pretty-printed, in a fence, in a
    list); each must have a non-empty string ``claim``. ``evidence`` may be a string or a
    list of lines; anything else, or a value over its bound, makes the object malformed.
    """
    text = answer[:MAX_ANSWER_CHARS]
    decoder = json.JSONDecoder()
    found: list[Candidate] = []
    malformed = 0
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            # not an object starting here; a finding cut off by the token limit ends here
            if _looks_like_a_finding(text, position):
                malformed += 1
                position = text.find("\n", position)
                position = text.find("{", position) if position != -1 else -1
            else:
                position = text.find("{", position + 1)
            continue
        candidate = _candidate(value, chunk)
        if candidate is None:
            malformed += 1
        elif len(found) < MAX_PER_CHUNK:
            found.append(candidate)
        position = text.find("{", end)
    none_said = not found and text.strip().upper().startswith("NONE")
    return Proposal(tuple(found), malformed, none_said)


def _looks_like_a_finding(text: str, position: int) -> bool:
    return text.startswith('{"claim"', position) or text.startswith("{'claim'", position)


def _candidate(value: Any, chunk: ShownChunk) -> Candidate | None:
    if not isinstance(value, dict):
        return None
    claim = value.get("claim")
    if not isinstance(claim, str) or not claim.strip() or len(claim) > MAX_CLAIM_CHARS:
        return None
    evidence = value.get("evidence", "")
    if isinstance(evidence, list) and all(isinstance(line, str) for line in evidence):
        evidence = "\n".join(evidence)
    if not isinstance(evidence, str) or len(evidence) > MAX_EVIDENCE_CHARS:
        return None
    listed = value.get("identifiers", [])
    if isinstance(listed, str):
        listed = [listed]
    if not isinstance(listed, list):
        return None
    identifiers = tuple(str(i)[:80] for i in listed[:MAX_IDENTIFIERS]
                        if isinstance(i, str) and i.strip())
    severity = value.get("severity")
    level = SEVERITIES.get(severity.strip().lower(), "warning") if isinstance(
        severity, str) else "warning"
    return Candidate(chunk.path, chunk.start_line, chunk.end_line, claim.strip(), evidence,
                     identifiers, level)
