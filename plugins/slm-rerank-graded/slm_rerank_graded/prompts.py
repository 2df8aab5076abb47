"""The graded judge's prompt: what it says, in which layout, and how a user replaces it.

Three ways to change it, from the least to the most:

- ``[plugins.graded] instruction``: the instruction alone (``{max}`` is the top grade),
  kept in the model family's layout: a localised instruction, say.
- ``[plugins.graded] layout``: the whole prompt, with ``{instruction}``, ``{query}``,
  ``{document}`` and ``{max}``: a fully localised prompt, examples included.
- ``set_prompt_builder(function)`` from Python: a function of ``PromptParts`` returning
  the prompt, for anything a template cannot say.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from slm_rerank.registrations import ModelProfile

INSTRUCTION = ("Rate how relevant the Document is to the Query, from 0 (unrelated) to {max} "
               "(it holds the answer, or the code or text the Query is about). Answer with "
               "the number only.")

# A base model does not follow an instruction alone; two worked examples teach it the
# answer format. They sit before the query, in the prefix every document shares, and their
# documents look like the ones the host sends ("File: path:lines (symbol)" then the code).
# The profile's own few-shot layout cannot be reused: its examples answer yes or no.
FEW_SHOT = (
    "{instruction}\n\n"
    "Query: how is the delay between retries computed\n"
    "Document:\nFile: src/http/retry.py:12-13 (backoff)\n"
    "def backoff(attempt):\n"
    "    return min(2 ** attempt, 60)\n"
    "Score: {high}\n\n"
    "Query: where is the log file rotated\n"
    "Document:\nFile: src/ui/colours.py:1-1\n"
    "COLOURS = {\"red\": 1, \"green\": 2}\n"
    "Score: 0\n\n"
    "Query: {query}\n"
    "Document:\n{document}\n"
    "Score:"
)


@dataclass(frozen=True)
class PromptParts:
    """Everything a prompt builder is given for one document."""

    query: str
    document: str
    max_grade: int
    #: the model family's profile (None when the host has none)
    profile: ModelProfile | None
    #: the instruction with ``{max}`` filled in (the setting's, or the default)
    instruction: str
    #: the ``layout`` setting, or None for the default layout
    layout: str | None = None


_FIELD = re.compile(r"\{(instruction|max|high|query|document)\}")

#: A prompt builder: the raw completion prompt for one document.
PromptBuilder = Callable[[PromptParts], str]


def _fill(template: str, values: dict[str, str]) -> str:
    # One pass over the template's own fields, not str.format or chained replaces: a query
    # or a chunk of code is full of braces, and may even spell "{document}".
    return _FIELD.sub(lambda m: values[m.group(1)], template)


def default_prompt(parts: PromptParts) -> str:
    """The prompt the judge sends unless told otherwise.

    With a ``layout`` setting, that layout. Else, for a profile with a chat template (an
    instruction-tuned family), the profile's own completion layout with the graded
    instruction in place of its yes/no one; for a base model (no chat template) or no
    profile, the two-shot ``FEW_SHOT`` layout ending in "Score:".
    """
    values = {"instruction": parts.instruction, "max": str(parts.max_grade),
              "high": str(round(0.9 * parts.max_grade)), "query": parts.query,
              "document": parts.document}
    if parts.layout is not None:
        return _fill(parts.layout, values)
    if parts.profile is not None and parts.profile.chat:
        graded = dataclasses.replace(parts.profile, instruction=parts.instruction)
        return graded.render_completion(parts.query, parts.document)
    return _fill(FEW_SHOT, values)


_builder: PromptBuilder = default_prompt


def set_prompt_builder(builder: PromptBuilder | None) -> None:
    """Replace the prompt of every later graded judgement in this process (None: the default).

    The function gets a ``PromptParts`` and returns the raw completion prompt. Keep the
    document last, so that the server's prompt cache reuses the shared prefix.
    """
    global _builder
    _builder = builder if builder is not None else default_prompt


def prompt_builder() -> PromptBuilder:
    """The prompt builder in use."""
    return _builder
