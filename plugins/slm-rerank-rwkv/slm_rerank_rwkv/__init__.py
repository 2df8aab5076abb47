"""Model profile: RWKV v5 to v7 (World, G1), asked in the ``User:`` / ``Assistant:`` layout."""

from __future__ import annotations

from collections.abc import Callable

import slm_rerank
from slm_rerank.registrations import ModelProfile

# RWKV's chat format separates turns with a blank line, so the instruction and the labels
# use single newlines; only the turn boundaries have "\n\n". (A blank line inside the
# document cannot be avoided: the document reaches the profile verbatim.)
INSTRUCTION = ("Judge whether the Document helps answer the Query: it holds the answer, or "
               "the code or text the Query is about. Answer only \"yes\" or \"no\".")

RWKV = ModelProfile(
    name="rwkv",
    description="RWKV v5-v7 (World, G1): 'User: ...\\n\\nAssistant:' raw completion",
    instruction=INSTRUCTION,
    completion="User: {instruction}\nQuery: {query}\nDocument:\n{document}\n\nAssistant:",
    chat=(),  # RWKV models ship no chat template; the raw layout is their chat format
    # After "Assistant:" the answer usually starts with a space.
    yes_words=(" yes", " Yes", "yes", "Yes", " YES"),
    no_words=(" no", " No", "no", "No", " NO"),
    # rwkv, rwkv7, rwkv-7, RWKV-x070-World, RWKV-6-World, rwkv7-g1a: only "rwkv" is specific
    # to the family ("world" and "g1" are not), so every claim starts with it.
    claims=(r"rwkv", r"rwkv[-_ ]?(?:x0?|v)?[5-7]"),
    stop=("\n\nUser:",),
    length_exponent=0.10,
    judge_weight=1.0,
)


@slm_rerank.hookimpl
def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
    register(RWKV)
