"""The router's retries are one flow for both twins (``Dispatcher._send``): tenacity
decides each retry and its wait, and the driver sleeps it, so a backoff under ``achat``
is an ``asyncio.sleep`` that leaves the event loop running, and under ``chat`` a
``time.sleep`` of the same length."""

from __future__ import annotations

import asyncio
import time

import httpx

from agent_cache.testing import FakeClock
from agent_cache.vllm import VllmRouter
from agent_cache.vllm.testing import FakeVllm, mock_transport

URL = "http://a:8000/v1"
MESSAGES = [{"role": "user", "content": "hi"}]


def _router(fake: FakeVllm) -> VllmRouter:
    transport = mock_transport({"a:8000": fake})
    return VllmRouter(
        [URL],
        client=httpx.Client(transport=transport),
        async_client=httpx.AsyncClient(transport=transport),
        clock=FakeClock(0.0),
        backoff_initial=0.05,
        backoff_max=0.05,
        max_attempts=3,
        breaker_threshold=10,
        metrics_interval=None,
        salt_secret="test-secret",
    )


async def test_an_async_backoff_leaves_the_loop_running() -> None:
    fake = FakeVllm("a")
    router = _router(fake)
    fake.fail(503, times=2)  # two retries, each after a backoff of 0.05 to 0.1 s
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    reply = await router.achat(MESSAGES)
    elapsed = time.monotonic() - started
    ticker.cancel()
    assert reply["choices"]
    assert len(fake.api_requests()) == 3
    assert elapsed >= 0.1  # both backoffs were waited
    assert ticks >= 5  # ... while the loop ran other tasks


def test_a_sync_backoff_waits_as_long() -> None:
    fake = FakeVllm("a")
    router = _router(fake)
    fake.fail(503, times=2)
    started = time.monotonic()
    assert router.chat(MESSAGES)["choices"]
    assert time.monotonic() - started >= 0.1
    assert len(fake.api_requests()) == 3
