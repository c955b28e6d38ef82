"""``check_guards``: the v0.1 entry point, now a thin front over the difference analysis.

v0.1 refused a candidate through fixed word lists (numbers, negation, capitalized
entities, ~50 opposite pairs). :mod:`agent_cache.differences` replaced them with an
analysis of *what differs* between the two questions; this module keeps the old names
so that code written against them still runs.
"""

from __future__ import annotations

from agent_cache.differences import analyze

__all__ = ["GuardResult", "check_guards"]


class GuardResult(str):
    """The refusal reason, or ``""`` when nothing refuses (falsy)."""


def check_guards(query: str, candidate: str, *, case_sensitive: bool = False) -> GuardResult:
    """Return ``""`` if the candidate may be served for the query, else the refusal reason.

    Same as ``agent_cache.differences.analyze(query, candidate).reason``; see
    :func:`agent_cache.differences.analyze` (and :func:`~agent_cache.differences.explain`
    for the whole account).

    Example:
        >>> check_guards("status of order 12345", "status of order 12346")
        'numbers'
        >>> check_guards("can I cancel", "can't I cancel")
        'negation'
        >>> check_guards("How do I sort a list in descending order?",
        ...              "How do I sort a list in ascending order?")
        'opposites'
    """
    return GuardResult(analyze(query, candidate, case_sensitive=case_sensitive).reason)
