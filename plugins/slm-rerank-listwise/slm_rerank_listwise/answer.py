"""Reading a listwise answer: a JSON array of 0-based candidate numbers, best first.

``parse_ranking(text, n)`` is strict where it can be and repairs only what has one reading:

- strict: a JSON array of integers holding each of ``0..n-1`` exactly once;
- repaired, and each repair named: prose before or after the one array of numbers; a
  trailing comma; a missing closing bracket on a list that runs to the end of the answer;
  1-based numbering (exactly ``1..n``, no 0); repeats of an index (its first place kept)
  when no index is missing; out-of-range numbers when every index is present anyway; one
  missing index (put last: the model did not place it, so nothing says it is better);
- unusable, with the reason: no array, several arrays of numbers, an element that is not
  an integer, more than one index missing, or a missing index beside a repeated or an
  out-of-range one (was the 7 meant to be the missing 3? nothing says).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: one bracketed group with no bracket inside
_GROUP = re.compile(r"\[([^\[\]]*)\]")
#: what the inside of an array of numbers may hold
_NUMBERS = re.compile(r"[\s\d,+-]*")
_INTEGER = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class Ranking:
    """What one answer says: an order of ``0..n-1`` (best first), or why there is none."""

    #: each candidate's number exactly once, best first; None when the answer is unusable
    order: tuple[int, ...] | None
    #: what was repaired to get ``order``, in words (empty: the answer was strict)
    repairs: tuple[str, ...] = ()
    #: why the answer is unusable (None when ``order`` is set)
    problem: str | None = None


def _unusable(problem: str) -> Ranking:
    return Ranking(None, (), problem)


def _holds_numbers(inside: str) -> bool:
    """Whether a bracketed group is meant as the array: it holds a digit ("[best]" does not)."""
    return any(c.isdigit() for c in inside)


def _array_text(text: str) -> tuple[str, list[str]] | str:
    """The inside of the answer's one array and the repairs taken to find it, or a problem."""
    repairs: list[str] = []
    body = text.strip()
    groups = list(_GROUP.finditer(body))
    numeric = [g for g in groups if _holds_numbers(g.group(1))]
    if len(numeric) > 1:
        return f"the answer holds {len(numeric)} arrays of numbers"
    if numeric:
        found = numeric[0]
    else:
        # An array opened and never closed, running to the end (an answer cut short)?
        start = body.rfind("[")
        inside = body[start + 1:]
        if start >= 0 and _NUMBERS.fullmatch(inside) and _holds_numbers(inside):
            if body[:start].strip():
                repairs.append("prose around the array dropped")
            repairs.append("missing closing bracket added")
            return inside, repairs
        if len(groups) != 1:
            return ("the answer holds no array" if start < 0
                    else "the answer holds no array of numbers")
        found = groups[0]  # the one bracketed group there is, though it holds no number
    if (body[:found.start()] + body[found.end():]).strip():
        repairs.append("prose around the array dropped")
    return found.group(1), repairs


def _integers(inside: str, repairs: list[str]) -> list[int] | str:
    if not inside.strip():
        return []
    parts = [p.strip() for p in inside.split(",")]
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
        repairs.append("trailing comma dropped")
    values = []
    for part in parts:
        if not _INTEGER.fullmatch(part):
            what = "an empty element" if not part else f"the element {part!r}"
            return f"{what} is not a candidate number"
        values.append(int(part))
    return values


def _shown(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)


def _permutation(values: list[int], n: int, repairs: list[str]) -> tuple[int, ...] | str:
    if sorted(values) == list(range(n)):
        return tuple(values)
    if n and 0 not in values and sorted(values) == list(range(1, n + 1)):
        repairs.append("1-based numbering shifted to 0-based")
        return tuple(v - 1 for v in values)
    kept: list[int] = []
    repeated: list[int] = []
    outside: list[int] = []
    for v in values:
        if not 0 <= v < n:
            outside.append(v)
        elif v in kept:
            repeated.append(v)
        else:
            kept.append(v)
    missing = [i for i in range(n) if i not in kept]
    if len(missing) > 1:
        return f"indices {_shown(missing)} are missing"
    if missing and (repeated or outside):
        beside = []
        if repeated:
            beside.append(f"{_shown(sorted(set(repeated)))} repeated")
        if outside:
            beside.append(f"{_shown(outside)} out of range (0-{n - 1})")
        return f"index {missing[0]} is missing and {' and '.join(beside)}"
    if repeated:
        repairs.append(f"repeated index {_shown(sorted(set(repeated)))} dropped "
                       "(first place kept)")
    if outside:
        repairs.append(f"out-of-range index {_shown(outside)} dropped")
    if missing:
        repairs.append(f"index {missing[0]} was missing: put last")
        kept.append(missing[0])
    return tuple(kept)


def parse_ranking(text: str, n: int) -> Ranking:
    """The order of ``n`` candidates that ``text`` gives (see the module docstring)."""
    found = _array_text(text)
    if isinstance(found, str):
        return _unusable(found)
    inside, repairs = found
    values = _integers(inside, repairs)
    if isinstance(values, str):
        return _unusable(values)
    order = _permutation(values, n, repairs)
    if isinstance(order, str):
        return _unusable(order)
    return Ranking(order, tuple(repairs))
