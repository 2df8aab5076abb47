"""Model profile ``openai``: the generic fallback for a model no installed profile claims.

It claims no model id; the host falls back to it by name (``slm_rerank.model.profiles``
``GENERIC``). Chat endpoints get plain system and user messages, which the server puts in
the model's own template; completion endpoints get a plain prompt ending in an answer cue,
which any instruction-following or base model can continue.
"""

from __future__ import annotations

from collections.abc import Callable

import slm_rerank
from slm_rerank.registrations import ModelProfile, Turn

INSTRUCTION = ("Judge whether the Document helps answer the Query: it holds the answer, or "
               "the code or text the Query is about. Answer only \"yes\" or \"no\".")

OPENAI = ModelProfile(
    name="openai",
    description="generic: chat messages for chat endpoints, a plain prompt otherwise",
    instruction=INSTRUCTION,
    completion="{instruction}\n\nQuery: {query}\n\nDocument:\n{document}\n\nAnswer:",
    chat=(Turn("system", "{instruction}"),
          Turn("user", "Query: {query}\n\nDocument:\n{document}\n\nAnswer yes or no.")),
    yes_words=("yes", "Yes", " yes", " Yes", "YES", " YES"),
    no_words=("no", "No", " no", " No", "NO", " NO"),
    claims=(),
    stop=("\n",),
    # Nothing is known about the model, so no length normalisation is measured for it.
    length_exponent=0.0,
    # An unknown model may be a weak judge (a base model, a tiny one): let it move the
    # lexical order half as far as a known instruction-tuned judge. The model stage's
    # benchmark will calibrate it.
    judge_weight=0.5,
)


@slm_rerank.hookimpl
def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
    register(OPENAI)
