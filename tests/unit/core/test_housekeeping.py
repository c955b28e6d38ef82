"""Housekeeping: expired entries leave the exact store, the tag index and the vectors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent_cache import LayeredCache
from agent_cache.stores import MemoryStore
from agent_cache.testing import FakeClock, HashEmbedder


def _fill_expired_then_write(cache: LayeredCache, clock: FakeClock, n: int = 2_000) -> None:
    cache.store_many(
        [(f"expiring question {i}?", f"a{i}") for i in range(n)], ttl=10, tags=["doc:1"]
    )
    clock.advance(20)
    for i in range(n // 10):  # ordinary traffic: each write purges a bounded batch
        cache.store(f"fresh question {i}?", f"b{i}", tags=["doc:2"])


def test_memory_expired_entries_tags_and_vectors_are_purged_on_write() -> None:
    clock = FakeClock()
    kv = MemoryStore(max_entries=50_000)
    cache = LayeredCache(path=None, kv_store=kv, embedder=HashEmbedder(), clock=clock)
    _fill_expired_then_write(cache, clock)
    assert kv.count() == 200
    assert kv.keys_for_tag("doc:1", 10_000, namespace="default") == []
    assert cache.vector_store.count() == 200


def test_sqlite_expired_entries_tags_and_vectors_are_purged_on_write(tmp_path: Path) -> None:
    clock = FakeClock()
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(), clock=clock) as cache:
        _fill_expired_then_write(cache, clock)
        assert cache.kv_store.count() == 200
        assert cache.vector_store.count() == 200
    with sqlite3.connect(tmp_path / "exact.sqlite3") as conn:
        assert conn.execute("SELECT COUNT(*) FROM tags WHERE tag = 'doc:1'").fetchone()[0] == 0


def test_a_shorter_semantic_ttl_purges_the_vector_alone(tmp_path: Path) -> None:
    from agent_cache.policy import TtlPolicy

    clock = FakeClock()
    policy = TtlPolicy(default_ttl=3600, semantic_ttl=10, jitter=0)
    with LayeredCache(
        path=tmp_path, embedder=HashEmbedder(), clock=clock, ttl_policy=policy
    ) as cache:
        cache.store_many([(f"question {i}?", "a") for i in range(100)])
        clock.advance(20)
        cache.housekeep()
        assert cache.vector_store.count() == 0 and cache.kv_store.count() == 100


def test_memory_vectors_follow_the_exact_layers_lru_bound() -> None:
    kv = MemoryStore(max_entries=1_000)
    cache = LayeredCache(path=None, kv_store=kv, embedder=HashEmbedder())
    for i in range(5_000):
        cache.store(f"distinct question number {i}?", f"a{i}")
    assert kv.count() == 1_000
    assert cache.vector_store.count() <= 1_000 + 16  # one housekeeping pass behind at most
    hit = cache.lookup("distinct question number 4999 ?")
    assert hit is not None and hit.response == "a4999"
