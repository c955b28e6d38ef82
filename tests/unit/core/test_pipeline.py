"""The pipeline behind ``LayeredCache``: one preparation per call, ``store_many`` doing
what ``store`` does, and flows that clean up when a task is cancelled."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_cache import LayeredCache, TtlPolicy
from agent_cache import _request as rq
from agent_cache._flow import Op, run_async, run_sync
from agent_cache._lease import Lease
from agent_cache.stores import MemoryStore
from agent_cache.testing import FakeClock, HashEmbedder


def make(**kw: Any) -> LayeredCache:
    kw.setdefault("embedder", HashEmbedder())
    kw.setdefault("clock", FakeClock())
    kw.setdefault("threshold", 0.6)
    kw.setdefault("ttl_policy", TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()))
    kw.setdefault("path", None)
    return LayeredCache(**kw)


@pytest.fixture
def preparations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prompts ``_request.prepare`` was called with (the cache calls it by module)."""
    calls: list[str] = []
    real = rq.prepare

    def counting(prompt: Any, **kw: Any) -> rq.Request:
        calls.append(prompt)
        return real(prompt, **kw)

    monkeypatch.setattr(rq, "prepare", counting)
    return calls


def test_a_miss_prepares_the_request_once(preparations: list[str]) -> None:
    cache = make()
    assert cache.get_or_compute("What is RAG?", lambda: "Retrieval.") == "Retrieval."
    assert preparations == ["What is RAG?"]  # lookup, model call and store share it
    assert cache.lookup("what is  rag?") is not None  # and the store used it


async def test_an_async_miss_prepares_the_request_once(preparations: list[str]) -> None:
    cache = make()

    async def compute() -> str:
        return "Retrieval."

    got = await cache.afetch("What is RAG?", compute)
    assert got.computed and got.value == "Retrieval."
    assert preparations == ["What is RAG?"]


def test_a_hit_prepares_the_request_once(preparations: list[str]) -> None:
    cache = make()
    cache.store("What is RAG?", "Retrieval.")
    preparations.clear()
    got = cache.fetch("What is RAG?", lambda: pytest.fail("not a miss"))
    assert got.hit is not None and preparations == ["What is RAG?"]


def test_store_many_judges_a_withheld_shadow_candidate_as_store_does() -> None:
    stored, paraphrase = "how do I reset my password", "how can I reset my password"
    single, bulk = make(shadow=True), make(shadow=True)
    for cache in (single, bulk):
        cache.store(stored, "Use the reset link.")
        assert cache.lookup(paraphrase) is None  # withheld: a shadow candidate
    single.store(paraphrase, "Use the reset link.")
    bulk.store_many([(paraphrase, "Use the reset link.")])
    assert single.stats().shadow == {"would_hit": 1, "agreed": 1}
    assert bulk.stats().shadow == single.stats().shadow


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_store_many_keeps_the_namespace_quota(backend: str, tmp_path: Path) -> None:
    kw: dict[str, Any] = (
        {"kv_store": MemoryStore(max_entries=100_000)}
        if backend == "memory"
        else {"path": tmp_path}
    )
    with make(quotas={"noisy": 10}, **kw) as cache:
        cache.store("quiet question?", "q", namespace="quiet")
        cache.store_many([(f"noisy question {i}?", f"n{i}") for i in range(100)], namespace="noisy")
        assert cache.kv_store.count("noisy") == 10
        assert cache.kv_store.count("quiet") == 1
        found = [cache.lookup(f"noisy question {i}?", namespace="noisy") for i in range(100)]
        assert sum(hit is not None for hit in found) == 10
        assert cache.stats().counters.get("quota_evicted", 0) >= 90


def test_store_many_refuses_a_zero_batch_size() -> None:
    from agent_cache.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="batch_size"):
        make().store_many([("q", "a")], batch_size=0)


async def test_a_cancelled_async_miss_releases_its_cross_process_lease(tmp_path: Path) -> None:
    cache = make(path=tmp_path)
    started = asyncio.Event()

    async def slow() -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    task = asyncio.create_task(cache.afetch("What is RAG?", slow))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    req = cache._prepare("What is RAG?", "", "default", None, "")
    from agent_cache._fetch import Compute, Plan

    key = Plan(req, Compute(slow), "", "use", None, (), None).flight_key
    other = Lease(cache.kv_store, f"flight:{key}", ttl=5.0, on_error=pytest.fail)
    assert other.acquire() is True  # the cancelled leader let go at once
    other.release()


class _Resource:
    def __init__(self) -> None:
        self.released = 0

    def release(self) -> None:
        self.released += 1

    def fail(self) -> None:
        raise KeyboardInterrupt


def test_a_flow_runs_its_cleanup_ops_whatever_an_op_raises() -> None:
    res = _Resource()

    def flow() -> Any:
        try:
            yield Op(res.fail)
        finally:
            yield Op(res.release)

    with pytest.raises(KeyboardInterrupt):
        run_sync(flow())
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run_async(flow()))
    assert res.released == 2


class _BrokenEmbedder:
    name = "broken"

    def embed(self, texts: Any) -> Any:
        raise RuntimeError("model down")


def test_a_failing_embedder_still_writes_the_exact_entry_on_sqlite(tmp_path: Path) -> None:
    """The joint SQLite write embeds first; a failed embedding keeps the exact entry
    (ported here from the adapters branch's change to cache.py's store flow)."""
    with make(path=tmp_path, embedder=_BrokenEmbedder()) as cache:
        calls: list[int] = []
        first = cache.fetch("What is RAG?", lambda: calls.append(1) or "Retrieval.")
        again = cache.fetch("what is  rag?", lambda: calls.append(1) or "Retrieval.")
        assert first.computed and again.hit is not None and again.hit.layer == "exact"
        assert len(calls) == 1
        assert cache.stats().as_dict()["errors"] >= 1
