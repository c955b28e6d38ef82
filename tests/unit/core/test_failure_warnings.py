"""A store that fails every call (a full disk, a read-only file) logs at most one
warning per minute per cause, and counts every failure per cause."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent_cache import LayeredCache, _backends
from agent_cache.errors import BackendError
from agent_cache.stores import MemoryStore
from agent_cache.testing import HashEmbedder


class FullDisk:
    """A KV store whose every operation fails as SQLite does on a full disk."""

    def __init__(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        if not hasattr(MemoryStore, name) or name.startswith("_"):
            raise AttributeError(name)

        def fail(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            raise BackendError(
                f"SQLite {name} failed on '/data/cache/exact.sqlite3': database or disk is full",
                layer="exact",
                key=str(args[0]) if args else None,
            )

        return fail

    def close(self) -> None:
        pass


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING and "serving as a miss" in r.getMessage()
    ]


def test_a_thousand_failing_calls_log_one_warning_per_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="agent_cache")
    store = FullDisk()
    with LayeredCache(path=None, kv_store=store, embedder=HashEmbedder()) as cache:
        for i in range(500):
            assert cache.lookup(f"question {i}") is None
            cache.store(f"question {i}", f"answer {i}")
        stats = cache.stats()
    warned = _warnings(caplog)
    causes = {k: v for k, v in stats.counters.items() if k.startswith("errors:")}
    assert len(causes) == 1, causes
    ((cause, count),) = causes.items()
    assert "database or disk is full" in cause and "/data" not in cause
    assert count == stats.errors >= 1000  # every failing call counted under its cause
    assert len(warned) == 1  # not one per call
    assert stats.counters["warnings_suppressed"] == count - 1


def test_the_next_warning_of_a_cause_says_how_many_were_not_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(_backends, "_monotonic", lambda: clock[0])
    caplog.set_level(logging.WARNING, logger="agent_cache")
    with LayeredCache(path=None, kv_store=FullDisk(), embedder=HashEmbedder()) as cache:
        for i in range(10):
            cache.lookup(f"q {i}")
        clock[0] += 61.0
        cache.lookup("q later")
    warned = _warnings(caplog)
    assert len(warned) == 2
    assert "more failures of this cause since the last warning" in warned[1].getMessage()
