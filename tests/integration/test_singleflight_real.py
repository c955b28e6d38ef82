"""Single-flight across processes on a real Redis: 4 processes x 16 threads, 20 keys."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.unit.core.test_cross_process_singleflight import run_herd

pytestmark = pytest.mark.integration


def test_four_processes_sixteen_threads_twenty_keys_twenty_calls_on_redis(
    redis_url: str, tmp_path: Path
) -> None:
    calls = run_herd(redis_url, tmp_path, prefix=f"herd.{uuid.uuid4().hex[:8]}")
    assert sorted(c.split(" ", 1)[1] for c in calls) == sorted(
        f"missing question number {i}" for i in range(20)
    )


def test_redis_lease_renewal_is_compare_and_extend(redis_url: str) -> None:
    from agent_cache.stores import RedisStore

    store = RedisStore(redis_url, prefix=f"lease.{uuid.uuid4().hex[:8]}:")
    assert store.try_lock("x", "a", ttl=0.2)
    assert not store.renew_lock("x", "b", ttl=60)  # not the holder
    assert store.renew_lock("x", "a", ttl=60)
    import time

    time.sleep(0.3)
    assert not store.try_lock("x", "b", ttl=60)  # renewed: still held by "a"
    store.unlock("x", "a")
    assert not store.renew_lock("x", "a", ttl=60)
    store.close()
