"""Model profile: Liquid AI LFM 2 and LFM 2.5, asked in their own ChatML layout."""

from __future__ import annotations

from collections.abc import Callable

import slm_rerank
from slm_rerank.registrations import ModelProfile, Turn

INSTRUCTION = ("Judge whether the Document helps answer the Query: it holds the answer, or "
               "the code or text the Query is about. Answer only \"yes\" or \"no\".")

USER = "Query: {query}\n\nDocument:\n{document}"

# No <|startoftext|>: llama-server adds the BOS the GGUF asks for, and a second one hurts.
# The empty think block is what LFM 2.5's template writes when thinking is off; with it
# the answer word is the first token, whether the model is a thinking variant or not.
COMPLETION = ("<|im_start|>system\n{instruction}<|im_end|>\n"
              "<|im_start|>user\n" + USER + "<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n</think>\n")

LFM = ModelProfile(
    name="lfm",
    description="Liquid AI LFM 2 / 2.5: ChatML, empty think block, yes/no as first token",
    instruction=INSTRUCTION,
    completion=COMPLETION,
    chat=(Turn("system", "{instruction}"), Turn("user", USER)),
    yes_words=("yes", "Yes", " yes", " Yes", "YES"),
    no_words=("no", "No", " no", " No", "NO"),
    # lfm2, lfm-2, LFM2.5, lfm2.5:1.2b (Ollama), and anything Liquid AI publishes
    claims=(r"lfm[-_ ]?2(?:\.5)?", r"liquid[-_ ]?ai"),
    stop=("<|im_end|>",),
    length_exponent=0.15,
    judge_weight=1.0,
)


@slm_rerank.hookimpl
def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
    register(LFM)
