"""Housekeeping on a real Redis: expired entries leave every index; wrong types repaired."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis

from agent_cache import LayeredCache
from agent_cache.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.integration


def _raw(url: str) -> Any:
    return redis.Redis.from_url(url, decode_responses=True)


def test_expired_entries_leave_the_records_tag_sets_and_vectors(redis_url: str) -> None:
    prefix = f"hk{uuid.uuid4().hex[:8]}"
    clock = FakeClock()
    raw = _raw(redis_url)
    with LayeredCache(
        path=None, redis_url=redis_url, prefix=prefix, clock=clock, embedder=HashEmbedder()
    ) as cache:
        cache.store_many(
            [(f"expiring question {i}?", f"a{i}") for i in range(2_000)], ttl=10, tags=["doc:1"]
        )
        clock.advance(20)
        for i in range(200):
            cache.store(f"fresh question {i}?", f"b{i}", tags=["doc:2"])
        assert cache.kv_store.count() == 200
        assert cache.vector_store.count() == 200
        assert raw.scard(f"{prefix}:t:7:default:doc:1") == 0
        assert raw.zcard(f"{prefix}:x") == 200  # only the fresh entries' expiries
        assert raw.scard(f"{prefix}:ns:default") == 200
        assert not raw.exists(f"{prefix}:e:{cache.store('expiring question 0?', 'x', ttl=0)}")
        cache.clear()
    raw.close()


def test_a_key_overwritten_with_the_wrong_type_is_repaired(redis_url: str) -> None:
    prefix = f"wt{uuid.uuid4().hex[:8]}"
    raw = _raw(redis_url)
    with LayeredCache(
        path=None, redis_url=redis_url, prefix=prefix, embedder=HashEmbedder()
    ) as cache:
        key = cache.store("What is RAG?", "retrieval")
        raw.set(f"{prefix}:e:{key}", "garbage")  # someone else's SET on our key
        raw.set(f"{prefix}:ns:default", "garbage")
        assert cache.lookup("What is RAG?") is None  # a miss, repaired on the way
        cache.store("What is RAG?", "retrieval")
        hit = cache.lookup("What is RAG?")
        assert hit is not None and hit.response == "retrieval"
        assert raw.type(f"{prefix}:ns:default") == "set"
        assert cache.stats().errors == 0
        cache.clear()
    raw.close()
