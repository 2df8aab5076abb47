"""Model profiles: Gemma 2 / 3, instruction-tuned (``gemma``) and base (``gemma-base``).

Any Gemma id is claimed by ``gemma-base``; ids naming an instruction-tuned release
(``gemma-3-1b-it``, Ollama's ``gemma3:4b``, whose default tags are instruction-tuned) are
claimed longer by ``gemma``, so the longest-claim rule picks it for them.
"""

from __future__ import annotations

from collections.abc import Callable

import slm_rerank
from slm_rerank.registrations import ModelProfile, Turn

INSTRUCTION = ("Judge whether the Document helps answer the Query: it holds the answer, or "
               "the code or text the Query is about. Answer only \"yes\" or \"no\".")

# Gemma has no system role (Gemma 2's template raises on one): the instruction opens the
# user turn. No <bos>: the server adds it.
USER = "{instruction}\n\nQuery: {query}\n\nDocument:\n{document}"

# The separators model ids use between words ("gemma-3-1b-it", "gemma3:4b", "gemma_2_it").
_SEP = r"[-_ .:\w]*?"

GEMMA = ModelProfile(
    name="gemma",
    description="Gemma 2 / 3 instruction-tuned (-it): <start_of_turn> chat turns",
    instruction=INSTRUCTION,
    completion="<start_of_turn>user\n" + USER + "<end_of_turn>\n<start_of_turn>model\n",
    chat=(Turn("user", USER),),
    yes_words=("yes", "Yes", " yes", " Yes", "YES"),
    no_words=("no", "No", " no", " No", "NO"),
    claims=(rf"gemma{_SEP}[-_.:]it\b",
            # Ollama's "gemma3:4b": its default tags are the instruction-tuned models
            r"gemma[-_ ]?\d(?:\.\d)?n?:"),
    stop=("<end_of_turn>",),
    length_exponent=0.12,
    judge_weight=1.0,
)

BASE_INSTRUCTION = ("Decide whether each document is relevant to the query: it holds the "
                    "answer, or the code or text the query is about. Answer yes or no.")

# A base model does not follow a chat turn (in Gemma turns the 270M base model never puts
# yes or no in its top 20); two worked examples teach it the answer format instead.
# The examples sit before the query, so they are part of the prefix every document shares.
# The examples' documents look like the ones the host sends ("File: path:lines (symbol)"
# then the code).
TWO_SHOT = (
    "{instruction}\n\n"
    "Query: how is the delay between retries computed\n"
    "Document:\nFile: src/http/retry.py:12-13 (backoff)\n"
    "def backoff(attempt):\n"
    "    return min(2 ** attempt, 60)\n"
    "Relevant: yes\n\n"
    "Query: where is the log file rotated\n"
    "Document:\nFile: src/ui/colours.py:1-1\n"
    "COLOURS = {\"red\": 1, \"green\": 2}\n"
    "Relevant: no\n\n"
    "Query: {query}\n"
    "Document:\n{document}\n"
    "Relevant:"
)

GEMMA_BASE = ModelProfile(
    name="gemma-base",
    description=("Gemma 2 / 3 base (pretrained) models: two-shot completion ending in "
                 "'Relevant:'; a weak judge"),
    instruction=BASE_INSTRUCTION,
    completion=TWO_SHOT,
    chat=(),  # a base model has no chat template
    # After "Relevant:" the model answers with a leading space: " yes" and "yes" are
    # different tokens.
    yes_words=(" yes", " Yes"),
    no_words=(" no", " No"),
    claims=(r"gemma", r"gemma[-_ ]?\d(?:\.\d)?",
            # "pt" is Google's name for the pretrained (base) release
            rf"gemma{_SEP}[-_.:]pt\b"),
    stop=("\n",),
    length_exponent=0.12,
    # A weak judge. On 48 benchmark cases (docs/benchmarks.md, "Model stage: quality") the
    # 270M base model alone put a fixed file first in 6-8 % of cases against 48-56 % for
    # the lexical order; fused, weights 0.1 and 0.25 gave the same Hit@1/5 and 0.1 the
    # better Hit@10. It may nudge near-ties, not reorder.
    judge_weight=0.1,
    weight_measured=("docs/benchmarks.md, 'Model stage: quality (Gemma 3 270M base, "
                     "2026-11-30)': 48 cases, both query modes"),
)

PROFILES = (GEMMA, GEMMA_BASE)


@slm_rerank.hookimpl
def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
    for profile in PROFILES:
        register(profile)
