"""The model client against a real llama-server: its answers are what the recorded
payloads hold."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from slm_rerank.model.client import ModelClient, NextToken
from slm_rerank.registrations import Endpoint

WIRE = Path(__file__).resolve().parents[2] / "fixtures" / "wire"


def wire(name: str) -> Any:
    return json.loads((WIRE / name).read_text(encoding="utf-8"))


def recorded(name: str, index: int = 0) -> Any:
    """The response of one exchange recorded from a real llama-server (record_wire.py)."""
    return wire(name)["exchanges"][index]["response"]


def ask(method: str, endpoint: Endpoint, *args: Any, timeout: float = 5.0, **kwargs: Any) -> Any:
    async def main() -> Any:
        async with ModelClient(timeout=timeout) as client:
            return await getattr(client, method)(endpoint, *args, **kwargs)
    return asyncio.run(main())


SKY = "Question: Is the sky blue?\nAnswer (yes or no):"
SUM = "Two plus two is"


def real(llama_server: Any, kind: str = "llama.cpp") -> Endpoint:
    return Endpoint(llama_server.base_url, kind, llama_server.model_id, llama_server.slots)


def test_real_llama_cpp_answers_an_array_of_prompts_in_prompt_order(llama_server: Any):
    endpoint = real(llama_server)

    async def main() -> tuple[list[NextToken], list[NextToken]]:
        async with ModelClient(timeout=60) as client:
            both = await client.next_token(endpoint, [SKY, SUM], top_k=5)
            alone = await client.next_token(endpoint, [SUM], top_k=5)
            return both, alone

    both, [alone] = asyncio.run(main())

    assert [len(a.top) for a in both] == [5, 5]
    assert all(c.logprob <= 0 and c.id is not None for a in both for c in a.top)
    assert [c.token for c in both[1].top] == [c.token for c in alone.top]
    assert both[1].prompt_tokens is not None and both[1].prompt_tokens > 0
    assert alone.cached_tokens is not None  # timings.cache_n is reported


def test_real_llama_cpp_v1_completions_agrees_with_the_native_endpoint(llama_server: Any):
    [native] = ask("next_token", real(llama_server), [SKY], top_k=5, timeout=60)
    [openai] = ask("next_token", real(llama_server, "openai-completions"), [SKY], top_k=5,
                   timeout=60)

    assert [c.token for c in openai.top] == [c.token for c in native.top]
    assert [c.logprob for c in openai.top] == pytest.approx([c.logprob for c in native.top])


def test_real_llama_cpp_chat_gives_the_first_answer_token(llama_server: Any):
    conversation = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]

    [answer] = ask("next_token_chat", real(llama_server), [conversation], top_k=3, timeout=60)

    assert len(answer.top) == 3
    assert answer.prompt_tokens is not None and answer.prompt_tokens > 0


def test_real_llama_cpp_tokenizes_an_answer_word_as_recorded(llama_server: Any):
    expected = recorded("llamacpp-tokenize.json", 0)["tokens"]  # " yes", no special tokens

    assert ask("tokenize", real(llama_server), " yes") == expected
    assert ask("tokenize", real(llama_server, "openai-completions"), " yes") == expected
