"""Per-tenant quotas on a real Redis: one tenant's traffic never evicts another's entries
(the unit suite covers memory and SQLite; Redis had no eviction, so quotas did nothing)."""

from __future__ import annotations

import uuid

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder

pytestmark = pytest.mark.integration


def test_a_noisy_tenant_evicts_only_its_own_entries_on_redis(redis_url: str) -> None:
    prefix = f"quota{uuid.uuid4().hex[:8]}"
    with LayeredCache(
        path=None,
        redis_url=redis_url,
        prefix=prefix,
        embedder=HashEmbedder(),
        quotas={"noisy": 40, "quiet": 40},
    ) as cache:
        for i in range(20):
            cache.store(f"quiet question {i}?", f"q{i}", namespace="quiet")
        for i in range(300):
            cache.store(f"noisy question {i}?", f"n{i}", namespace="noisy")
        assert cache.kv_store.count("noisy") == 40
        assert cache.kv_store.count("quiet") == 20
        assert all(
            cache.lookup(f"quiet question {i}?", namespace="quiet") is not None for i in range(20)
        )
        assert cache.lookup("noisy question 299?", namespace="noisy") is not None
        assert cache.lookup("noisy question 0?", namespace="noisy") is None
        assert cache.stats().counters.get("quota_evicted") == 260
        cache.clear()
