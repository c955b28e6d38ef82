"""LayeredCache behaviour on in-memory backends, a fake clock and a deterministic embedder."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from agent_cache import (
    CacheHit,
    ConfigurationError,
    LayeredCache,
    SerializationError,
    TtlPolicy,
    TtlTier,
)
from agent_cache.errors import BackendError
from agent_cache.stores import MemoryStore
from agent_cache.testing import FakeClock, HashEmbedder
from agent_cache.vectors import MemoryVectorStore


class CountingEmbedder:
    name = "counting"

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return self.inner.embed(texts)


class FixedReranker:
    def __init__(self, score: float) -> None:
        self.value = score
        self.calls = 0

    def score(self, query: str, candidates: Sequence[str]) -> list[float]:
        self.calls += 1
        return [self.value] * len(candidates)


def make(**kw: Any) -> LayeredCache:
    kw.setdefault("embedder", CountingEmbedder())
    kw.setdefault("clock", FakeClock())
    kw.setdefault("threshold", 0.6)
    kw.setdefault("ttl_policy", TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()))
    return LayeredCache(path=None, **kw)


# ---------------------------------------------------------------- exact layer
def test_exact_hit_after_normalization_without_embedding() -> None:
    emb = CountingEmbedder()
    cache = make(embedder=emb)
    cache.store("What is  RAG?", {"text": "Retrieval-augmented generation"})
    calls_after_store = emb.calls
    hit = cache.lookup("  what is rag? ")
    assert isinstance(hit, CacheHit)
    assert hit.layer == "exact" and hit.score is None
    assert hit.response == {"text": "Retrieval-augmented generation"}
    assert hit.matched_prompt == "What is  RAG?"
    assert emb.calls == calls_after_store  # never embed what the exact layer answers


def test_model_identity_namespace_context_and_template_version_scope_the_key() -> None:
    cache = make(threshold=1.0)
    cache.store("q", "a", llm_string="model-a", context="docs 1")
    assert cache.lookup("q", llm_string="model-a", context="docs 1") is not None
    assert cache.lookup("q", llm_string="model-b", context="docs 1") is None
    assert cache.lookup("q", llm_string="model-a", context="docs 2") is None
    assert cache.lookup("q", llm_string="model-a", namespace="other", context="docs 1") is None
    assert cache.lookup("q", llm_string="model-a", context="docs 1", template_version="v2") is None


def test_code_namespace_is_case_sensitive() -> None:
    cache = make(threshold=1.0)
    cache.store("print(X)", "upper", namespace="code")
    assert cache.lookup("print(x)", namespace="code") is None
    assert cache.lookup("print(X)", namespace="code") is not None


def test_templates_share_answers_only_for_equal_parameters() -> None:
    emb = CountingEmbedder()
    cache = make(
        embedder=emb, templates={"order": ["status of order {id}", "where is my order {id}"]}
    )
    cache.store("Status of order 12345", "shipped")
    hit = cache.lookup("where is my order 12345?")
    assert hit is not None and hit.layer == "template" and hit.response == "shipped"
    assert cache.lookup("status of order 12346") is None
    assert emb.calls == 0  # templated prompts never reach the semantic layer


# ---------------------------------------------------------------- semantic layer
def test_semantic_hit_for_a_paraphrase() -> None:
    cache = make()
    cache.store("how do I reset my account password", "Use the reset link.")
    hit = cache.lookup("how can I reset my password for my account")
    assert hit is not None and hit.layer == "semantic"
    assert hit.score is not None and 0.6 <= hit.score <= 1.0
    assert hit.response == "Use the reset link."


def test_threshold_is_per_namespace_and_validated() -> None:
    cache = make(thresholds={"strict": 0.99})
    cache.store("how do I reset my account password", "x", namespace="strict")
    assert cache.lookup("how can I reset my password for my account", namespace="strict") is None
    assert cache.threshold_for("strict") == 0.99 and cache.threshold_for("default") == 0.6
    for bad in (1.5, -0.1, "0.9", True):
        with pytest.raises(ConfigurationError):
            make(threshold=bad)


def test_guards_refuse_different_numbers_and_negation() -> None:
    cache = make(threshold=0.5)
    cache.store("what is the refund for order 12345", "refund A")
    assert cache.lookup("what is the refund for order 12346") is None
    cache.store("can I cancel my subscription online", "yes")
    assert cache.lookup("can't I cancel my subscription online") is None
    refused = cache.stats().refused
    assert refused.get("numbers", 0) >= 1 and refused.get("negation", 0) >= 1


def test_conversation_context_scopes_the_semantic_search() -> None:
    cache = make()
    cache.store("what about its population?", "2.1 million", context=["user: tell me about Paris"])
    assert cache.lookup("what about its population?", context=["user: tell me about Tokyo"]) is None
    assert (
        cache.lookup("what about the population?", context=["user: tell me about Paris"])
        is not None
    )


def test_reranker_verifies_candidates() -> None:
    no = FixedReranker(0.1)
    cache = make(reranker=no)
    cache.store("how do I reset my account password", "x")
    assert cache.lookup("how can I reset my password for my account") is None
    assert no.calls == 1 and cache.stats().refused["verifier"] == 1
    yes = FixedReranker(0.9)
    cache2 = make(reranker=yes)
    cache2.store("how do I reset my account password", "x")
    hit = cache2.lookup("how can I reset my password for my account")
    assert hit is not None and hit.score == pytest.approx(0.9)


def test_exact_only_namespace_never_embeds() -> None:
    emb = CountingEmbedder()
    cache = make(embedder=emb)
    cache.store('{"city":"Oslo"}', "rain", namespace="tools")
    assert cache.lookup('{"city":"Oslo "}', namespace="tools") is None
    assert emb.calls == 0


# ---------------------------------------------------------------- policy
def test_ttl_expires_on_the_fake_clock() -> None:
    clock = FakeClock()
    cache = make(clock=clock)
    cache.store("static question", "a")
    cache.store("short lived", "b", ttl=10)
    clock.advance(11)
    assert cache.lookup("short lived") is None
    assert cache.lookup("static question") is not None
    clock.advance(3600)
    assert cache.lookup("static question") is None
    # the semantic copy expires with the entry
    assert cache.lookup("a static question") is None


def test_realtime_tier_chosen_by_rule() -> None:
    clock = FakeClock()
    policy = TtlPolicy(
        default_ttl=86400, jitter=0.0, tiers=(TtlTier("realtime", 30, (r"\bweather\b",)),)
    )
    cache = make(clock=clock, ttl_policy=policy)
    cache.store("weather in Oslo", "rain")
    cache.store("capital of Norway", "Oslo")
    clock.advance(31)
    assert cache.lookup("weather in Oslo") is None
    assert cache.lookup("capital of Norway") is not None


def test_errors_and_empty_answers_are_never_stored() -> None:
    cache = make()
    for value in ("", "   ", None, {"error": "rate limited"}, {"text": ""}):
        cache.store("q", value)
        assert cache.lookup("q") is None
    assert cache.stats().skipped_stores == 5


def test_cache_policies_use_bypass_no_store_refresh() -> None:
    cache = make()
    calls: list[int] = []

    def compute() -> str:
        calls.append(1)
        return f"v{len(calls)}"

    assert cache.get_or_compute("q", compute) == "v1"
    assert cache.get_or_compute("q", compute) == "v1"  # use
    # bypass: neither read nor write (as agent_cache.policy documents it for the adapters)
    assert cache.get_or_compute("q", compute, policy="bypass") == "v2"
    assert cache.lookup("q").response == "v1"  # type: ignore[union-attr]
    assert cache.fetch("q3", compute, policy="bypass").computed
    assert cache.lookup("q3") is None
    assert cache.get_or_compute("q2", compute, policy="no_store") == "v4"
    assert cache.lookup("q2") is None
    assert cache.get_or_compute("q", compute, policy="refresh") == "v5"
    assert cache.lookup("q").response == "v5"  # type: ignore[union-attr]
    assert cache.lookup("q", policy="bypass") is None
    with pytest.raises(ConfigurationError):
        cache.lookup("q", policy="sometimes")  # type: ignore[arg-type]


def test_tag_invalidation_in_paced_batches() -> None:
    sleeps: list[float] = []
    cache = make(sleep=sleeps.append)
    for i in range(25):
        cache.store(f"question number {i}", f"a{i}", tags=["doc:42"] if i % 2 else ["doc:7"])
    removed = cache.invalidate(tags=["doc:42"], batch_size=5, pause=0.01)
    assert removed == 12
    assert sleeps == [0.01] * 3  # 12 keys in batches of 5 -> 3 batches
    assert cache.lookup("question number 1") is None
    assert cache.lookup("question number 2") is not None
    assert cache.invalidate(tags=["doc:42"]) == 0
    with pytest.raises(ConfigurationError):
        cache.invalidate(tags="doc:7")


def test_bump_version_invalidates_a_namespace_in_o1() -> None:
    cache = make()
    cache.store("how do I reset my account password", "old", namespace="faq")
    cache.store("other namespace", "kept")
    assert cache.bump_version("faq") == 1
    assert cache.lookup("how do I reset my account password", namespace="faq") is None
    assert cache.lookup("how can I reset my password for my account", namespace="faq") is None
    assert cache.lookup("other namespace") is not None


def test_clear_one_namespace_or_all() -> None:
    cache = make()
    cache.store("a question", "1", namespace="x")
    cache.store("b question", "2", namespace="y")
    cache.clear("x")
    assert cache.lookup("a question", namespace="x") is None
    assert cache.lookup("b question", namespace="y") is not None
    cache.clear()
    assert cache.lookup("b question", namespace="y") is None


# ---------------------------------------------------------------- bad input
def test_bad_input_raises_clear_errors_and_leaves_cache_intact() -> None:
    cache = make()
    cache.store("good", {"text": "kept"})
    with pytest.raises(SerializationError):
        cache.store("q", {"obj": object()})
    with pytest.raises(SerializationError):
        cache.store("q", float("nan"))
    for bad in (None, b"bytes", "x" * 2_000_000, "bad \ud800"):
        with pytest.raises(ConfigurationError):
            cache.store(bad, "v")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            cache.lookup(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        cache.store("q", "v", tags=[""])
    with pytest.raises(ConfigurationError):
        cache.store("q", "v", ttl=-5)
    assert cache.lookup("q") is None
    assert cache.lookup("good").response == {"text": "kept"}  # type: ignore[union-attr]


class BrokenStore(MemoryStore):
    def get(self, key: str, now: float) -> str | None:
        raise BackendError("redis down", layer="exact", key=key)

    def set(self, *a: Any, **kw: Any) -> None:
        raise ConnectionError("refused")


def test_store_failure_is_a_logged_miss(caplog: pytest.LogCaptureFixture) -> None:
    cache = make(kv_store=BrokenStore())
    assert cache.lookup("q") is None
    cache.store("q", "v")  # does not raise
    assert cache.get_or_compute("q", lambda: "computed") == "computed"
    assert cache.stats().errors >= 3
    assert "serving as a miss" in caplog.text


def test_corrupt_record_is_a_miss() -> None:
    kv = MemoryStore()
    cache = make(kv_store=kv)
    key = cache.store("q", "v")
    kv.set(key, "not json", namespace="default", expires_at=None, now=0.0)
    assert cache.lookup("q") is None and cache.stats().errors == 1


# ---------------------------------------------------------------- single-flight
def test_concurrent_identical_misses_make_one_call() -> None:
    cache = make()
    calls: list[int] = []
    started = threading.Event()

    def slow() -> str:
        calls.append(1)
        started.set()
        time.sleep(0.3)
        return "answer"

    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get_or_compute("q", slow)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["answer"] * 8
    assert len(calls) == 1


def test_waiters_wait_past_the_timeout_for_a_live_leader() -> None:
    """Issue 19 point 9: a slow leader is waited for (no second call); only a dead one
    is given up on (tests/unit/core/test_slow_leader.py)."""
    cache = make(singleflight_timeout=0.05)
    calls: list[str] = []
    gate = threading.Event()

    def leader() -> str:
        calls.append("leader")
        gate.wait(2)
        return "slow"

    t = threading.Thread(target=lambda: cache.get_or_compute("q", leader))
    t.start()
    time.sleep(0.05)
    threading.Timer(0.5, gate.set).start()  # ten timeouts later
    assert cache.get_or_compute("q", lambda: calls.append("waiter") or "fast") == "slow"
    t.join()
    assert calls == ["leader"]


def test_leader_error_reaches_waiters_and_is_not_cached() -> None:
    cache = make()

    def boom() -> str:
        time.sleep(0.1)
        raise RuntimeError("model down")

    errors: list[BaseException] = []

    def call() -> None:
        try:
            cache.get_or_compute("q", boom)
        except RuntimeError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 4
    assert cache.lookup("q") is None


async def test_async_single_flight_and_twins() -> None:
    cache = make()
    calls: list[int] = []

    async def compute() -> dict[str, str]:
        calls.append(1)
        await asyncio.sleep(0.1)
        return {"text": "async answer"}

    results = await asyncio.gather(*[cache.aget_or_compute("aq", compute) for _ in range(6)])
    assert all(r == {"text": "async answer"} for r in results) and len(calls) == 1
    hit = await cache.alookup("AQ")
    assert hit is not None and hit.layer == "exact"
    await cache.astore("how do I reset my account password", "x", tags=["t"])
    sem = await cache.alookup("how can I reset my password for my account")
    assert sem is not None and sem.layer == "semantic"
    assert await cache.ainvalidate(tags=["t"]) == 1
    assert await cache.alookup("how do I reset my account password") is None
    await cache.abump_version()
    assert await cache.alookup("AQ") is None
    await cache.aclear()


# ---------------------------------------------------------------- measurement
def test_stats_count_layers_tokens_and_render() -> None:
    cache = make(templates={"order": "status of order {id}"})
    cache.store("what is rag", "retrieval augmented generation", tokens=50)
    cache.store("status of order 1", "shipped")
    cache.store("how do I reset my account password", "link")
    cache.lookup("what is rag")
    cache.lookup("status of order 1")
    cache.lookup("how can I reset my password for my account")
    cache.lookup("totally unrelated cooking question")
    st = cache.stats()
    assert st.hits == {"exact": 1, "template": 1, "semantic": 1}
    assert st.misses == 1 and st.lookups == 4 and st.stores == 3
    assert st.tokens_saved >= 50 + 2
    assert st.latency_ms["exact"]["p50"] is not None
    assert "<table>" in st._repr_html_() and "hits: semantic" in str(st)
    json.dumps(st.as_dict())
    cache.record_model_usage(1000, 800)
    assert cache.stats().kv_hit_rate == pytest.approx(0.8)


def test_control_group_skips_the_cache() -> None:
    cache = make(bypass_rate=1.0)
    cache.store("q", "v")
    assert cache.lookup("q") is None
    assert cache.stats().control == 1
    with pytest.raises(ConfigurationError):
        make(bypass_rate=2.0)


def test_shadow_mode_records_but_never_serves_semantic_hits() -> None:
    cache = make(shadow=True)
    cache.store("how do I reset my account password", "Use the reset link.")
    assert cache.lookup("how do I reset my account password") is not None  # exact still served
    assert cache.lookup("how can I reset my password for my account") is None
    cache.store("how can I reset my password for my account", "Use the reset link.")
    cache.store("how do I reset my account password please", "x")
    assert cache.lookup("how can I reset my account password please") is None
    cache.store("how can I reset my account password please", "something else")
    shadow = cache.stats().shadow
    assert shadow == {"would_hit": 2, "agreed": 1, "disagreed": 1}


def test_max_error_rate_raises_the_threshold_past_wrong_evidence() -> None:
    cache = make(max_error_rate=0.1, audit_rate=0.0)
    cache.store("how do I reset my account password", "x")
    hit = cache.lookup("how can I reset my password for my account")
    assert hit is not None and hit.similarity is not None
    for _ in range(40):  # judged wrong 40 times (feedback re-adds nothing: it evicts)
        cache._bound.record("default", hit.similarity, wrong=True)
    assert cache.threshold_for("default") > hit.similarity
    cache.store("how do I reset my account password", "x")
    assert cache.lookup("how can I reset my password for my account") is None


def test_store_many_embeds_in_batches() -> None:
    emb = CountingEmbedder()
    cache = make(embedder=emb)
    keys = cache.store_many(
        [(f"question {i} about topic {i}", f"a{i}") for i in range(10)], batch_size=4
    )
    assert len(keys) == 10 and emb.calls == 3
    assert cache.lookup("question 3 about topic 3").response == "a3"  # type: ignore[union-attr]


def test_backends_are_lazy_and_injected_ones_are_not_closed() -> None:
    class Tracking(MemoryVectorStore):
        closed = False

        def close(self) -> None:
            self.closed = True

    vs = Tracking()
    cache = make(vector_store=vs)
    assert cache._backends._kv is None  # no I/O in the constructor
    cache.store("q", "v")
    cache.close()
    assert not vs.closed
