"""The core API the adapters stand on: ``fetch`` (where a value came from) and
``default_cache`` (one shared cache per directory)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from agent_cache import ConfigurationError, Fetched, LayeredCache, default_cache
from agent_cache.testing import HashEmbedder


def _cache() -> LayeredCache:
    return LayeredCache(path=None, embedder=HashEmbedder())


def test_fetch_says_computed_then_hit() -> None:
    cache = _cache()
    first = cache.fetch("What is RAG?", lambda: "retrieval")
    assert first == Fetched("retrieval", None, computed=True)
    second = cache.fetch("What is RAG?", lambda: pytest.fail("hit expected"))
    assert second.value == "retrieval" and not second.computed
    assert second.hit is not None and second.hit.layer == "exact"


def test_fetch_coalesced_waiters_are_neither_hit_nor_computed() -> None:
    cache = _cache()
    calls = []

    def slow() -> str:
        calls.append(1)
        time.sleep(0.3)
        return "answer"

    results: list[Fetched] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.fetch("q one", slow)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sum(r.computed for r in results) == 1
    assert all(r.value == "answer" for r in results)


async def test_afetch_twin() -> None:
    cache = _cache()

    async def compute() -> str:
        return "x"

    assert (await cache.afetch("q", compute)).computed
    got = await cache.afetch("q", compute)
    assert got.hit is not None and not got.computed


def test_default_cache_one_per_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    here = default_cache(tmp_path / ".agent_cache")
    assert default_cache() is default_cache(".agent_cache") is here
    other = default_cache(tmp_path / "other")
    assert other is not default_cache()
    assert other.path == (tmp_path / "other").resolve()
    with pytest.raises(ConfigurationError):
        default_cache(42)  # type: ignore[arg-type]
