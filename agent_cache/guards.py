"""Cheap guards run before the reranker: refuse a candidate that cannot be the same question.

Embeddings place "order 12345" next to "order 12346" and "can I" next to "can't I"; a wrong
hit is worse than a miss, so a candidate whose numbers or negation differ from the query
is refused outright, before any model-based verification.
"""

from __future__ import annotations

import re

__all__ = ["GuardResult", "check_guards", "negated", "numbers"]

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATION = re.compile(
    r"\b(not|no|never|none|nobody|nothing|neither|nor|without|cannot|can't|won't|don't|"
    r"doesn't|didn't|isn't|aren't|wasn't|weren't|shouldn't|wouldn't|couldn't|mustn't|"
    r"haven't|hasn't|hadn't|n't)\b|n't\b",
    re.IGNORECASE,
)


def numbers(text: str) -> frozenset[str]:
    """The numbers in ``text``, with thousands separators dropped.

    Example:
        >>> sorted(numbers("order 12,345 costs 9.50"))
        ['12345', '9.50']
    """
    out = set()
    for m in _NUMBER.finditer(text):
        tok = m.group(0)
        # "12,345" is one number; "9.50" keeps its decimal point
        out.add(re.sub(r",(?=\d{3}\b)", "", tok))
    return frozenset(out)


def negated(text: str) -> bool:
    """Whether the text contains a negation marker (not, never, can't, ...)."""
    return _NEGATION.search(text.replace("’", "'")) is not None


class GuardResult(str):
    """The name of the guard that refused, or ``""`` when all passed (falsy)."""


def check_guards(query: str, candidate: str, *, case_sensitive: bool = False) -> GuardResult:
    """Return ``""`` if the candidate may be served for the query, else the refusing guard.

    With ``case_sensitive`` (code namespaces), texts that differ only in case are refused:
    embedding models are mostly uncased, and ``print(X)`` is not ``print(x)``.

    Example:
        >>> check_guards("status of order 12345", "status of order 12346")
        'numbers'
        >>> check_guards("can I cancel", "can't I cancel")
        'negation'
    """
    if case_sensitive and query != candidate and query.casefold() == candidate.casefold():
        return GuardResult("case")
    if numbers(query) != numbers(candidate):
        return GuardResult("numbers")
    if negated(query) != negated(candidate):
        return GuardResult("negation")
    return GuardResult("")
