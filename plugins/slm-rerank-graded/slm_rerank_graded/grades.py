"""Reading a grade: strictly from generated text, or as an expected value from logprobs.

Both readers are pure functions over what a server answered; the scorer (``__init__``)
decides which to ask for.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from slm_rerank.plugin_kit import TokenChoice

#: the first integer of an answer must start within this many characters of its first
#: line (stripped): "7", "7/10", "Score: 7", "Relevance score: 7" pass; a sentence that
#: reaches a number only later ("The document is about retries, 3 of them") does not
SHORT_ANSWER_CHARS = 20

# A run of digits that is not part of a larger number: not after a digit, a sign or a
# decimal point, and not followed by a decimal point and a digit (7.5). A trailing "." (a
# sentence's end: "7.") is allowed. "/N" after it is captured to check the scale.
_NUMBER = re.compile(r"(?<![\d.])(?P<sign>[-+\u2212]?)(?P<digits>\d+)"
                     r"(?P<fraction>[.,]\d)?(?:\s*/\s*(?P<scale>\d+))?")


class GradeError(ValueError):
    """An answer that is not a grade: the document gets no verdict, never a zero."""

    def __init__(self, reason: str, answer: str) -> None:
        super().__init__(f"{reason} (the answer was {answer!r})")
        self.reason = reason
        self.answer = answer


def parse_grade(answer: str, max_grade: int) -> int:
    """The integer grade in a short answer, or ``GradeError`` saying why there is none.

    Accepted: an integer alone ("7", " 7\\n"), or the first integer of a short answer
    ("7/10", "Score: 7", "7 out of 10"). Refused: an empty answer, no integer within the
    first ``SHORT_ANSWER_CHARS`` characters of the first line, a negative number, a
    decimal number ("7.5", "7,5"), a grade above ``max_grade``, and a fraction on another
    scale ("3/5" when the scale is 0..10).
    """
    line = answer.strip().split("\n", 1)[0].strip()
    if not line:
        raise GradeError("an empty answer", answer)
    match = _NUMBER.search(line)
    if match is None or match.start() >= SHORT_ANSWER_CHARS:
        where = "" if match is None else f" within its first {SHORT_ANSWER_CHARS} characters"
        raise GradeError(f"no integer{where}", answer)
    if match.group("sign") in ("-", "\u2212"):
        raise GradeError("a negative number", answer)
    if match.group("fraction"):
        raise GradeError("a decimal number, not an integer grade", answer)
    grade = int(match.group("digits"))
    scale = match.group("scale")
    if scale is not None and int(scale) != max_grade:
        raise GradeError(f"a grade on a scale of {scale}, not {max_grade}", answer)
    if grade > max_grade:
        raise GradeError(f"a grade above the maximum {max_grade}", answer)
    return grade


# --- logprobs over digit tokens -----------------------------------------------------------


def token_text(token: str) -> str:
    """A token's text with "▁" (SentencePiece) and "Ġ" (byte-level BPE) read as spaces."""
    return token.replace("\u2581", " ").replace("\u0120", " ")


def is_blank(token: str) -> bool:
    """A token of spaces alone: a tokenizer that splits digits (Gemma) emits the space
    before a number as a token of its own, so the digits come one position later."""
    text = token_text(token)
    return bool(text) and not text.strip() and "\n" not in text


def grade_of_token(token: str, max_grade: int) -> int | None:
    """The grade a candidate token spells (digits alone, a leading space allowed), or None."""
    text = token_text(token).strip()
    if not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    return value if value <= max_grade else None


def needs_second_digit(grade: int, max_grade: int) -> bool:
    """Whether a first digit may go on to a larger grade: "1" may be the start of "10"."""
    return 0 < grade and grade * 10 <= max_grade


@dataclass(frozen=True)
class DigitMass:
    """The probabilities of the grades a top-K list spells, and their share of it."""

    #: grade -> probability (not renormalised) of the tokens spelling it
    grades: dict[int, float]
    #: the total probability of those tokens (the rest went to other tokens)
    mass: float
    #: grade -> the token text that spells it with the most probability (to extend it)
    spelling: dict[int, str]


def digit_mass(top: Sequence[TokenChoice], max_grade: int) -> DigitMass:
    """How the candidates of one position spread over the grades 0..``max_grade``."""
    grades: dict[int, float] = {}
    best: dict[int, tuple[float, str]] = {}
    for choice in top:
        grade = grade_of_token(choice.token, max_grade)
        if grade is None or not math.isfinite(choice.logprob):
            continue
        p = math.exp(choice.logprob)
        grades[grade] = grades.get(grade, 0.0) + p
        if p > best.get(grade, (-1.0, ""))[0]:
            best[grade] = (p, choice.token)
    return DigitMass(grades, sum(grades.values()),
                     {g: token_text(t) for g, (_, t) in best.items()})


def continuation(first: int, top: Sequence[TokenChoice], max_grade: int) -> dict[int, float]:
    """How the grade spelt so far by ``first`` ends, from the candidates of the next token.

    A candidate starting with a digit makes a longer number ("1" then "0" is 10; one above
    ``max_grade``, "1" then "5" with a maximum of 10, is no grade and drops out); any other
    candidate (a newline, "/", a space) ends the number at ``first``. The shares are
    renormalised over the candidates listed.
    """
    shares: dict[int, float] = {}
    total = 0.0
    for choice in top:
        if not math.isfinite(choice.logprob):
            continue
        p = math.exp(choice.logprob)
        total += p
        digits = re.match(r"\d+", token_text(choice.token))
        if digits is None:
            shares[first] = shares.get(first, 0.0) + p
            continue
        value = int(f"{first}{digits.group(0)}")
        if value <= max_grade:
            shares[value] = shares.get(value, 0.0) + p
    if total <= 0:
        return {first: 1.0}
    return {grade: p / total for grade, p in shares.items()}


def expected_grade(grades: dict[int, float]) -> float:
    """The expected grade, renormalised over the grades given (their mass must be > 0)."""
    total = sum(grades.values())
    return sum(g * p for g, p in grades.items()) / total
