"""Hits you can trust: tool keys, feedback, explain, and the online error bound."""

from __future__ import annotations

import random
from typing import Any

import pytest

from agent_cache import LayeredCache, StepCache, ToolCache, TtlPolicy
from agent_cache.errorbound import ErrorBound, wilson_lower, wilson_upper
from agent_cache.semantic import EQUIVALENT_FLOOR
from agent_cache.stores import MemoryStore
from agent_cache.testing import FakeClock, HashEmbedder


def make(**kw: Any) -> LayeredCache:
    kw.setdefault("embedder", HashEmbedder())
    kw.setdefault("clock", FakeClock())
    kw.setdefault("threshold", 0.6)
    kw.setdefault("ttl_policy", TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()))
    return LayeredCache(path=None, **kw)


# ---------------------------------------------------------------- tool and step keys
def test_tool_arguments_are_data_never_case_folded() -> None:
    calls: list[str] = []

    def read_file(path: str) -> str:
        calls.append(path)
        return f"contents of {path}"

    tools = ToolCache(make())
    assert tools.call("read_file", {"path": "/data/Report.txt"}, read_file) == (
        "contents of /data/Report.txt"
    )
    assert tools.call("read_file", {"path": "/data/report.txt"}, read_file) == (
        "contents of /data/report.txt"
    )
    assert calls == ["/data/Report.txt", "/data/report.txt"]


def test_coupon_codes_and_whitespace_in_arguments_keep_their_identity() -> None:
    seen: list[str] = []

    def check(code: str) -> str:
        seen.append(code)
        return f"valid:{code}"

    tools = ToolCache(make())
    for code in ("AbC9x", "abc9X", "AbC9x", "a  b", "a b"):
        tools.call("coupon", {"code": code}, check)
    assert seen == ["AbC9x", "abc9X", "a  b", "a b"]  # the repeat of AbC9x was a hit


def test_tool_key_order_still_does_not_matter_and_opt_in_normalization() -> None:
    n = 0

    def add(a: int, b: int) -> int:
        nonlocal n
        n += 1
        return a + b

    tools = ToolCache(make())
    tools.call("add", {"a": 1, "b": 2}, add)
    tools.call("add", {"b": 2, "a": 1.0}, add)
    assert n == 1
    folded = ToolCache(make(), normalize_args=True)
    folded.call("city", {"q": "Oslo"}, lambda q: q)
    assert folded.call("city", {"q": "OSLO"}, lambda q: "second") == "Oslo"


def test_steps_are_keyed_verbatim() -> None:
    steps = StepCache(make())
    assert steps.run("plan", "Deploy to PROD", lambda v: f"plan for {v}") == (
        "plan for Deploy to PROD"
    )
    assert steps.run("plan", "deploy to prod", lambda v: f"plan for {v}") == (
        "plan for deploy to prod"
    )


# ---------------------------------------------------------------- feedback
def test_wrong_feedback_evicts_the_entry_from_every_layer_without_a_bound() -> None:
    cache = make()
    cache.store("how do I reset my account password", "Use the reset link.", namespace="faq")
    hit = cache.lookup("how can I reset my password for my account", namespace="faq")
    assert hit is not None and hit.layer == "semantic" and hit.namespace == "faq"
    cache.feedback(hit, correct=False)
    assert cache.lookup("how can I reset my password for my account", namespace="faq") is None
    assert cache.lookup("how do I reset my account password", namespace="faq") is None
    assert cache.vector_store.count() == 0
    stats = cache.stats()
    assert stats.feedback == {"wrong": 1} and stats.evicted == 1
    judged, wrong = cache._bound.counts("faq")
    assert sum(judged) == 1 and sum(wrong) == 1  # recorded for calibration anyway


def test_right_feedback_keeps_the_entry() -> None:
    cache = make()
    cache.store("how do I reset my account password", "x")
    hit = cache.lookup("how can I reset my password for my account")
    assert hit is not None
    cache.feedback(hit, correct=True)
    assert cache.lookup("how can I reset my password for my account") is not None


async def test_async_feedback_evicts_too() -> None:
    cache = make()
    await cache.astore("how do I reset my account password", "x")
    hit = await cache.alookup("how do I reset my account password")
    assert hit is not None and hit.layer == "exact" and hit.namespace == "default"
    await cache.afeedback(hit, correct=False)
    assert await cache.alookup("how do I reset my account password") is None


# ---------------------------------------------------------------- decisions and explain
def test_refusals_are_counted_by_reason_and_explained() -> None:
    cache = make(threshold=0.3)
    cache.store("How do I sort a list in ascending order?", "sorted(xs)")
    assert cache.lookup("How do I sort a list in descending order?") is None
    assert cache.stats().refused == {"opposites": 1}
    why = cache.explain("How do I sort a list in descending order?")
    assert why.served is None and why.verdicts[0].reason == "opposites"
    assert "opposites" in str(why) and "ascending" in str(why)
    pair = cache.explain(
        "How do I sort a list in descending order?",
        "How do I sort a list in descending order, please?",
    )
    assert pair.served is not None


