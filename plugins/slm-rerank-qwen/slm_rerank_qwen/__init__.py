"""Model profiles: Qwen chat models, Qwen thinking models, and the Qwen3-Reranker judge.

Three layouts, chosen by the served model id (the longest claim wins):

- ``qwen``: ChatML as Qwen 2 / 2.5 and the non-thinking Qwen3 releases (``-Instruct-2507``,
  ``Qwen3-Coder``) expect it.
- ``qwen-think``: the same ChatML plus the empty think block Qwen3's template writes when
  thinking is off, so the answer word comes first. It claims QwQ, hybrid Qwen3 / Qwen3.x
  models (which think by default) and ``-Thinking`` variants.
- ``qwen3-reranker``: the exact prompt Qwen3-Reranker was trained on; its score is the
  two-way softmax of "yes" against "no", which is what the yes/no scorer computes.
"""

from __future__ import annotations

from collections.abc import Callable

import slm_rerank
from slm_rerank.registrations import ModelProfile, Turn

INSTRUCTION = ("Judge whether the Document helps answer the Query: it holds the answer, or "
               "the code or text the Query is about. Answer only \"yes\" or \"no\".")

ANSWER = " Answer only \"yes\" or \"no\"."

# The question each intent of a code query asks (slm_rerank/model/intent.py). A small judge
# asked whether a chunk "helps" says yes to every test and doc page that shares the query's
# words; asked whether this is the code to edit, or the code that does it, it can tell.
INTENTS = (
    ("change", "The Query reports a bug or asks for a change in a code base. Judge whether "
               "the Document is the code that must be edited to fix or implement what the "
               "Query describes." + ANSWER),
    ("locate", "The Query asks where something is done in a code base. Judge whether the "
               "Document is the code that implements or defines what the Query asks "
               "about." + ANSWER),
    ("tests", "The Query asks about the tests of a code base. Judge whether the Document is "
              "a test of what the Query describes." + ANSWER),
    ("docs", "The Query asks about the documentation of a code base. Judge whether the "
             "Document documents what the Query describes." + ANSWER),
)

USER = "Query: {query}\n\nDocument:\n{document}"

CHATML = ("<|im_start|>system\n{instruction}<|im_end|>\n"
          "<|im_start|>user\n" + USER + "<|im_end|>\n"
          "<|im_start|>assistant\n")

# What Qwen3's template writes after the assistant tag with enable_thinking=False.
EMPTY_THINK = "<think>\n\n</think>\n\n"

YES = ("yes", "Yes", " yes", " Yes", "YES")
NO = ("no", "No", " no", " No", "NO")

# "Qwen3", "qwen-3", "Qwen3.5", "qwen3:8b": the separators model ids use between words.
_SEP = r"[-_ .:\w]*?"

QWEN = ModelProfile(
    name="qwen",
    description="Qwen 2 / 2.5 and non-thinking Qwen3 (Instruct-2507, Coder): ChatML",
    instruction=INSTRUCTION,
    completion=CHATML,
    chat=(Turn("system", "{instruction}"), Turn("user", USER)),
    yes_words=YES,
    no_words=NO,
    claims=(r"qwen", r"qwen[-_ ]?2(?:\.5)?",
            # longer than qwen-think's "qwen3": an Instruct or Coder release does not think
            rf"qwen[-_ ]?3(?:\.\d+)?{_SEP}(?:instruct|coder)"),
    stop=("<|im_end|>",),
    length_exponent=0.12,
    # Chosen on the dev half of the benchmark cases with Qwen2.5-Coder-1.5B-Instruct
    # (docs/benchmarks.md, "Model stage: quality with an instruct judge"): on whole issues
    # its verdicts at w = 1 lifted Hit@1 and Hit@5; on titles any weight above 0.1 cost
    # Hit@10, so a one-line query lets it only nudge the lexical order.
    judge_weight=1.0,
    short_query_weight=0.1,
    weight_measured=("docs/benchmarks.md, 'Model stage: quality with an instruct judge': "
                     "Qwen2.5-Coder-1.5B-Instruct on the dev cases"),
    intents=INTENTS,
)

QWEN_THINK = ModelProfile(
    name="qwen-think",
    description="QwQ, hybrid Qwen3 / Qwen3.x and -Thinking models: ChatML, empty think block",
    instruction=INSTRUCTION,
    completion=CHATML + EMPTY_THINK,
    # A chat endpoint writes the assistant tag itself, and a thinking model's first token
    # there is "<think>": it only works when the server turns thinking off (llama-server
    # --reasoning-budget 0, or chat_template_kwargs {"enable_thinking": false}).
    chat=(Turn("system", "{instruction}"), Turn("user", USER)),
    yes_words=YES,
    no_words=NO,
    # "qwq" runs to the end of the name: "Qwen/QwQ-32B" must outweigh qwen's "Qwen"
    claims=(r"qwq[-_ .:\w]*", r"qwen[-_ ]?3(?:\.\d+)?",
            rf"qwen[-_ ]?3(?:\.\d+)?{_SEP}thinking"),
    stop=("<|im_end|>",),
    length_exponent=0.12,
    judge_weight=1.0,
    intents=INTENTS,
)

RERANKER_SYSTEM = ("Judge whether the Document meets the requirements based on the Query and "
                   "the Instruct provided. Note that the answer can only be \"yes\" or \"no\".")
RERANKER_USER = "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"

QWEN3_RERANKER = ModelProfile(
    name="qwen3-reranker",
    description="Qwen3-Reranker: its trained yes/no prompt, scored as P(yes) against P(no)",
    # Goes in the <Instruct> slot; the model card's is about web search, this one is ours.
    instruction=("Given a question about a code base, judge whether this code or "
                 "documentation answers it"),
    completion=("<|im_start|>system\n" + RERANKER_SYSTEM + "<|im_end|>\n"
                "<|im_start|>user\n" + RERANKER_USER + "<|im_end|>\n"
                "<|im_start|>assistant\n" + EMPTY_THINK),
    chat=(Turn("system", RERANKER_SYSTEM), Turn("user", RERANKER_USER)),
    # exactly the two tokens the model was trained to score
    yes_words=("yes",),
    no_words=("no",),
    claims=(r"qwen[-_ ]?3(?:\.\d+)?[-_ ]?reranker",),
    stop=("<|im_end|>",),
    length_exponent=0.12,
    judge_weight=1.0,
)

PROFILES = (QWEN, QWEN_THINK, QWEN3_RERANKER)


@slm_rerank.hookimpl
def register_model_profiles(register: Callable[[ModelProfile], None]) -> None:
    for profile in PROFILES:
        register(profile)
