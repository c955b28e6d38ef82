"""The background vector writer's linger, batching, flushing and failure rules (fakes)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np
import pytest

from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.vectors._write_batch import PendingVector, WriteBatcher, pending_matches


class FakeWrite:
    """Records each batch; fails the first ``fail`` calls; may be held by ``gate``."""

    def __init__(self, fail: int = 0, error: Exception | None = None) -> None:
        self.batches: list[list[str]] = []
        self.times: list[float] = []
        self.fail = fail
        self.error = error or BackendError("server down", layer="semantic")
        self.gate = threading.Event()
        self.gate.set()
        self.calls = 0

    def __call__(self, ids: list[str], matrix: Any, metas: list[Any]) -> None:
        self.gate.wait(10)
        self.calls += 1
        assert matrix.shape[0] == len(ids) == len(metas)
        if self.calls <= self.fail:
            raise self.error
        self.batches.append(list(ids))
        self.times.append(time.monotonic())


def item(i: object, dim: int = 4, scope: str = "s", expires: float = 1e18) -> PendingVector:
    vec = np.zeros(dim, dtype=np.float32)
    vec[hash(str(i)) % dim] = 1.0
    return PendingVector(str(i), vec, {"scope": scope, "expires_at": expires})


def test_a_lone_add_waits_about_the_linger_then_is_written() -> None:
    write = FakeWrite()
    batcher = WriteBatcher(write, linger=0.05)
    t0 = time.monotonic()
    batcher.add([item(1)])
    assert batcher.flush(5)
    # flush hurries the batch: no linger once someone waits for it
    assert write.batches == [["1"]] and write.times[0] - t0 < 0.05
    batcher.add([item(2)])
    t1 = time.monotonic()
    deadline = t1 + 5
    while not write.times[1:] and time.monotonic() < deadline:
        time.sleep(0.002)
    assert 0.04 <= write.times[1] - t1 < 1.0  # lingered, and not much longer
    batcher.close()


def test_overlapping_adds_share_one_write() -> None:
    write = FakeWrite()
    batcher = WriteBatcher(write, linger=0.2)
    threads = [threading.Thread(target=batcher.add, args=([item(i)],)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert batcher.flush(5)
    assert sorted(i for b in write.batches for i in b) == sorted(str(i) for i in range(16))
    assert len(write.batches) == 1
    assert batcher.counts() == dict(
        batches=1, written=16, failed_batches=0, failed_vectors=0, pending=0
    )
    batcher.close()


def test_a_full_batch_goes_at_once_and_max_batch_bounds_it() -> None:
    write = FakeWrite()
    batcher = WriteBatcher(write, linger=30.0, max_batch=4, max_pending=8)
    batcher.add([item(i) for i in range(4)])
    deadline = time.monotonic() + 5
    while not write.batches and time.monotonic() < deadline:
        time.sleep(0.002)
    assert write.batches == [["0", "1", "2", "3"]]  # full: no 30 s linger
    batcher.add([item(i) for i in range(4, 10)])
    assert batcher.flush(5)
    assert all(len(b) <= 4 for b in write.batches)
    assert [i for b in write.batches for i in b] == [str(i) for i in range(10)]
    batcher.close()


def test_close_flushes_and_later_adds_are_refused() -> None:
    write = FakeWrite()
    batcher = WriteBatcher(write, linger=30.0)
    batcher.add([item(i) for i in range(5)])
    batcher.close()
    assert [i for b in write.batches for i in b] == [str(i) for i in range(5)]
    with pytest.raises(BackendError, match="closed"):
        batcher.add([item(9)])


def test_max_pending_blocks_the_adder_until_the_writer_catches_up() -> None:
    write = FakeWrite()
    write.gate.clear()  # the server stalls
    batcher = WriteBatcher(write, linger=0.001, max_batch=2, max_pending=2)
    batcher.add([item(0), item(1)])  # taken by the writer, which blocks in write()
    deadline = time.monotonic() + 5
    while len(batcher.pending()) != 2 or batcher.counts()["pending"] != 2:
        assert time.monotonic() < deadline
        time.sleep(0.002)
    batcher.add([item(2), item(3)])  # queued: the queue is now full
    done = threading.Event()
    threading.Thread(target=lambda: (batcher.add([item(4)]), done.set()), daemon=True).start()
    assert not done.wait(0.2)  # blocked: nothing beyond max_pending waits
    assert len(batcher.pending()) == 4
    write.gate.set()
    assert done.wait(5)
    assert batcher.flush(5)
    assert sorted(i for b in write.batches for i in b) == [str(i) for i in range(5)]
    batcher.close()


def test_a_failing_batch_is_retried_then_counted_logged_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flaky = FakeWrite(fail=1)
    batcher = WriteBatcher(flaky, linger=0.001, backoff=0.001)
    batcher.add([item(1), item(2)])
    assert batcher.flush(5)
    assert flaky.batches == [["1", "2"]] and batcher.counts()["failed_batches"] == 0

    errors: list[Exception] = []
    down = FakeWrite(fail=99)
    batcher = WriteBatcher(down, linger=0.001, retries=2, backoff=0.001, on_error=errors.append)
    with caplog.at_level(logging.WARNING, logger="agent_cache"):
        batcher.add([item(1), item(2), item(3)])
        assert batcher.flush(5)
    assert down.calls == 3  # one try and two retries
    counts = batcher.counts()
    assert counts["failed_batches"] == 1 and counts["failed_vectors"] == 3
    assert counts["pending"] == 0 and counts["written"] == 0
    assert errors == [down.error]
    assert any("batch of 3 vectors" in r.getMessage() for r in caplog.records)
    batcher.close()


def test_an_answered_error_is_not_retried() -> None:
    error = BackendError("dimension of 4, got 8", layer="semantic")
    error.answered = True  # type: ignore[attr-defined]
    write = FakeWrite(fail=99, error=error)
    batcher = WriteBatcher(write, linger=0.001, retries=3, backoff=0.001)
    batcher.add([item(1)])
    assert batcher.flush(5)
    assert write.calls == 1 and batcher.counts()["failed_vectors"] == 1
    batcher.close()


def test_vectors_of_other_dimensions_never_share_a_batch() -> None:
    write = FakeWrite()
    batcher = WriteBatcher(write, linger=0.2)
    batcher.add([item(1, dim=4), item(2, dim=8), item(3, dim=4)])
    assert batcher.flush(5)
    assert sorted(write.batches) == [["1", "3"], ["2"]]
    batcher.close()


def test_a_repeated_id_in_a_batch_keeps_the_last_add() -> None:
    seen: list[Any] = []
    batcher = WriteBatcher(lambda ids, m, metas: seen.append((ids, metas)), linger=0.2)
    batcher.add([item("a", scope="old"), item("a", scope="new")])
    assert batcher.flush(5)
    assert seen == [(["a"], [{"scope": "new", "expires_at": 1e18}])]
    batcher.close()


def test_pending_matches_filter_scope_expiry_and_dimension() -> None:
    q = np.array([1, 0, 0, 0], dtype=np.float32)
    same = PendingVector("same", q.copy(), {"scope": "s", "expires_at": 100.0})
    other = PendingVector("other", q.copy(), {"scope": "t", "expires_at": 100.0})
    old = PendingVector("old", q.copy(), {"scope": "s", "expires_at": 5.0})
    wide = PendingVector("wide", np.ones(8, np.float32), {"scope": "s", "expires_at": 100.0})
    live = {"scope": "s", "expires_at": 100.0}
    half = PendingVector("half", np.array([1, 1, 0, 0], np.float32), live)
    rows = pending_matches([same, other, old, wide, half], q, "s", now=10.0)
    assert [r[0] for r in rows] == ["same", "half"]
    assert rows[0][1] == pytest.approx(0.0) and rows[1][1] == pytest.approx(1 - 2**-0.5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"linger": 0},
        {"linger": -1},
        {"linger": True},
        {"max_batch": 0},
        {"max_batch": 9, "max_pending": 4},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        WriteBatcher(FakeWrite(), **kwargs)


def test_an_idle_writer_thread_ends_and_the_next_add_starts_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agent_cache.vectors._write_batch as wb

    monkeypatch.setattr(wb, "_IDLE_S", 0.05)
    write = FakeWrite()
    batcher = WriteBatcher(write, linger=0.001)
    batcher.add([item(1)])
    assert batcher.flush(5)
    first = batcher._thread
    assert first is not None
    first.join(5)
    assert not first.is_alive() and batcher._thread is None
    batcher.add([item(2)])
    assert batcher.flush(5)
    assert write.batches == [["1"], ["2"]]
    batcher.close()
