"""Degradation: a limit on model calls, fallbacks, a negative cache, refresh-ahead."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agent_cache import LayeredCache
from agent_cache.degrade import ModelGate, Overloaded, looks_refused
from agent_cache.policy import TtlPolicy
from agent_cache.testing import FakeClock, HashEmbedder


def _slow_model(
    calls: list[str],
    peak: list[int],
    gate: threading.Lock,
    running: list[int],
    seconds: float = 0.05,
):
    def call(q: str) -> str:
        with gate:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            calls.append(q)
        time.sleep(seconds)
        with gate:
            running[0] -= 1
        return f"answer to {q}"

    return call


def test_max_model_calls_bounds_concurrency_per_process() -> None:
    cache = LayeredCache(path=None, embedder=HashEmbedder(), max_model_calls=2, model_wait=10)
    calls: list[str] = []
    peak, running, lock = [0], [0], threading.Lock()
    model = _slow_model(calls, peak, lock, running)
    threads = [
        threading.Thread(
            target=lambda i=i: cache.get_or_compute(
                f"distinct question {i}?", lambda i=i: model(str(i))
            )
        )
        for i in range(12)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 12 and peak[0] == 2


def test_a_full_queue_gets_the_fallback_or_overloaded() -> None:
    cache = LayeredCache(
        path=None,
        embedder=HashEmbedder(),
        max_model_calls=1,
        model_queue=0,
        fallbacks={"support": "We are busy, please retry."},
    )
    release = threading.Event()
    holder = threading.Thread(
        target=lambda: cache.get_or_compute("first question?", lambda: release.wait(5) and "first")
    )
    holder.start()
    time.sleep(0.1)
    try:
        assert cache.get_or_compute("other?", lambda: "x", namespace="support") == (
            "We are busy, please retry."
        )
        with pytest.raises(Overloaded, match="no model call slot"):
            cache.get_or_compute("another?", lambda: "y")
        assert cache.lookup("other?", namespace="support") is None  # a fallback is not stored
    finally:
        release.set()
        holder.join()
    assert cache.get_or_compute("another?", lambda: "y") == "y"


def test_the_gate_is_bounded_by_its_wait() -> None:
    gate = ModelGate(limit=1, queue=5, wait=0.1)
    with gate.admit() as first:
        started = time.monotonic()
        with gate.admit() as second:
            assert first and not second
        assert time.monotonic() - started < 1.0


def test_negative_cache_answers_a_junk_flood_with_one_call() -> None:
    clock = [0.0]
    cache = LayeredCache(path=None, embedder=HashEmbedder(), negative_ttl=3.0)
    cache._negative._clock = lambda: clock[0]  # type: ignore[union-attr]
    calls = []

    def model() -> str:
        calls.append(1)
        return "I'm sorry, I can't help with that."

    for _ in range(1_000):
        assert cache.get_or_compute("asdfgh qwerty?", model).startswith("I'm sorry")
    assert len(calls) == 1
    clock[0] = 3.5  # a few seconds later the prompt is asked again
    cache.get_or_compute("asdfgh qwerty?", model)
    assert len(calls) == 2
    empty: list[int] = []
    off = LayeredCache(path=None, embedder=HashEmbedder())  # opt-in: empty answers repeat
    for _ in range(3):
        off.get_or_compute("asdfgh qwerty?", lambda: empty.append(1) or "")
    assert len(empty) == 3
    assert looks_refused("") and looks_refused({"error": "x"}) and not looks_refused("Paris")


def test_refresh_ahead_serves_the_stored_answer_and_refreshes_once() -> None:
    clock = FakeClock()
    cache = LayeredCache(
        path=None,
        embedder=HashEmbedder(),
        clock=clock,
        refresh_ahead=10,
        ttl_policy=TtlPolicy(jitter=0.0),
    )
    cache.get_or_compute("hot question?", lambda: "v1", ttl=100)
    clock.advance(95)  # 5 s left: inside the refresh window
    calls: list[int] = []
    gate = threading.Event()

    def model() -> str:
        calls.append(1)
        gate.wait(5)
        return "v2"

    for _ in range(50):  # every caller is served the stored answer at once
        assert cache.get_or_compute("hot question?", model, ttl=100) == "v1"
    gate.set()
    deadline = time.monotonic() + 5
    while cache.lookup("hot question?").response != "v2":  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert len(calls) == 1
    hit = cache.lookup("hot question?")
    assert hit is not None and hit.expires_at is not None and hit.expires_at > clock() + 50


async def test_async_refresh_ahead_and_limit() -> None:
    clock = FakeClock()
    cache = LayeredCache(
        path=None,
        embedder=HashEmbedder(),
        clock=clock,
        refresh_ahead=10,
        ttl_policy=TtlPolicy(jitter=0.0),
        max_model_calls=1,
    )

    async def v(x: str) -> str:
        await asyncio.sleep(0.01)
        return x

    await cache.aget_or_compute("hot?", lambda: v("v1"), ttl=100)
    clock.advance(95)
    assert await cache.aget_or_compute("hot?", lambda: v("v2"), ttl=100) == "v1"
    for _ in range(100):
        await asyncio.sleep(0.01)
        hit = await cache.alookup("hot?")
        if hit is not None and hit.response == "v2":
            break
    else:
        raise AssertionError("not refreshed")
