"""A RedisStore makes one client, however many threads reach it first.

Under load, 16 threads of a process each created their own client on first use; the
clients dropped closed their connection pools under the pipelines still reading from
them ("I/O operation on closed file"), the breaker opened, and cross-process
single-flight computed the same key twice (tests/integration/test_singleflight_real.py
failed 4 runs in 6 with two busy processes beside it)."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

from agent_cache.stores import RedisStore


class _SlowRedis:
    """``redis.Redis`` whose ``from_url`` takes a moment, as it does under load."""

    made: ClassVar[list[object]] = []

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> object:
        time.sleep(0.05)
        client = object()
        cls.made.append(client)
        return client


class _Module:
    Redis = _SlowRedis


def test_threads_racing_to_the_first_call_share_one_client() -> None:
    store = RedisStore("redis://127.0.0.1:1/0")
    store._redis_module = _Module()
    _SlowRedis.made = []
    start = threading.Barrier(16)
    got: list[object] = []

    def first_call() -> None:
        start.wait()
        got.append(store._redis())

    threads = [threading.Thread(target=first_call) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(_SlowRedis.made) == 1
    assert all(c is _SlowRedis.made[0] for c in got) and len(got) == 16
