"""The embedder is part of the semantic scope on Redis (exact layer) + a Chroma server
(vectors): the cases of ``tests/unit/core/test_embedder_scope.py`` on one shared deployment,
and what a second embedder of another dimension gets from one Chroma collection."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from agent_cache import LayeredCache
from agent_cache.protocols import Embedder
from agent_cache.testing import HashEmbedder
from tests.unit.core.test_embedder_scope import (  # collected here too, on this fixture
    PARA,
    PARA2,
    Q2,
    Make,
    Q,
    test_another_embedder_never_searches_the_vectors,
    test_bulk_loads_are_scoped_by_embedder,
    test_clear_of_a_namespace_removes_every_embedders_vectors,
    test_invalidation_removes_every_embedders_vectors,
)

pytestmark = pytest.mark.integration

__all__ = [
    "test_another_embedder_never_searches_the_vectors",
    "test_bulk_loads_are_scoped_by_embedder",
    "test_clear_of_a_namespace_removes_every_embedders_vectors",
    "test_invalidation_removes_every_embedders_vectors",
]


@pytest.fixture
def make(redis_url: str, chroma_url: str) -> Iterator[Make]:
    """Caches on one Redis prefix and one Chroma collection, each with its embedder."""
    prefix = f"scope.{uuid.uuid4().hex[:8]}"
    made: list[LayeredCache] = []

    def factory(embedder: Embedder, **kw: Any) -> LayeredCache:
        cache = LayeredCache(
            path=None,
            redis_url=redis_url,
            chroma_url=chroma_url,
            prefix=prefix,
            embedder=embedder,
            threshold=0.8,
            **kw,
        )
        made.append(cache)
        return cache

    yield factory
    made[0].clear()
    for cache in made:
        cache.close()


def test_another_dimension_on_one_collection_is_a_logged_semantic_miss(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    """A Chroma collection holds one dimension: the second embedder's vectors cannot be
    written there. Its exact entries are, it misses semantically with a logged
    ``BackendError`` naming the dimension and the fix (never an exception to the
    caller, never an open circuit), and the first embedder's semantic layer is
    untouched."""
    a = make(HashEmbedder(64))
    b = make(HashEmbedder(32))
    a.store(Q, "from A")
    with caplog.at_level(logging.WARNING, logger="agent_cache"):
        b.store(Q2, "from B")
        assert b.lookup(PARA2) is None
        assert b.lookup(PARA) is None
    failed = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    # each call meets the dimension error (counted per cause), logged at most once a
    # minute per cause, never an open circuit
    assert 1 <= len(failed) <= 3, failed
    assert all("dimension of 64, got 32" in m and "its own prefix" in m for m in failed)
    counted = sum(n for k, n in b.stats().counters.items() if k.startswith("errors:"))
    assert counted == 3, b.stats().counters
    assert b.health()["semantic"] == "closed"  # the server answered: it is up
    exact = b.lookup(Q2)
    assert exact is not None and exact.layer == "exact" and exact.response == "from B"
    theirs = a.lookup(PARA)
    assert theirs is not None and theirs.layer == "semantic" and theirs.response == "from A"
