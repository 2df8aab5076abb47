from __future__ import annotations

import slm_rerank_openai

from slm_rerank.testing import GENERIC, ModelProfileContract, choose_profile


class TestOpenaiProfile(ModelProfileContract):
    plugin = slm_rerank_openai
    distribution = "slm-rerank-openai"
    names = {"openai"}
    # it claims nothing: it is chosen by name, as the fallback
    claimed_ids = {"gpt-4o-mini": None, "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf": None,
                   "qwen3:8b": None}


def test_it_is_the_fallback_when_no_profile_claims_the_model() -> None:
    profiles = {"openai": slm_rerank_openai.OPENAI}
    choice = choose_profile(profiles, model_id="Meta-Llama-3.1-8B-Instruct")
    assert GENERIC == "openai"
    assert choice is not None and choice.profile.name == "openai"
    assert choice.reason.startswith("generic")


def test_chat_endpoints_get_a_system_and_a_user_message() -> None:
    messages = slm_rerank_openai.OPENAI.render_chat("Q", "D")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == slm_rerank_openai.INSTRUCTION
    assert messages[1]["content"] == "Query: Q\n\nDocument:\nD\n\nAnswer yes or no."
