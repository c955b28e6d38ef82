"""Per-tenant quotas: one tenant's traffic never evicts another's entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.errors import ConfigurationError
from agent_cache.stores import MemoryStore
from agent_cache.testing import HashEmbedder


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_noisy_tenant_evicts_only_its_own_entries(backend: str, tmp_path: Path) -> None:
    kw = (
        {"path": None, "kv_store": MemoryStore(max_entries=100_000)}
        if backend == "memory"
        else {"path": tmp_path}
    )
    with LayeredCache(embedder=HashEmbedder(), quotas={"noisy": 100, "quiet": 100}, **kw) as cache:  # type: ignore[arg-type]
        for i in range(50):
            cache.store(f"quiet question {i}?", f"q{i}", namespace="quiet")
        for i in range(1_000):
            cache.store(f"noisy question {i}?", f"n{i}", namespace="noisy")
        assert cache.kv_store.count("noisy") == 100
        assert cache.kv_store.count("quiet") == 50
        assert all(
            cache.lookup(f"quiet question {i}?", namespace="quiet") is not None for i in range(50)
        )
        assert cache.lookup("noisy question 999?", namespace="noisy") is not None
        assert cache.lookup("noisy question 0?", namespace="noisy") is None
        assert cache.vector_store.count() <= 150 + 16


def test_quotas_are_validated() -> None:
    with pytest.raises(ConfigurationError, match="quotas"):
        LayeredCache(path=None, quotas={"a": 0})
