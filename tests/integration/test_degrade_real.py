"""A deployment-wide limit on model calls through a real Redis."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder

pytestmark = pytest.mark.integration


def test_shared_model_calls_hold_across_instances(redis_url: str) -> None:
    prefix = f"gate{uuid.uuid4().hex[:8]}"
    caches = [
        LayeredCache(
            path=None,
            redis_url=redis_url,
            prefix=prefix,
            embedder=HashEmbedder(),
            shared_model_calls=2,
            model_wait=20,
        )
        for _ in range(3)
    ]  # three "processes", each would allow 8 alone
    lock, running, peak, calls = threading.Lock(), [0], [0], [0]

    def model(i: int) -> str:
        with lock:
            running[0] += 1
            calls[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return f"a{i}"

    threads = [
        threading.Thread(
            target=lambda i=i: caches[i % 3].get_or_compute(
                f"distinct question {i}?", lambda i=i: model(i)
            )
        )
        for i in range(18)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls[0] == 18 and peak[0] == 2
    for cache in caches:
        cache.clear()
        cache.close()
