"""A fake llama-server for the review's tests (see conftest.py) and their helpers."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from slm_rerank.testing.recordings import recorded_answer as recorded  # noqa: F401

#: a small repository with one real defect (``delay`` starts at 0, so doubling it never
#: backs off) and a clean neighbour
RETRY = """\
import time


def retry(send, attempts=3):
    delay = 0
    for attempt in range(attempts):
        try:
            return send()
        except ConnectionError:
            time.sleep(delay)
            delay = delay * 2
    raise RuntimeError("gave up")
"""
COLOURS = "RED = '#f00'\nGREEN = '#0f0'\n"


def finding(claim: str, evidence: str, identifiers: list[str] | None = None,
            severity: str = "error") -> str:
    """One line of a model's answer."""
    return json.dumps({"claim": claim, "evidence": evidence,
                       "identifiers": identifiers or [], "severity": severity})


@dataclass
class FakeLlama:
    """What the fake server answers, and what it was asked."""

    url: str = ""
    #: a chunk's path (as in its "File:" line) -> the generated answer for it
    answers: dict[str, str] = field(default_factory=dict)
    #: text of a claim -> P(yes) of each judge; unlisted claims get the defaults
    support: dict[str, float] = field(default_factory=dict)
    contradiction: dict[str, float] = field(default_factory=dict)
    default_support: float = 0.9
    default_contradiction: float = 0.1
    #: the judges' requests answer 500 (a server that fails mid-review)
    judges_fail: bool = False
    #: seconds the judges' requests take to answer (a server that got slow mid-review)
    judges_delay: float = 0.0
    #: a generation with a grammar answers 400, as a llama-server that cannot parse it does
    refuses_grammar: bool = False
    generations: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)

    def handle(self, request: Request) -> Response:
        body = json.loads(request.get_data())
        prompt = body["prompt"]
        prompts = prompt if isinstance(prompt, list) else [prompt]
        if body.get("n_predict", 1) > 1:
            if self.refuses_grammar and "grammar" in body:
                error = {"code": 400, "message": "Failed to parse grammar",
                         "type": "invalid_request_error"}
                return Response(json.dumps({"error": error}), status=400,
                                content_type="application/json")
            self.generations.append(prompts[0])
            answer = next((text for path, text in self.answers.items()
                           if f"File: {path}:" in prompts[0].rsplit("Query:", 1)[-1]), "NONE")
            reply = recorded("llamacpp-completion.json")
            reply.update(content=answer, completion_probabilities=[])
            return Response(json.dumps(reply), content_type="application/json")
        if self.judges_delay and any("the claim" in p for p in prompts):
            time.sleep(self.judges_delay)
        if self.judges_fail and any("the claim" in p for p in prompts):
            return Response(json.dumps({"error": {"code": 500, "message": "out of memory"}}),
                            status=500, content_type="application/json")
        self.verdicts.extend(prompts)
        items = [{**self._verdict(p), "index": i} for i, p in enumerate(prompts)]
        return Response(json.dumps(items[0] if len(items) == 1 else items),
                        content_type="application/json")

    def _verdict(self, prompt: str) -> dict[str, Any]:
        asked = prompt.rsplit("Query:", 1)[-1]
        if "proves the claim" in prompt:
            p = next((v for k, v in self.support.items() if k in asked), self.default_support)
        elif "contradicts the claim" in prompt:
            p = next((v for k, v in self.contradiction.items() if k in asked),
                     self.default_contradiction)
        else:
            p = 0.5  # the search's relevance question
        reply = recorded("llamacpp-completion.json")
        first = reply["completion_probabilities"][0]
        top = [{**first["top_logprobs"][0], "logprob": math.log(max(p, 1e-9))},
               {**first["top_logprobs"][1], "logprob": math.log(max(1 - p, 1e-9))}]
        reply["completion_probabilities"] = [{**first, "top_logprobs": top}]
        return reply




def serve(httpserver: HTTPServer) -> FakeLlama:
    """``httpserver`` answering as llama-server does, with a FakeLlama behind /completion."""
    fake = FakeLlama()
    httpserver.expect_request("/v1/models").respond_with_json(recorded("llamacpp-v1-models.json"))
    httpserver.expect_request("/props").respond_with_json(recorded("llamacpp-props.json"))
    httpserver.expect_request("/api/version").respond_with_data("", status=404)
    httpserver.expect_request("/tokenize").respond_with_data("", status=404)
    httpserver.expect_request("/completion", method="POST").respond_with_handler(fake.handle)
    fake.url = httpserver.url_for("/").rstrip("/")
    return fake


