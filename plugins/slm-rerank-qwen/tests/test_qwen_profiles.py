from __future__ import annotations

import slm_rerank_qwen

from slm_rerank.testing import ModelProfileContract


class TestQwenProfiles(ModelProfileContract):
    plugin = slm_rerank_qwen
    distribution = "slm-rerank-qwen"
    names = {"qwen", "qwen-think", "qwen3-reranker"}
    claimed_ids = {
        # Qwen 2 / 2.5: no thinking
        "Qwen/Qwen2.5-7B-Instruct": "qwen",  # vLLM: the Hugging Face repo id
        "qwen2.5-coder:7b": "qwen",  # Ollama
        "/models/qwen2.5-1.5b-instruct-q4_k_m.gguf": "qwen",  # llama-server: the -m path
        "Qwen2-0.5B-Instruct": "qwen",
        # Qwen3 releases that do not think
        "Qwen/Qwen3-4B-Instruct-2507": "qwen",
        "Qwen3-4B-Instruct-2507-Q4_K_M.gguf": "qwen",
        "qwen3:4b-instruct-2507-q4_K_M": "qwen",
        "Qwen3-Coder-30B-A3B-Instruct-UD-Q4_K_XL.gguf": "qwen",
        # hybrid Qwen3 / 3.x (thinking by default), thinking-only models, QwQ
        "Qwen/Qwen3-8B": "qwen-think",
        "qwen3:8b": "qwen-think",
        "/root/.cache/llama.cpp/unsloth_Qwen3-0.6B-GGUF_Qwen3-0.6B-Q4_K_M.gguf": "qwen-think",
        "Qwen3.5-9B-Q4_K_M.gguf": "qwen-think",
        "Qwen3-30B-A3B-Thinking-2507": "qwen-think",
        "Qwen/QwQ-32B": "qwen-think",
        "qwq:32b": "qwen-think",
        # the trained reranker
        "Qwen/Qwen3-Reranker-0.6B": "qwen3-reranker",
        "qwen3-reranker-4b-q8_0.gguf": "qwen3-reranker",
        # not Qwen
        "gemma-3-1b-it": None,
        "LFM2-1.2B": None,
    }


def test_the_reranker_prompt_is_the_one_it_was_trained_on() -> None:
    prompt = slm_rerank_qwen.QWEN3_RERANKER.render_completion("Q", "D")
    assert prompt == (
        "<|im_start|>system\nJudge whether the Document meets the requirements based on the "
        "Query and the Instruct provided. Note that the answer can only be \"yes\" or \"no\"."
        "<|im_end|>\n<|im_start|>user\n<Instruct>: "
        + slm_rerank_qwen.QWEN3_RERANKER.instruction
        + "\n<Query>: Q\n<Document>: D<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_only_thinking_models_get_the_empty_think_block() -> None:
    assert "<think>" not in slm_rerank_qwen.QWEN.render_completion("Q", "D")
    assert slm_rerank_qwen.QWEN_THINK.render_completion("Q", "D").endswith(
        "D<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