def test_equivalent_questions_are_served_from_the_floor() -> None:
    cache = make(threshold=0.99)
    cache.store("How do I sort a list in descending order?", "sorted(xs, reverse=True)")
    # a word written short ("lst"): the search embeds it as written (a misspelled word
    # like "decending" is respelled for the search, so it scores 1.0, not from the floor)
    hit = cache.lookup("How do I sort a lst in descending order?")
    assert hit is not None and hit.similarity is not None
    assert EQUIVALENT_FLOOR <= hit.similarity < 0.99


def test_shadow_judges_by_meaning_not_by_string_equality() -> None:
    class TopicEmbedder(HashEmbedder):
        """Answers about the reset link land together, whatever their wording."""

        def embed(self, texts: Any) -> Any:
            return super().embed(["reset link" if "link" in t else t for t in texts])

    cache = make(shadow=True, embedder=TopicEmbedder())
    cache.store("how do I reset my account password", "Use the reset link.")
    assert cache.lookup("how can I reset my password for my account") is None
    cache.store(
        "how can I reset my password for my account", "Click the link we email you to reset it."
    )
    assert cache.stats().shadow == {"would_hit": 1, "agreed": 1}


# ---------------------------------------------------------------- the error bound
def test_wilson_bounds() -> None:
    assert wilson_upper(0, 0) == 1.0 and wilson_lower(0, 0) == 0.0
    assert wilson_upper(5, 100) > 0.05 > wilson_lower(95, 100) - 0.95
    assert wilson_lower(90, 100) < 0.9 < 1 - wilson_upper(10, 100) + 0.2


def _replay(seed: int) -> tuple[list[float], list[float], list[float]]:
    """A stream whose wrong-hit rate starts near 15 % and whose traffic then gets easier."""
    rng = random.Random(seed)
    clock = [0.0]
    bound = ErrorBound(0.05, MemoryStore(), base=lambda ns: 0.80, clock=lambda: clock[0])
    rates: list[float] = []
    hits: list[float] = []
    thresholds: list[float] = []
    window: list[bool | None] = []
    for i in range(16_000):
        hard = i < 6_000
        s = rng.uniform(0.80, 1.0)
        wrong = rng.random() < (0.30 if hard else 0.06) * (1.0 - s) / 0.2
        t = bound.threshold("ns")
        served: bool | None = None
        if s >= t:
            if rng.random() < 0.10:  # audited: withheld, judged against the fresh answer
                bound.record("ns", s, wrong=wrong)
            else:
                served = wrong
        elif s >= bound.lowest and rng.random() < 0.20:  # explored below the threshold
            bound.record("ns", s, wrong=wrong)
        window.append(served)
        clock[0] += 1.0
        if i % 2000 == 1999:
            w = [x for x in window[-2000:] if x is not None]
            rates.append(sum(w) / max(1, len(w)))
            hits.append(len(w) / 2000)
            thresholds.append(t)
    return rates, hits, thresholds


@pytest.mark.parametrize("seed", range(8))
def test_error_bound_brings_the_wrong_hit_rate_under_the_bound_and_back(seed: int) -> None:
    rates, hits, thresholds = _replay(seed)
    # windows of 2,000 requests: the first holds the start at ~15 % wrong
    assert rates[0] > 0.06
    assert all(r <= 0.05 for r in rates[1:]), rates  # after ~300 judgments it holds
    assert thresholds[2] > 0.9  # tightened on hard traffic
    assert min(thresholds[3:]) < thresholds[2]  # and loosened on easy traffic:
    assert sum(hits[-2:]) / 2 > 1.5 * sum(hits[1:3]) / 2, hits  # the hit rate recovers


def test_error_bound_is_shared_through_the_store() -> None:
    store = MemoryStore()
    a = ErrorBound(0.05, store, base=lambda ns: 0.8, refresh_s=0.0)
    b = ErrorBound(0.05, store, base=lambda ns: 0.8, refresh_s=0.0)
    for _ in range(60):
        a.record("faq", 0.95, wrong=False)
        a.record("faq", 0.85, wrong=True)
    assert b.threshold("faq") == pytest.approx(0.95)  # another process sees the evidence
    assert b.threshold("other") == pytest.approx(0.8)  # a wall between namespaces


def test_max_error_rate_through_the_cache_withholds_and_judges() -> None:
    cache = make(max_error_rate=0.05, audit_rate=1.0)
    cache.store("how do I reset my account password", "Use the reset link.")
    assert cache.lookup("how can I reset my password for my account") is None  # audited
    cache.store("how can I reset my password for my account", "Use the reset link.")
    stats = cache.stats()
    assert stats.shadow == {"audit_agreed": 1} and stats.audited == 1
    estimate = cache.error_estimate("default")
    assert estimate["judged"] == 1 and estimate["wrong"] == 0
