"""Tenant walls on Redis (exact layer) + a Chroma server (vectors): the same cases as the
unit mixin, and the findings of the multi-tenant trial (another app's prefix, a shared
Chroma server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from agent_cache import LayeredCache
from agent_cache.stores import RedisStore
from agent_cache.testing import HashEmbedder
from tests.unit.core.test_tenant_walls import DeploymentWalls, Make, Q, TenantWalls, _fill, _intact

pytestmark = pytest.mark.integration


class TestRedisChromaWalls(TenantWalls, DeploymentWalls):
    @pytest.fixture
    def make(self, redis_url: str, chroma_url: str) -> Iterator[Make]:
        run = uuid.uuid4().hex[:8]
        made: list[LayeredCache] = []

        def make(prefix: str = "agent_cache") -> LayeredCache:
            cache = LayeredCache(
                path=None,
                redis_url=redis_url,
                chroma_url=chroma_url,
                embedder=HashEmbedder(dim=256),
                prefix=f"{prefix}.{run}",
            )
            made.append(cache)
            return cache

        yield make
        for cache in made:
            cache.clear()
            cache.close()


class TestRedisMemoryVectorWalls(TenantWalls, DeploymentWalls):
    @pytest.fixture
    def make(self, redis_url: str) -> Iterator[Make]:
        run = uuid.uuid4().hex[:8]
        made: list[LayeredCache] = []

        def make(prefix: str = "agent_cache") -> LayeredCache:
            cache = LayeredCache(
                path=None,
                redis_url=redis_url,
                embedder=HashEmbedder(dim=256),
                prefix=f"{prefix}.{run}",
            )
            made.append(cache)
            return cache

        yield make
        for cache in made:
            cache.clear()
            cache.close()


def test_clear_with_the_default_prefix_spares_an_app_under_a_longer_prefix(
    redis_url: str,
) -> None:
    other = RedisStore(redis_url, prefix="agent_cache:tenantB:")
    other.set("k", '"theirs"', namespace="default", expires_at=None, tags=["doc"], now=0.0)
    other.incr("version:default")
    with LayeredCache(path=None, redis_url=redis_url, embedder=HashEmbedder(dim=256)) as mine:
        _fill(mine)
        mine.clear()
        mine.invalidate_all_namespaces(tags=["doc"])
        assert mine.lookup(Q, namespace="A") is None
    assert other.get("k", now=0.0) == '"theirs"'
    assert other.keys_for_tag("doc", limit=10) == ["k"]
    assert other.get_counter("version:default") == 1
    other.clear()
    other.close()


def test_two_apps_on_one_chroma_server_keep_their_vectors(redis_url: str, chroma_url: str) -> None:
    run = uuid.uuid4().hex[:8]
    caches = [
        LayeredCache(
            path=None,
            redis_url=redis_url,
            chroma_url=chroma_url,
            embedder=HashEmbedder(dim=256),
            prefix=f"app{i}.{run}",
        )
        for i in range(2)
    ]
    mine, theirs = caches
    _fill(mine)
    _fill(theirs)
    assert mine.vector_store.collection_name != theirs.vector_store.collection_name  # type: ignore[attr-defined]
    mine.clear()
    assert mine.vector_store.count() == 0
    assert theirs.vector_store.count() == 4
    _intact(theirs)
    for cache in caches:
        cache.clear()
        cache.close()
