"""``encode``/``decode`` on ``get_or_compute``/``fetch`` (and the async twins): the one
core API the adapters stand on. The caller's objects go in and come out; only JSON
payloads are stored; ``NOT_STORED`` means "return it, don't store it"."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

import agent_cache
from agent_cache import NOT_STORED, ConfigurationError, LayeredCache
from agent_cache.testing import HashEmbedder


@dataclass
class Answer:
    """A framework object: not JSON, rebuilt by ``decode``."""

    text: str
    ok: bool = True


def encode(answer: Answer) -> Any:
    return {"text": answer.text} if answer.ok else NOT_STORED


def decode(payload: Any) -> Answer:
    if not isinstance(payload, dict) or "text" not in payload:
        raise ValueError(f"not an Answer payload: {payload!r}")
    return Answer(payload["text"])


def _cache() -> LayeredCache:
    return LayeredCache(path=None, embedder=HashEmbedder())


def _counters(cache: LayeredCache) -> dict[str, int]:
    return cache.stats().counters


def test_not_stored_is_public_and_named() -> None:
    assert agent_cache.NOT_STORED is NOT_STORED
    assert repr(NOT_STORED) == "agent_cache.NOT_STORED"


# ---------------------------------------------------------------- round trip
def test_miss_returns_the_object_stores_the_payload_hit_decodes() -> None:
    cache = _cache()
    made = Answer("retrieval")
    got = cache.fetch("What is RAG?", lambda: made, encode=encode, decode=decode)
    assert got.computed and got.value is made  # the caller's object, as is
    stored = cache.lookup("What is RAG?")
    assert stored is not None and stored.response == {"text": "retrieval"}
    again = cache.fetch(
        "What is RAG?", lambda: pytest.fail("hit expected"), encode=encode, decode=decode
    )
    assert again.hit is not None and again.hit.response == {"text": "retrieval"}
    assert isinstance(again.value, Answer) and again.value == made and again.value is not made
    value = cache.get_or_compute(
        "What is RAG?", lambda: pytest.fail("hit expected"), encode=encode, decode=decode
    )
    assert value == Answer("retrieval")


async def test_async_round_trip() -> None:
    cache = _cache()
    made = Answer("retrieval")

    async def compute() -> Answer:
        return made

    got = await cache.afetch("What is RAG?", compute, encode=encode, decode=decode)
    assert got.computed and got.value is made
    again = await cache.afetch("What is RAG?", compute, encode=encode, decode=decode)
    assert again.hit is not None and again.hit.response == {"text": "retrieval"}
    assert again.value == made and again.value is not made
    assert await cache.aget_or_compute("What is RAG?", compute, decode=decode) == made


# ---------------------------------------------------------------- NOT_STORED
def test_not_stored_is_returned_but_never_stored() -> None:
    cache = _cache()
    calls: list[int] = []

    def compute() -> Answer:
        calls.append(1)
        return Answer("tool failed", ok=False)

    for _ in range(2):
        value = cache.get_or_compute("q", compute, encode=encode, decode=decode)
        assert value == Answer("tool failed", ok=False)
    assert len(calls) == 2  # nothing was stored, so the second call computed again
    assert cache.lookup("q") is None
    stats = cache.stats()
    assert stats.not_stored == 2 and stats.counters["not_stored"] == 2
    assert stats.stores == 0


async def test_async_not_stored() -> None:
    cache = _cache()

    async def compute() -> Answer:
        return Answer("", ok=False)

    got = await cache.afetch("q", compute, encode=encode, decode=decode)
    assert got.computed and got.value == Answer("", ok=False)
    assert await cache.alookup("q") is None
    assert cache.stats().not_stored == 1


# ---------------------------------------------------------------- a decode that raises
def test_undecodable_entry_is_counted_evicted_and_recomputed() -> None:
    cache = _cache()
    cache.store("q", "written by someone else")  # a payload this decode rejects
    got = cache.fetch("q", lambda: Answer("fresh"), encode=encode, decode=decode)
    assert got.computed and got.value == Answer("fresh")  # never raised to the caller
    counters = _counters(cache)
    assert counters["decode_errors"] == 1
    assert cache.stats().evicted == 1
    stored = cache.lookup("q")  # the old entry is gone, the fresh answer stored instead
    assert stored is not None and stored.response == {"text": "fresh"}


def test_undecodable_entry_without_a_fresh_store_stays_evicted() -> None:
    cache = _cache()
    cache.store("q", ["not", "an", "answer"])
    value = cache.get_or_compute("q", lambda: Answer("x", ok=False), encode=encode, decode=decode)
    assert value == Answer("x", ok=False)
    assert cache.lookup("q") is None  # evicted, and NOT_STORED wrote nothing back


async def test_async_undecodable_entry() -> None:
    cache = _cache()
    await cache.astore("q", 42)

    async def compute() -> Answer:
        return Answer("fresh")

    value = await cache.aget_or_compute("q", compute, encode=encode, decode=decode)
    assert value == Answer("fresh")
    assert _counters(cache)["decode_errors"] == 1
    hit = await cache.alookup("q")
    assert hit is not None and hit.response == {"text": "fresh"}


# ---------------------------------------------------------------- an encode that raises
def _broken_encode(answer: Answer) -> Any:
    raise RuntimeError("cannot serialize")


def test_encode_that_raises_keeps_the_paid_answer() -> None:
    cache = _cache()
    made = Answer("paid for")
    got = cache.fetch("q", lambda: made, encode=_broken_encode, decode=decode)
    assert got.computed and got.value is made
    assert _counters(cache)["encode_errors"] == 1
    assert cache.lookup("q") is None


async def test_async_encode_that_raises() -> None:
    cache = _cache()
    made = Answer("paid for")

    async def compute() -> Answer:
        return made

    assert await cache.aget_or_compute("q", compute, encode=_broken_encode) is made
    assert _counters(cache)["encode_errors"] == 1
    assert await cache.alookup("q") is None


def test_a_payload_that_is_not_json_is_a_failed_store_not_an_error() -> None:
    cache = _cache()
    made = Answer("x")
    value = cache.get_or_compute("q", lambda: made, encode=lambda a: {"obj": object()})
    assert value is made
    assert cache.lookup("q") is None


# ---------------------------------------------------------------- coalescing
def test_coalesced_followers_get_the_leaders_object() -> None:
    cache = _cache()
    calls: list[int] = []
    decoded: list[Any] = []

    def slow() -> Answer:
        calls.append(1)
        time.sleep(0.3)
        return Answer("shared", ok=False)  # not stored: followers still share it

    def counting_decode(payload: Any) -> Answer:
        decoded.append(payload)
        return decode(payload)

    results: list[Any] = []

    def call() -> None:
        results.append(cache.fetch("q one", slow, encode=encode, decode=counting_decode))

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sum(r.computed for r in results) == 1
    leader = next(r.value for r in results if r.computed)
    assert all(r.value is leader for r in results)  # the object, not a payload
    assert decoded == []


async def test_async_coalesced_followers_get_the_leaders_object() -> None:
    cache = _cache()
    calls: list[int] = []

    async def slow() -> Answer:
        calls.append(1)
        await asyncio.sleep(0.2)
        return Answer("shared")

    results = await asyncio.gather(
        *(cache.afetch("q one", slow, encode=encode, decode=decode) for _ in range(3))
    )
    assert len(calls) == 1
    leader = next(r.value for r in results if r.computed)
    assert isinstance(leader, Answer)
    assert all(r.value is leader for r in results)


# ---------------------------------------------------------------- arguments
def test_a_codec_that_is_not_callable_is_refused_before_compute() -> None:
    cache = _cache()
    with pytest.raises(ConfigurationError, match="encode must be callable"):
        cache.get_or_compute("q", lambda: pytest.fail("must not run"), encode="json")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="decode must be callable"):
        cache.fetch("q", lambda: pytest.fail("must not run"), decode=1)  # type: ignore[arg-type]


def test_without_a_codec_nothing_changes() -> None:
    cache = _cache()
    assert cache.get_or_compute("q", lambda: {"a": 1}) == {"a": 1}
    assert cache.get_or_compute("q", lambda: pytest.fail("hit expected")) == {"a": 1}
    assert "not_stored" not in _counters(cache)


def test_the_fallback_of_an_overloaded_namespace_is_decoded() -> None:
    cache = LayeredCache(
        path=None,
        embedder=HashEmbedder(),
        max_model_calls=1,
        model_wait=0.01,
        fallbacks={"default": {"text": "busy, try later"}},
    )
    started = threading.Event()
    release = threading.Event()

    def hold() -> Answer:
        started.set()
        release.wait(5)
        return Answer("slow")

    holder = threading.Thread(
        target=lambda: cache.get_or_compute("first", hold, encode=encode, decode=decode)
    )
    holder.start()
    try:
        assert started.wait(5)
        value = cache.get_or_compute(
            "second", lambda: Answer("never"), encode=encode, decode=decode
        )
    finally:
        release.set()
        holder.join()
    assert value == Answer("busy, try later")
