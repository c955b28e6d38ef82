"""Micro-batching: concurrent embed calls (threads and asyncio tasks) share one pass."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from agent_cache.batching import MicroBatcher
from agent_cache.embedders import MemoEmbedder
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.testing import HashEmbedder

F32 = npt.NDArray[np.float32]


class Recording:
    """A HashEmbedder that records every batch and can hold a pass until released."""

    name = "recording"

    def __init__(self, *, hold: threading.Event | None = None) -> None:
        self.inner = HashEmbedder(dim=16)
        self.batches: list[list[str]] = []
        self.hold = hold
        self.started = threading.Event()
        self.lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> F32:
        with self.lock:
            self.batches.append(list(texts))
        self.started.set()
        if self.hold is not None:
            assert self.hold.wait(10)
        if any("bad" in t for t in texts):
            raise BackendError("bad text")
        return self.inner.embed(texts)


def expected(texts: Sequence[str]) -> F32:
    return HashEmbedder(dim=16).embed(texts)


def test_threads_share_passes_and_get_their_own_rows_in_order() -> None:
    hold = threading.Event()
    inner = Recording(hold=hold)
    batcher = MicroBatcher(inner, max_batch=64, max_wait_ms=5)
    results: dict[int, F32] = {}

    def call(i: int) -> None:
        results[i] = batcher.embed([f"q{i} a", f"q{i} b"])

    first = threading.Thread(target=call, args=(0,))
    first.start()
    assert inner.started.wait(5)  # pass 1 is running: the next callers queue behind it
    others = [threading.Thread(target=call, args=(i,)) for i in range(1, 9)]
    for t in others:
        t.start()
    deadline = time.monotonic() + 5
    while len(batcher._queue) < 8 and time.monotonic() < deadline:
        time.sleep(0.001)
    hold.set()
    for t in [first, *others]:
        t.join(5)
    for i in range(9):
        np.testing.assert_allclose(results[i], expected([f"q{i} a", f"q{i} b"]), rtol=1e-6)
    assert len(inner.batches) == 2  # 9 requests, 18 texts, two passes
    assert sorted(len(b) for b in inner.batches) == [2, 16]
    assert (batcher.batches, batcher.requests, batcher.texts) == (2, 9, 18)
    batcher.close()


def test_a_batch_never_exceeds_max_batch_and_a_big_request_runs_alone() -> None:
    hold = threading.Event()
    inner = Recording(hold=hold)
    batcher = MicroBatcher(inner, max_batch=4, max_wait_ms=0)
    futures = [batcher._submit(["first"])]
    assert inner.started.wait(5)
    futures += [batcher._submit([f"t{i}"]) for i in range(6)]
    futures.append(batcher._submit([f"big{i}" for i in range(9)]))
    hold.set()
    for f in futures:
        f.result(5)
    assert max(len(b) for b in inner.batches[:-1]) <= 4
    assert inner.batches[-1] == [f"big{i}" for i in range(9)]  # never split
    np.testing.assert_allclose(futures[3].result(), expected(["t2"]), rtol=1e-6)
    batcher.close()


def test_identical_texts_in_one_pass_are_embedded_once() -> None:
    hold = threading.Event()
    inner = Recording(hold=hold)
    batcher = MicroBatcher(inner)
    first = batcher._submit(["warm"])
    assert inner.started.wait(5)
    same = [batcher._submit(["same question"]) for _ in range(5)]
    hold.set()
    first.result(5)
    rows = [f.result(5) for f in same]
    assert inner.batches[-1] == ["same question"]
    for row in rows:
        np.testing.assert_allclose(row, expected(["same question"]), rtol=1e-6)


async def test_asyncio_tasks_share_passes_without_blocking_the_loop() -> None:
    inner = Recording()
    batcher = MicroBatcher(inner, max_batch=64, max_wait_ms=20)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    tick = asyncio.create_task(ticker())
    rows = await asyncio.gather(*(batcher.aembed([f"task {i}"]) for i in range(20)))
    tick.cancel()
    for i, row in enumerate(rows):
        np.testing.assert_allclose(row, expected([f"task {i}"]), rtol=1e-6)
    assert len(inner.batches) < 20  # the tasks were batched
    assert sum(len(b) for b in inner.batches) == 20
    assert ticks > 0  # the loop kept running while the passes ran
    batcher.close()


def test_an_error_reaches_only_the_request_that_caused_it() -> None:
    hold = threading.Event()
    inner = Recording(hold=hold)
    batcher = MicroBatcher(inner)
    first = batcher._submit(["fine"])
    assert inner.started.wait(5)
    good, bad = batcher._submit(["good"]), batcher._submit(["a bad one"])
    hold.set()
    first.result(5)
    np.testing.assert_allclose(good.result(5), expected(["good"]), rtol=1e-6)
    with pytest.raises(BackendError, match="bad text"):
        bad.result(5)
    with pytest.raises(BackendError, match="bad text"):  # a lone request: raised as is
        batcher.embed(["bad again"])


async def test_errors_propagate_to_asyncio_callers() -> None:
    batcher = MicroBatcher(Recording())
    with pytest.raises(BackendError):
        await batcher.aembed(["bad"])
    np.testing.assert_allclose(await batcher.aembed(["ok"]), expected(["ok"]), rtol=1e-6)


def test_a_lone_caller_never_waits_for_company() -> None:
    batcher = MicroBatcher(Recording(), max_wait_ms=500)
    batcher.embed(["warm up the worker"])
    started = time.perf_counter()
    for i in range(5):
        batcher.embed([f"alone {i}"])
    assert time.perf_counter() - started < 0.5  # 5 calls, far less than one 500 ms window


def test_a_lone_caller_runs_its_pass_on_its_own_thread() -> None:
    # no hand-over to the worker thread and back: a lone lookup pays nothing for batching
    threads: list[threading.Thread] = []

    class Where(Recording):
        def embed(self, texts: Sequence[str]) -> F32:
            threads.append(threading.current_thread())
            return super().embed(texts)

    batcher = MicroBatcher(Where(), max_wait_ms=5)
    for i in range(3):
        rows = batcher.embed([f"alone {i}", "same", "same"])
        np.testing.assert_allclose(rows, expected([f"alone {i}", "same", "same"]), rtol=1e-6)
    assert threads == [threading.main_thread()] * 3
    assert not batcher._workers  # no thread was needed
    assert (batcher.batches, batcher.requests, batcher.texts) == (3, 3, 6)
    batcher.close()


def test_the_wait_for_company_is_bounded() -> None:
    hold = threading.Event()
    inner = Recording(hold=hold)
    batcher = MicroBatcher(inner, max_batch=64, max_wait_ms=150)
    first = batcher._submit(["first"])
    assert inner.started.wait(5)
    second = batcher._submit(["second"])  # arrives during pass 1: concurrent traffic
    hold.set()
    released = time.perf_counter()
    first.result(5)
    second.result(5)
    waited = time.perf_counter() - released
    assert 0.1 <= waited < 2.0  # it waited for company, and no longer than the window
    hold2 = threading.Event()
    inner2 = Recording(hold=hold2)
    full = MicroBatcher(inner2, max_batch=2, max_wait_ms=1000)
    warm = full._submit(["warm"])
    assert inner2.started.wait(5)
    rows = [full._submit([f"x{i}"]) for i in range(2)]
    hold2.set()
    started = time.perf_counter()
    for f in [warm, *rows]:
        f.result(5)
    assert time.perf_counter() - started < 0.9  # a full batch runs at once, no 1 s wait
    assert inner2.batches[-1] == ["x0", "x1"]


def test_memo_stays_in_front_of_the_batcher() -> None:
    inner = Recording()
    memo = MemoEmbedder(MicroBatcher(inner))
    memo.embed(["repeat", "new"])
    memo.embed(["repeat"])
    asyncio.run(memo.aembed(["repeat", "new", "third"]))
    assert [t for b in inner.batches for t in b] == ["repeat", "new", "third"]
    assert memo.hits == 3 and memo.misses == 3


def test_close_then_reuse_and_validation() -> None:
    batcher = MicroBatcher(HashEmbedder(dim=8))
    assert batcher.embed([]).shape[0] == 0
    batcher.embed(["a"])
    batcher.close()
    assert batcher.embed(["b"]).shape == (1, 8)  # a fresh worker
    assert batcher.dimension == 8
    batcher.close()
    for kwargs in ({"max_batch": 0}, {"max_wait_ms": -1}, {"max_wait_ms": 5000}):
        with pytest.raises(ConfigurationError):
            MicroBatcher(HashEmbedder(), **kwargs)  # type: ignore[arg-type]


def test_wrong_shape_from_the_inner_embedder_is_a_backend_error() -> None:
    class Short:
        name = "short"

        def embed(self, texts: Sequence[str]) -> F32:
            return np.zeros((1, 4), dtype=np.float32)

    with pytest.raises(BackendError, match="shape"):
        MicroBatcher(Short()).embed(["a", "b"])


class Concurrency(Recording):
    """Counts how many passes run at once (each pass holds 50 ms)."""

    threads = 1  # one intra-op thread a pass, as OnnxEmbedder on a small machine

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.most = 0

    def embed(self, texts: Sequence[str]) -> F32:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(0.05)
            return super().embed(texts)
        finally:
            with self.lock:
                self.now -= 1


@pytest.mark.parametrize("passes", [1, 2])
def test_concurrent_callers_use_as_many_passes_as_allowed(passes: int) -> None:
    inner = Concurrency()
    batcher = MicroBatcher(inner, passes=passes, max_wait_ms=1)
    out: dict[int, F32] = {}

    def call(i: int) -> None:
        out[i] = batcher.embed([f"question {i}"])

    workers = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(10)
    assert inner.most == passes  # never more passes than allowed, and all of them used
    assert len(batcher._workers) <= passes
    for i in range(8):  # every caller got its own row
        np.testing.assert_allclose(out[i], expected([f"question {i}"]), rtol=1e-6)
    assert batcher.requests == 8 and batcher.batches < 8  # the queue still formed batches
    batcher.close()
    assert not batcher._workers


def test_default_passes_follow_the_inner_embedders_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent_cache import batching

    monkeypatch.setattr(batching, "usable_cores", lambda: 2)
    monkeypatch.delenv("AGENT_CACHE_EMBED_PASSES", raising=False)
    monkeypatch.delenv("AGENT_CACHE_EMBED_THREADS", raising=False)
    assert batching.default_passes(HashEmbedder(dim=4)) == 1  # unknown thread use: one
    assert batching.default_passes(Concurrency()) == 2  # 2 cores, 1-thread passes
    two = Concurrency()
    two.threads = 2
    assert batching.default_passes(two) == 1  # a pass already takes both cores
    monkeypatch.setattr(batching, "usable_cores", lambda: 16)
    assert batching.default_passes(two) == 4  # at most 4
    monkeypatch.setenv("AGENT_CACHE_EMBED_PASSES", "3")
    assert batching.default_passes(two) == 3
    monkeypatch.setenv("AGENT_CACHE_EMBED_PASSES", "0")
    with pytest.raises(ConfigurationError, match="AGENT_CACHE_EMBED_PASSES"):
        batching.default_passes(two)
    with pytest.raises(ConfigurationError, match="passes"):
        MicroBatcher(HashEmbedder(dim=4), passes=0)


def test_the_default_linger_is_bounded_in_microseconds() -> None:
    """Issue 22: a linger of milliseconds held cores idle (8 callers on 2 cores: 1.55x
    one caller's lookups/s at 2 ms, 1.80x at 0.2 ms); the default waits at most 200 µs."""
    batcher = MicroBatcher(HashEmbedder(dim=8))
    assert 0 < batcher.max_wait_s <= 0.0002
