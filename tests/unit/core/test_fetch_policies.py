"""``fetch`` under ``refresh`` and ``bypass`` on a store shared across processes.

On SQLite (or Redis) the leader of a miss takes a lease and re-checks the store for an
answer another process may just have written; under ``refresh`` and ``bypass`` that
re-check found the very entry the request meant to skip and served it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder


def counter() -> tuple[list[int], object]:
    calls = [0]

    def compute() -> str:
        calls[0] += 1
        return f"answer {calls[0]}"

    return calls, compute


@pytest.mark.parametrize("policy", ["refresh", "bypass"])
def test_policy_skipping_the_read_calls_the_model(tmp_path: Path, policy: str) -> None:
    cache = LayeredCache(path=tmp_path / "c", embedder=HashEmbedder(dim=64))
    calls, compute = counter()
    assert cache.fetch("What is RAG?", compute).value == "answer 1"  # type: ignore[arg-type]
    got = cache.fetch("What is RAG?", compute, policy=policy)  # type: ignore[arg-type]
    assert (got.value, got.computed, got.hit, calls[0]) == ("answer 2", True, None, 2)
    kept = "answer 2" if policy == "refresh" else "answer 1"
    assert cache.fetch("What is RAG?", compute).value == kept  # type: ignore[arg-type]


async def test_async_refresh_calls_the_model(tmp_path: Path) -> None:
    cache = LayeredCache(path=tmp_path / "c", embedder=HashEmbedder(dim=64))
    calls = [0]

    async def compute() -> str:
        calls[0] += 1
        return f"answer {calls[0]}"

    await cache.afetch("What is RAG?", compute)
    got = await cache.afetch("What is RAG?", compute, policy="refresh")
    assert (got.value, calls[0]) == ("answer 2", 2)


def test_bypass_requests_are_not_coalesced(tmp_path: Path) -> None:
    """``bypass`` is the request as if there were no cache: concurrent ones each get the
    model's own answer (sampled calls keep their diversity)."""
    cache = LayeredCache(path=tmp_path / "c", embedder=HashEmbedder(dim=64))
    calls = [0]

    async def compute() -> str:
        calls[0] += 1
        n = calls[0]
        await asyncio.sleep(0.05)
        return f"answer {n}"

    async def three() -> list[str]:
        got = await asyncio.gather(
            *(cache.afetch("a poem", compute, policy="bypass") for _ in range(3))
        )
        return sorted(g.value for g in got)

    assert asyncio.run(three()) == ["answer 1", "answer 2", "answer 3"]
    assert cache.stats().stores == 0
