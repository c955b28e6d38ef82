"""Shared helpers for the difference-analysis tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from agent_cache import LayeredCache

Pairs = Sequence[tuple[str, str]]


def _check_lookups(same: Pairs, different: Pairs) -> None:
    """Each ``(query, stored)`` of ``same`` hits its stored answer through the default
    cache, each of ``different`` misses (every pair in its own scope)."""
    with LayeredCache(path=None) as cache:
        for i, (query, stored) in enumerate(same):
            cache.store(stored, f"same {i}", context=f"s{i}")
            hit = cache.lookup(query, context=f"s{i}")
            assert hit is not None and hit.response == f"same {i}", (query, stored)
        for i, (query, stored) in enumerate(different):
            cache.store(stored, f"other {i}", context=f"d{i}")
            assert cache.lookup(query, context=f"d{i}") is None, (query, stored)


@pytest.fixture
def check_lookups() -> Callable[[Pairs, Pairs], None]:
    """:func:`_check_lookups`: pairs that must hit and pairs that must miss."""
    return _check_lookups
