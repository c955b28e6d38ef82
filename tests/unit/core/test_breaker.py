"""The circuit breaker: a failing backend becomes instant misses, and comes back by itself."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from agent_cache import LayeredCache
from agent_cache._breaker import CircuitBreaker
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.stores import RedisStore
from agent_cache.testing import HashEmbedder


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _FlakyRedis:
    """A redis client stand-in: every command fails while ``down``; counts the calls."""

    def __init__(self) -> None:
        self.down = False
        self.calls = 0
        self.data: dict[str, dict[str, str]] = {}

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.down:
            raise redis.ConnectionError("Timeout reading from socket")

    def hmget(self, name: str, fields: list[str]) -> list[Any]:
        self._maybe_fail()
        row = self.data.get(name, {})
        return [row.get(f) for f in fields]

    def get(self, name: str) -> Any:
        self._maybe_fail()
        return None


def test_the_breaker_opens_after_consecutive_failures_and_probes_once() -> None:
    clock = _Clock()
    b = CircuitBreaker("x", failures=3, reset_after=2.0, clock=clock)
    b.failure()
    b.success()  # a success in between resets the run
    b.failure()
    b.failure()
    assert b.state == "closed"
    b.failure()
    assert b.state == "open" and not b.allow()
    clock.now = 2.5
    assert b.allow() and b.state == "half_open"
    assert not b.allow()  # only one probe at a time
    b.failure()  # the probe failed: open for another period
    assert b.state == "open" and not b.allow()
    clock.now = 5.0
    assert b.allow()
    b.success()
    assert b.state == "closed" and b.allow() and b.allow()
    assert b.opened == 2


def test_bad_input_is_not_a_backend_failure() -> None:
    b = CircuitBreaker("x", failures=1)
    with pytest.raises(ConfigurationError), b.guard():
        raise ConfigurationError("caller's fault")
    assert b.state == "closed"
    with pytest.raises(BackendError), b.guard():
        raise BackendError("down")
    assert b.state == "open"
    with pytest.raises(BackendError, match="circuit open") as info, b.guard():
        raise AssertionError("not reached")
    assert getattr(info.value, "circuit_open", False)


def test_an_open_circuit_costs_no_backend_call_and_closes_when_it_answers() -> None:
    clock = _Clock()
    client = _FlakyRedis()
    store = RedisStore(client=client, breaker=CircuitBreaker("redis", reset_after=1.0, clock=clock))
    client.down = True
    for _ in range(3):
        with pytest.raises(BackendError, match="Timeout"):
            store.get("k", 0.0)
    calls = client.calls
    for _ in range(100):
        with pytest.raises(BackendError, match="circuit open"):
            store.get("k", 0.0)
    assert client.calls == calls  # no call reached the server
    client.down = False
    clock.now = 1.5
    assert store.get("k", 0.0) is None  # the probe succeeds
    assert store.breaker is not None and store.breaker.state == "closed"


def test_an_error_reply_means_the_server_is_up() -> None:
    class _Erring(_FlakyRedis):
        def hmget(self, name: str, fields: list[str]) -> list[Any]:
            raise redis.ResponseError("ERR something the server refused")

    store = RedisStore(client=_Erring(), breaker=CircuitBreaker("redis", failures=1))
    with pytest.raises(BackendError, match="refused"):
        store.get("k", 0.0)
    assert store.breaker is not None and store.breaker.state == "closed"


def test_the_cache_builds_a_breaker_per_server_and_reports_health() -> None:
    cache = LayeredCache(
        path=None,
        redis_url="redis://127.0.0.1:1/0",
        chroma_url="http://127.0.0.1:1",
        embedder=HashEmbedder(),
    )
    assert cache.health() == {}
    _ = cache.kv_store, cache.vector_store
    assert cache.health() == {"exact": "closed", "semantic": "closed"}
    off = LayeredCache(path=None, redis_url="redis://127.0.0.1:1/0", circuit_reset=None)
    _ = off.kv_store
    assert off.health() == {}
    for bad in (0, -1.0, True, "5"):
        with pytest.raises(ConfigurationError, match="circuit_reset"):
            LayeredCache(path=None, circuit_reset=bad)  # type: ignore[arg-type]
