"""``LayeredCache.fetch_stream`` / ``afetch_stream``: one model stream for concurrent
identical misses, recorded live for every reader, stored once when it ends."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from agent_cache import LayeredCache, StreamAbandoned
from agent_cache.testing import HashEmbedder

Q = "How do I reset my password?"
WORDS = ["Open ", "the ", "account ", "page."]


def _cache(**kw: object) -> LayeredCache:
    return LayeredCache(path=None, embedder=HashEmbedder(), **kw)  # type: ignore[arg-type]


def join(chunks: list[str]) -> str:
    return "".join(chunks)


class Model:
    """A fake streaming model: counts calls; can hold after the first chunk, fail, and
    says whether its stream was closed."""

    def __init__(
        self, *, hold: bool = False, hold_at: int = 1, fail_after: int | None = None
    ) -> None:
        self.calls = 0
        self.closed = 0
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.hold_at = hold_at  # the chunk it waits for ``release`` before
        self.fail_after = fail_after

    def stream(self) -> Iterator[str]:
        self.calls += 1
        try:
            for i, word in enumerate(WORDS):
                if i == self.hold_at:
                    assert self.release.wait(5)
                if i == self.fail_after:
                    raise RuntimeError("model server dropped the stream")
                yield word
        finally:
            self.closed += 1

    async def astream(self) -> AsyncIterator[str]:
        self.calls += 1
        try:
            for i, word in enumerate(WORDS):
                if i == self.hold_at:
                    while not self.release.is_set():
                        await asyncio.sleep(0.005)
                if i == self.fail_after:
                    raise RuntimeError("model server dropped the stream")
                yield word
        finally:
            self.closed += 1


def test_a_miss_streams_live_and_is_stored_joined_then_served() -> None:
    cache, model = _cache(), Model()
    got = cache.fetch_stream(Q, model.stream, join=join)
    assert not got.served and got.hit is None
    assert list(got) == WORDS and got.computed and not got.coalesced
    assert got.value == "".join(WORDS) and cache.stats().stores == 1
    again = cache.fetch_stream(Q, model.stream, join=join)
    assert again.served and again.hit is not None and again.hit.layer == "exact"
    assert list(again) == [] and again.value == "".join(WORDS)
    assert model.calls == 1
    assert cache.get_or_compute(Q, lambda: pytest.fail("stored")) == "".join(WORDS)


def test_threads_share_one_model_stream_and_one_write() -> None:
    cache, model = _cache(), Model(hold=True)
    n = 5
    opened = threading.Barrier(n + 1)
    out: list[list[str]] = [[] for _ in range(n)]
    flags: list[tuple[bool, bool]] = [(False, False)] * n

    def reader(k: int) -> None:
        got = cache.fetch_stream(Q, model.stream, join=join)
        opened.wait(5)  # everyone has joined the flight before the stream ends
        out[k] = list(got)
        flags[k] = (got.computed, got.coalesced)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    opened.wait(5)
    model.release.set()
    for t in threads:
        t.join(10)
    assert model.calls == 1
    assert all(chunks == WORDS for chunks in out)
    assert sorted(flags) == [(False, True)] * (n - 1) + [(True, False)]
    stats = cache.stats()
    assert stats.stores == 1 and stats.coalesced == n - 1
    assert cache._streams.in_flight() == 0


def test_tasks_share_one_model_stream_and_one_write() -> None:
    cache, model = _cache(), Model(hold=True)

    async def reader() -> list[str]:
        got = await cache.afetch_stream(Q, model.astream, join=join)
        return [c async for c in got]

    async def main() -> list[list[str]]:
        tasks = [asyncio.create_task(reader()) for _ in range(5)]
        await asyncio.sleep(0.05)
        model.release.set()
        return await asyncio.gather(*tasks)

    results = asyncio.run(main())
    assert model.calls == 1 and all(r == WORDS for r in results)
    assert cache.stats().stores == 1 and cache._streams.in_flight() == 0


def test_a_thread_follows_an_async_stream() -> None:
    cache, model = _cache(), Model(hold=True)
    seen: list[str] = []

    async def main() -> list[str]:
        got = await cache.afetch_stream(Q, model.astream, join=join)
        first = await got.__anext__()
        follower = cache.fetch_stream(Q, model.stream, join=join)
        t = threading.Thread(target=lambda: seen.extend(follower))
        t.start()
        model.release.set()
        rest = [c async for c in got]
        await asyncio.to_thread(t.join, 5)
        return [first, *rest]

    assert asyncio.run(main()) == WORDS and seen == WORDS
    assert model.calls == 1 and cache.stats().stores == 1


def test_a_reader_that_stops_early_alone_stores_nothing_and_closes_the_stream() -> None:
    cache, model = _cache(), Model()
    got = cache.fetch_stream(Q, model.stream, join=join)
    assert next(got) == WORDS[0]
    got.close()
    assert model.closed == 1 and cache.stats().stores == 0
    assert cache._streams.in_flight() == 0
    assert list(cache.fetch_stream(Q, model.stream, join=join)) == WORDS  # a new call
    assert model.calls == 2 and cache.stats().stores == 1


def test_a_dropped_reader_closes_the_stream_at_once() -> None:
    cache, model = _cache(), Model()
    got = cache.fetch_stream(Q, model.stream, join=join)
    assert next(got) == WORDS[0]
    del got  # no close(): freed by reference counting, no cycle to wait for
    assert model.closed == 1 and cache._streams.in_flight() == 0
    with cache.fetch_stream(Q, model.stream, join=join) as again:
        assert next(again) == WORDS[0]
    assert model.closed == 2 and cache.stats().stores == 0


def test_an_unread_stream_releases_its_flight() -> None:
    cache, model = _cache(), Model()
    got = cache.fetch_stream(Q, model.stream, join=join)
    assert cache._streams.in_flight() == 1
    got.close()
    assert cache._streams.in_flight() == 0 and model.calls == 0


def test_when_the_first_reader_leaves_a_follower_drives_the_stream_to_its_end() -> None:
    cache, model = _cache(), Model()
    leader = cache.fetch_stream(Q, model.stream, join=join)
    follower = cache.fetch_stream(Q, model.stream, join=join)
    assert next(follower) == WORDS[0]  # the follower started it
    assert next(leader) == WORDS[0]
    follower.close()  # the one that started it leaves
    assert list(leader) == WORDS[1:]
    assert model.calls == 1 and model.closed == 1 and cache.stats().stores == 1


def test_a_cancelled_task_does_not_break_the_stream_for_the_others() -> None:
    cache, model = _cache(), Model(hold=True)

    async def main() -> list[str]:
        first = await cache.afetch_stream(Q, model.astream, join=join)
        other = await cache.afetch_stream(Q, model.astream, join=join)

        async def read_all() -> list[str]:
            return [c async for c in first]

        task = asyncio.create_task(read_all())
        await asyncio.sleep(0.05)  # `first` drives the pull, held after chunk 0
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        model.release.set()
        return [c async for c in other]

    assert asyncio.run(main()) == WORDS
    assert model.calls == 1 and cache.stats().stores == 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_error_mid_stream_reaches_every_reader_and_stores_nothing(kind: str) -> None:
    cache, model = _cache(), Model(fail_after=2)
    if kind == "sync":
        a = cache.fetch_stream(Q, model.stream, join=join)
        b = cache.fetch_stream(Q, model.stream, join=join)
        assert next(b) == WORDS[0]
        with pytest.raises(RuntimeError, match="dropped"):
            list(a)
        with pytest.raises(RuntimeError, match="dropped"):
            list(b)
    else:

        async def main() -> None:
            a = await cache.afetch_stream(Q, model.astream, join=join)
            b = await cache.afetch_stream(Q, model.astream, join=join)
            for reader in (a, b):
                with pytest.raises(RuntimeError, match="dropped"):
                    [c async for c in reader]

        asyncio.run(main())
    assert model.calls == 1 and cache.stats().stores == 0
    assert cache._streams.in_flight() == 0
    assert list(cache.fetch_stream(Q, Model().stream, join=join)) == WORDS  # not stuck


def test_a_follower_left_behind_mid_stream_is_told() -> None:
    cache, model = _cache(), Model(hold=True)

    async def main() -> None:
        got = await cache.afetch_stream(Q, model.astream, join=join)
        assert await got.__anext__() == WORDS[0]
        follower = cache.fetch_stream(Q, model.stream, join=join)  # a thread cannot drive it
        seen: list[str] = []
        errors: list[BaseException] = []

        def follow() -> None:
            try:
                seen.extend(follower)
            except StreamAbandoned as exc:
                errors.append(exc)

        t = threading.Thread(target=follow)
        t.start()
        await asyncio.sleep(0.05)
        await got.aclose()  # the only reader that can drive it leaves
        await asyncio.to_thread(t.join, 5)
        assert seen == WORDS[:1] and len(errors) == 1
        model.release.set()
        await asyncio.sleep(0.05)

    asyncio.run(main())
    assert cache.stats().stores == 0 and cache._streams.in_flight() == 0
    assert model.closed == 1


def test_a_follower_that_waited_too_long_for_a_first_chunk_streams_on_its_own() -> None:
    cache, model = _cache(singleflight_timeout=0.1), Model(hold=True, hold_at=0)
    slow = cache.fetch_stream(Q, model.stream, join=join)
    first: list[str] = []
    t = threading.Thread(target=lambda: first.extend(slow))
    t.start()  # pulls, and the model holds before its first chunk
    deadline = time.monotonic() + 5
    while model.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    other = Model()
    assert list(cache.fetch_stream(Q, other.stream, join=join)) == WORDS
    assert other.calls == 1  # degraded to its own call, not stuck behind the slow one
    model.release.set()
    t.join(5)
    assert first == WORDS and model.calls == 1


def test_bypass_neither_reads_nor_writes_and_no_store_reads_only() -> None:
    cache, model = _cache(), Model()
    list(cache.fetch_stream(Q, model.stream, join=join, policy="no_store"))
    assert cache.stats().stores == 0 and model.calls == 1
    list(cache.fetch_stream(Q, model.stream, join=join))
    assert cache.stats().stores == 1 and model.calls == 2
    hit = cache.fetch_stream(Q, model.stream, join=join, policy="no_store")
    assert hit.served and list(hit) == []
    bypassed = cache.fetch_stream(Q, model.stream, join=join, policy="bypass")
    assert not bypassed.served and list(bypassed) == WORDS
    assert model.calls == 3 and cache.stats().stores == 1
    refreshed = cache.fetch_stream(Q, model.stream, join=join, policy="refresh")
    assert not refreshed.served and list(refreshed) == WORDS
    assert model.calls == 4 and cache.stats().stores == 2


def test_join_none_is_not_stored_and_tokens_see_the_joined_value() -> None:
    cache, model = _cache(), Model()
    list(cache.fetch_stream(Q, model.stream, join=lambda _chunks: None))
    assert cache.stats().stores == 0
    seen: list[object] = []

    def tokens(value: object) -> int:
        seen.append(value)
        return 4

    list(cache.fetch_stream(Q, model.stream, join=join, tokens=tokens))
    assert seen == ["".join(WORDS)]
    hit = cache.lookup(Q)
    assert hit is not None and hit.usage is not None


def test_bad_arguments_fail_before_the_model_is_called() -> None:
    from agent_cache import ConfigurationError

    cache, model = _cache(), Model()
    with pytest.raises(ConfigurationError):
        cache.fetch_stream(Q, model.stream, join=join, ttl=-1)
    assert model.calls == 0


def test_a_refusal_is_a_negative_entry_served_without_a_call_except_to_bypass() -> None:
    cache = _cache(negative_ttl=30.0)
    calls: list[int] = []

    def refusal() -> Iterator[str]:
        calls.append(1)
        yield from ["I'm sorry, ", "I can't help with that."]

    assert list(cache.fetch_stream(Q, refusal, join=join)) == [
        "I'm sorry, ",
        "I can't help with that.",
    ]
    assert cache.stats().stores == 0  # kept a few seconds only, not stored
    again = cache.fetch_stream(Q, refusal, join=join)
    assert again.served and again.hit is None and again.value.startswith("I'm sorry")
    assert len(calls) == 1
    assert len(list(cache.fetch_stream(Q, refusal, join=join, policy="bypass"))) == 2
    assert len(calls) == 2


def test_a_failing_record_step_still_serves_the_stream() -> None:
    cache, model = _cache(), Model()

    def tokens(_value: object) -> int:
        raise RuntimeError("usage parser broke")

    assert list(cache.fetch_stream(Q, model.stream, join=join, tokens=tokens)) == WORDS
    assert cache.stats().errors >= 1 and cache._streams.in_flight() == 0


def test_a_reader_that_missed_while_a_stream_ended_is_served_its_answer() -> None:
    """A reader whose lookup missed just before the only recording of its key ended (and
    stored) must not start a second model stream: the answer is in the cache now."""
    cache, model = _cache(), Model()
    streams = cache._streams
    read_flow = streams._reader.read_flow
    missed, ended = threading.Event(), threading.Event()

    def slow_read(*args: object):  # type: ignore[no-untyped-def]
        got = yield from read_flow(*args)  # type: ignore[arg-type]
        if threading.current_thread().name == "late":
            missed.set()
            assert ended.wait(5)  # the other reader's stream ends (and stores) meanwhile
        return got

    streams._reader.read_flow = slow_read  # type: ignore[method-assign]
    first = cache.fetch_stream(Q, model.stream, join=join)  # a miss: the recording opens
    late: list[object] = []
    t = threading.Thread(
        target=lambda: late.append(cache.fetch_stream(Q, model.stream, join=join)), name="late"
    )
    t.start()
    assert missed.wait(5)
    assert list(first) == WORDS  # ends and stores
    ended.set()
    t.join(10)
    (got,) = late
    assert list(got) == [] and got.value == join(WORDS)  # type: ignore[attr-defined]
    assert model.calls == 1
