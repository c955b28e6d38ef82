"""A namespace (and a deployment prefix) is a wall: every write and delete path is tried.

``TenantWalls`` is a mixin: a subclass provides ``make`` (a factory of caches on one
shared backend, by deployment prefix). Memory and SQLite run here; Redis (with a Chroma
server) runs the same cases in ``tests/integration/test_tenant_walls_real.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.errors import ConfigurationError
from agent_cache.stores import MemoryStore
from agent_cache.testing import HashEmbedder
from agent_cache.vectors import MemoryVectorStore

Make = Callable[..., LayeredCache]

Q = "How do I reset my password for account 7?"
PARA = "how do I reset my password for account 7 !"  # same words: a semantic hit


def _fill(cache: LayeredCache) -> None:
    for ns in ("A", "B"):
        cache.store(Q, f"answer for {ns}", namespace=ns, tags=["doc:1"])
        cache.store(f"{ns} only question number 3", f"other {ns}", namespace=ns, tags=["doc:2"])


def _intact(cache: LayeredCache, ns: str = "B") -> None:
    exact = cache.lookup(Q, namespace=ns)
    assert exact is not None and exact.response == f"answer for {ns}"
    semantic = cache.lookup(PARA, namespace=ns)
    assert semantic is not None and semantic.layer == "semantic"
    assert semantic.response == f"answer for {ns}"


class TenantWalls:
    def test_writes_never_overwrite_another_namespace(self, make: Make) -> None:
        cache = make()
        _fill(cache)
        _intact(cache, "A")
        _intact(cache, "B")
        assert cache.lookup(PARA, namespace="C") is None  # nothing leaks to a third

    def test_invalidate_touches_only_its_namespace(self, make: Make) -> None:
        cache = make()
        _fill(cache)
        assert cache.invalidate(tags=["doc:1"], namespace="A") == 1
        assert cache.lookup(Q, namespace="A") is None
        assert cache.lookup(PARA, namespace="A") is None
        _intact(cache)
        assert cache.invalidate(tags=["doc:1"]) == 0  # "default" holds nothing
        _intact(cache)
        with pytest.raises(ConfigurationError, match="invalidate_all_namespaces"):
            cache.invalidate(tags=["doc:1"], namespace=None)  # type: ignore[arg-type]

    async def test_async_invalidate_touches_only_its_namespace(self, make: Make) -> None:
        cache = make()
        _fill(cache)
        assert await cache.ainvalidate(tags=["doc:1", "doc:2"], namespace="A") == 2
        _intact(cache)

    def test_global_purge_is_an_explicit_call(self, make: Make) -> None:
        cache = make()
        _fill(cache)
        assert cache.invalidate_all_namespaces(tags=["doc:1"]) == 2
        assert cache.lookup(Q, namespace="A") is None and cache.lookup(Q, namespace="B") is None
        assert cache.lookup("B only question number 3", namespace="B") is not None

    def test_clear_and_bump_version_touch_only_their_namespace(self, make: Make) -> None:
        cache = make()
        _fill(cache)
        cache.clear("A")
        assert cache.lookup(Q, namespace="A") is None
        _intact(cache)
        cache.store(Q, "answer for A", namespace="A")
        cache.bump_version("A")
        assert cache.lookup(Q, namespace="A") is None
        _intact(cache)

    @pytest.mark.parametrize(
        "hostile",
        [{"$ne": "tenant-zzz"}, {"$in": ["A", "B"]}, ["A"], 0, b"A", ""],
        ids=["ne", "in", "list", "int", "bytes", "empty"],
    )
    async def test_a_namespace_that_is_not_a_str_deletes_nothing(
        self, make: Make, hostile: object
    ) -> None:
        """A tenant id parsed from a JSON body may be a dict: a Chroma operator."""
        cache = make()
        _fill(cache)
        exact, vectors = cache.entry_counts()["exact"], cache.vector_store.count()
        calls = [
            lambda: cache.clear(hostile),  # type: ignore[arg-type]
            lambda: cache.bump_version(hostile),  # type: ignore[arg-type]
            lambda: cache.error_estimate(hostile),  # type: ignore[arg-type]
            lambda: cache.threshold_for(hostile),  # type: ignore[arg-type]
            lambda: cache.invalidate(["doc:1"], namespace=hostile),  # type: ignore[arg-type]
        ]
        for call in calls:
            with pytest.raises(ConfigurationError, match="non-empty str"):
                call()
        with pytest.raises(ConfigurationError, match="non-empty str"):
            await cache.aclear(hostile)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="non-empty str"):
            await cache.abump_version(hostile)  # type: ignore[arg-type]
        assert cache.entry_counts()["exact"] == exact
        assert cache.vector_store.count() == vectors
        _intact(cache, "A")
        _intact(cache, "B")

    def test_stale_vector_cleanup_stays_in_its_scope(self, make: Make) -> None:
        cache = make()
        _fill(cache)
        a_key = cache.lookup(Q, namespace="A")
        assert a_key is not None
        before = cache.vector_store.count()
        cache.kv_store.delete([a_key.key])  # A's entry gone behind the cache's back
        assert cache.lookup(PARA, namespace="A") is None
        assert cache.vector_store.count() >= before - 1
        _intact(cache)


class DeploymentWalls:
    """Two deployments (prefixes) on one backend: for backends where a prefix names a
    separate space (SQLite folder, Redis keys, Chroma collection). A ``MemoryStore`` has
    no prefix: two caches handed one store object are one deployment, so the memory
    class does not take these cases."""

    def test_another_deployment_is_never_cleared(self, make: Make) -> None:
        mine, theirs = make(prefix="agent_cache"), make(prefix="agent_cache.tenantB")
        assert mine.kv_store is not theirs.kv_store
        _fill(theirs)
        theirs.bump_version("A")
        theirs.store(Q, "answer for A", namespace="A")
        _fill(mine)
        mine.clear()
        assert mine.lookup(Q, namespace="B") is None
        _intact(theirs)
        _intact(theirs, "A")
        assert theirs.kv_store.get_counter("version:A") == 1
        mine.invalidate_all_namespaces(tags=["doc:1"])
        _intact(theirs)


class TestMemoryWalls(TenantWalls):
    @pytest.fixture
    def make(self) -> Make:
        kv, vectors = MemoryStore(), MemoryVectorStore()

        def make(prefix: str = "agent_cache") -> LayeredCache:
            return LayeredCache(
                path=None,
                kv_store=kv,
                vector_store=vectors,
                embedder=HashEmbedder(dim=256),
                prefix=prefix,
            )

        return make


class TestSQLiteWalls(TenantWalls, DeploymentWalls):
    @pytest.fixture
    def make(self, tmp_path: Path) -> Iterator[Make]:
        made: list[LayeredCache] = []

        def make(prefix: str = "agent_cache") -> LayeredCache:
            cache = LayeredCache(
                path=tmp_path / prefix, embedder=HashEmbedder(dim=256), prefix=prefix
            )
            made.append(cache)
            return cache

        yield make
        for cache in made:
            cache.close()


def test_prefix_is_validated() -> None:
    for bad in ("", "a", "agent cache", "agent_cache:", "-x-"):
        with pytest.raises(ConfigurationError):
            LayeredCache(path=None, prefix=bad)
