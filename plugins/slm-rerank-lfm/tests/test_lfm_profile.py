from __future__ import annotations

import slm_rerank_lfm

from slm_rerank.testing import ModelProfileContract


class TestLfmProfile(ModelProfileContract):
    plugin = slm_rerank_lfm
    distribution = "slm-rerank-lfm"
    names = {"lfm"}
    claimed_ids = {
        "LiquidAI/LFM2-1.2B": "lfm",  # vLLM: the Hugging Face repo id
        "/models/LFM2-350M-Q4_K_M.gguf": "lfm",  # llama-server without --alias: the -m path
        "LFM2.5-1.2B-Instruct-Q8_0.gguf": "lfm",
        "lfm2.5-thinking:1.2b": "lfm",  # Ollama
        "lfm-2-700m": "lfm",
        "gemma-3-1b-it": None,
        "qwen3-4b": None,
    }


def test_the_completion_prompt_ends_with_an_empty_think_block() -> None:
    prompt = slm_rerank_lfm.LFM.render_completion("where are retries set", "retry.py:1-9")
    assert prompt.endswith("retry.py:1-9<|im_end|>\n<|im_start|>assistant\n<think>\n</think>\n")
    assert prompt.startswith("<|im_start|>system\n")
