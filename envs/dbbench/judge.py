"""Judging a DBBench commit (our re-implementation of AgentBench's result processor).

SELECT-type tasks compare the committed answers with `label`:
1. Each committed string is unpacked when it is a printed DB result (`"[('x',), ('y',)]"`, also with
   `Decimal('3.5')`): its cell values become separate answers, as if the agent had listed them.
2. Both sides are normalised: None / "none" / "null" / "" -> "0"; surrounding spaces dropped;
   "%" removed; thousands separators dropped from numbers written like `1,234,567.5`; a float
   written as an integer-valued number keeps its value (`"167"` == `"167.0"` via step 3).
3. One answer and one label: equal when both parse as floats within 1e-2, else when the normalised
   strings are equal (case-sensitive, like AgentBench).
   Several values on either side: equal when both sides parse entirely as floats and the sorted
   lists match pairwise within 1e-2 (a multiset match), else when the sets of normalised strings
   are equal.
An empty commit never matches a non-empty label.

Mutation tasks are judged by the table hash against `answer_md5` (the committed text is ignored);
that lives in the environment, which owns the database.
"""
from __future__ import annotations

import ast
import re

_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$")
_DECIMAL = re.compile(r"Decimal\('([^']*)'\)")
FLOAT_TOL = 1e-2


def unpack(answer) -> list[str]:
    """A committed answer as cell values: printed result lists are split into their cells."""
    text = "" if answer is None else str(answer)
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]") and "(" in stripped:
        try:
            value = ast.literal_eval(_DECIMAL.sub(r"'\1'", stripped))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return [text]
        if isinstance(value, list) and all(isinstance(r, tuple) for r in value):
            return [str(cell) for row in value for cell in row]
    return [text]


def normalise(value) -> str:
    text = "" if value is None else str(value).strip()
    if text.lower() in ("", "none", "null"):
        return "0"
    text = text.replace("%", "").strip()
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    return text


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None  # NaN never matches


def answers_match(answers: list, label: list) -> bool:
    got = [normalise(v) for a in answers for v in unpack(a)]
    want = [normalise(v) for v in label]
    if not want:
        return not got
    if not got:
        return False
    if len(got) == 1 and len(want) == 1:
        a, b = _float(got[0]), _float(want[0])
        if a is not None and b is not None:
            return abs(a - b) <= FLOAT_TOL
        return got[0] == want[0]
    got_f, want_f = [_float(v) for v in got], [_float(v) for v in want]
    if len(got) == len(want) and None not in got_f and None not in want_f:
        if all(abs(a - b) <= FLOAT_TOL for a, b in zip(sorted(got_f), sorted(want_f))):
            return True
    return set(got) == set(want)
