"""Batched vector writes on a real Redis + a real Chroma server: every write readable
after the batch, ``close()`` flushes, tenant walls hold inside a batch, a failing batch
is counted and logged, and a process reads its own queued writes at once."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder
from agent_cache.vectors import ChromaVectorStore

pytestmark = pytest.mark.integration


@pytest.fixture
def make(redis_url: str, chroma_url: str) -> Iterator[Any]:
    made: list[LayeredCache] = []
    prefix = f"batched.{uuid.uuid4().hex[:8]}"

    def make() -> LayeredCache:
        cache = LayeredCache(
            path=None,
            redis_url=redis_url,
            chroma_url=chroma_url,
            embedder=HashEmbedder(dim=64),
            prefix=prefix,
        )
        made.append(cache)
        return cache

    yield make
    for cache in made:
        cache.close()
    with LayeredCache(
        path=None, redis_url=redis_url, chroma_url=chroma_url, prefix=prefix
    ) as cleanup:
        cleanup.clear()


def _spy_upserts(store: ChromaVectorStore) -> list[int]:
    """Sizes of the upserts the store sends to the server from now on."""
    sizes: list[int] = []
    collection = store._coll()
    real = collection.upsert

    def upsert(**kwargs: Any) -> Any:
        sizes.append(len(kwargs["ids"]))
        return real(**kwargs)

    collection.upsert = upsert
    return sizes


def _texts(n: int, tag: str) -> list[str]:
    return [f"question {tag} number {i} about topic {i * 7 % 13} of {tag}" for i in range(n)]


def test_concurrent_stores_share_upserts_and_all_are_readable_after_the_flush(make: Any) -> None:
    cache = make()
    store = cache.vector_store
    assert isinstance(store, ChromaVectorStore)
    sizes = _spy_upserts(store)
    texts = _texts(100, "many")
    keys: list[str] = []
    lock = threading.Lock()

    def writer(part: list[str]) -> None:
        for text in part:
            key = cache.store(text, f"answer to {text}", ttl=3600)
            with lock:
                keys.append(key)

    threads = [threading.Thread(target=writer, args=(texts[w::4],)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.flush(30)
    assert sum(sizes) == 100 and len(sizes) < 100  # batched: fewer calls than stores
    counts = store.write_counts()
    assert counts["written"] == 100 and counts["failed_vectors"] == 0 and counts["pending"] == 0
    meta = store.metadata(keys)
    assert sorted(meta) == sorted(keys)
    assert all(m["namespace"] == "default" and m["key"] == k for k, m in meta.items())
    assert cache.entry_counts() == {"exact": 100, "semantic": 100}
    assert cache.stats().errors == 0


def test_close_writes_what_is_queued(make: Any, chroma_url: str) -> None:
    cache = make()
    store = cache.vector_store
    assert isinstance(store, ChromaVectorStore)
    store.count()  # the collection is open: every add below is queued
    keys = [cache.store(t, "a", ttl=3600) for t in _texts(40, "close")]
    assert store.write_counts()["pending"] > 0
    cache.close()  # no flush first: close must write the queue
    assert store.write_counts()["written"] == 40
    fresh = ChromaVectorStore(url=chroma_url, collection=cache.prefix)
    try:
        assert sorted(fresh.metadata(keys)) == sorted(keys)
    finally:
        fresh.close()


def test_tenant_walls_hold_in_a_batch_mixing_namespaces(make: Any) -> None:
    cache = make()
    store = cache.vector_store
    assert isinstance(store, ChromaVectorStore)
    sizes = _spy_upserts(store)
    shared = "what is the refund policy for damaged items"
    written: dict[str, list[str]] = {"t1": [], "t2": []}
    barrier = threading.Barrier(2)

    def writer(ns: str) -> None:
        barrier.wait()
        texts = _texts(20, ns) + ([shared] if ns == "t1" else [])
        for text in texts:
            written[ns].append(cache.store(text, f"{ns}: {text}", namespace=ns, ttl=3600))

    threads = [threading.Thread(target=writer, args=(ns,)) for ns in written]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.flush(30)
    assert sum(sizes) == 41 and len(sizes) < 41
    meta = store.metadata(written["t1"] + written["t2"])
    for ns, keys in written.items():
        assert all(meta[k]["namespace"] == ns for k in keys)
    scopes = {ns: {meta[k]["scope"] for k in keys} for ns, keys in written.items()}
    assert scopes["t1"].isdisjoint(scopes["t2"])
    hit = cache.lookup(shared, namespace="t1")
    assert hit is not None and hit.response == f"t1: {shared}"
    # t2 never sees t1's entry, neither exactly nor semantically
    assert cache.lookup(shared, namespace="t2") is None
    assert cache.lookup(shared + " please", namespace="t2") is None
    vector = cache.embedder.embed([shared])[0]
    for scope in scopes["t2"]:
        found = store.query(vector, k=50, scope=scope, now=cache.clock())
        assert {m.id for m in found} <= set(written["t2"])


def test_a_failing_batch_is_counted_and_logged_and_spares_the_others(
    chroma_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    errors: list[Exception] = []
    store = ChromaVectorStore(
        url=chroma_url,
        collection=f"failing.{uuid.uuid4().hex[:8]}",
        write_linger=0.05,
        on_write_error=errors.append,
    )
    meta = {"scope": "s", "namespace": "n"}
    store.add(["first"], np.ones((1, 8), dtype=np.float32), [meta])
    assert store.flush(30)  # written at once (it opens the collection): 8 dimensions
    with caplog.at_level(logging.WARNING, logger="agent_cache"):
        store.add(["good1"], np.ones((1, 8), dtype=np.float32), [meta])
        store.add(["wrong"], np.ones((1, 16), dtype=np.float32), [meta])  # same linger
        store.add(["good2"], np.full((1, 8), 0.5, dtype=np.float32), [meta])
        assert store.flush(30)
    counts = store.write_counts()
    assert counts["failed_batches"] == 1 and counts["failed_vectors"] == 1
    assert counts["written"] == 2 and counts["pending"] == 0  # good1, good2: queued
    assert len(errors) == 1 and "dimension" in str(errors[0])
    assert any("batch of 1 vectors" in r.getMessage() for r in caplog.records)
    assert sorted(store.metadata(["first", "good1", "wrong", "good2"])) == [
        "first",
        "good1",
        "good2",
    ]
    store.clear()
    store.close()


def test_a_process_reads_its_own_queued_writes(chroma_url: str) -> None:
    store = ChromaVectorStore(
        url=chroma_url, collection=f"yours.{uuid.uuid4().hex[:8]}", write_linger=5.0
    )
    assert store.count() == 0  # opens the collection: the adds below are queued
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(3, 8)).astype(np.float32)
    metas = [{"scope": "s", "expires_at": 1e12}, {"scope": "s", "expires_at": 1.0}]
    store.add(["a", "expired"], vectors[:2], metas)  # queued for up to 5 s
    assert store.write_counts()["pending"] == 2
    found = store.query(vectors[0], k=3, scope="s", now=10.0)
    assert [m.id for m in found] == ["a"] and found[0].score == pytest.approx(1.0, abs=1e-5)
    assert store.query(vectors[0], k=3, scope="other", now=10.0) == []
    store.delete(["a"])  # waits for the queue: the add cannot land after the delete
    assert store.write_counts()["pending"] == 0
    assert store.query(vectors[0], k=3, scope="s", now=10.0) == []
    store.clear()
    store.close()
