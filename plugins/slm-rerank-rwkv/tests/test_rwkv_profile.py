from __future__ import annotations

import slm_rerank_rwkv

from slm_rerank.testing import ModelProfileContract


class TestRwkvProfile(ModelProfileContract):
    plugin = slm_rerank_rwkv
    distribution = "slm-rerank-rwkv"
    names = {"rwkv"}
    claimed_ids = {
        "rwkv7-g1a-2.9b-20250924-ctx4096": "rwkv",
        "/models/RWKV-x070-World-2.9B-v3-20250211-ctx4096.gguf": "rwkv",  # llama-server -m
        "rwkv-7-world-0.4b-Q8_0.gguf": "rwkv",
        "RWKV/v6-Finch-1B6-HF": "rwkv",  # vLLM / Hugging Face repo id
        "RWKV-5-World-3B": "rwkv",
        "mollysama/rwkv-7-world:0.4b": "rwkv",  # Ollama
        # "world" alone is not RWKV
        "world-model-7b": None,
        "gemma-3-1b-it": None,
    }


def test_the_prompt_is_one_user_turn_and_an_open_assistant_turn() -> None:
    prompt = slm_rerank_rwkv.RWKV.render_completion("Q", "D")
    assert prompt.startswith("User: ")
    assert prompt.endswith("Query: Q\nDocument:\nD\n\nAssistant:")
    # a blank line ends the user turn: the instruction and labels must not hold one
    assert prompt.count("\n\n") == 1
    assert slm_rerank_rwkv.RWKV.render_chat("Q", "D") == []
