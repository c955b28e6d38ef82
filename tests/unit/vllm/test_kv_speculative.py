"""Speculative entries: the blocks a request just sent should store count as held on
its replica until its ``BlockStored`` confirms them or they expire, so a burst sharing a
new context stays on one replica while the first request's events are on their way."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

pytest.importorskip("zmq")
pytest.importorskip("msgspec")

from agent_cache.errors import ConfigurationError
from agent_cache.testing import FakeClock
from agent_cache.vllm import VllmRouter
from agent_cache.vllm.kv_events import KvEventIndex
from agent_cache.vllm.testing import FakeVllm, KvEventPublisher, mock_transport

CONTEXT = " ".join(f"fact{i % 311}-{i // 311}" for i in range(3000))


def tokenizer(prompt: str | Sequence[Any]) -> list[int]:
    text = prompt if isinstance(prompt, str) else FakeVllm.render(list(prompt))
    return FakeVllm.tokenize_text(text)


def burst_router(
    n: int, *, paused: bool, ttl: float = 5.0
) -> tuple[VllmRouter, list[KvEventPublisher], list[FakeVllm]]:
    pubs = [KvEventPublisher().bind() for _ in range(n)]
    for p in pubs:
        p.paused = paused  # events lag behind the burst (not sent before it is over)
    fakes = [FakeVllm(f"r{i}", kv_events=p) for i, p in enumerate(pubs)]
    router = VllmRouter(
        [f"http://r{i}:8000/v1" for i in range(n)],
        client=httpx.Client(
            transport=mock_transport({f"r{i}:8000": f for i, f in enumerate(fakes)})
        ),
        kv_events=[p.endpoint for p in pubs],
        kv_speculative_ttl=ttl,
        tokenizer=tokenizer,
        metrics_interval=None,
        clock=FakeClock(0.0),
    )
    router._d.start_events()
    time.sleep(0.3)  # ZMQ subscriptions take a moment to reach the publisher
    return router, pubs, fakes


def run_burst(
    router: VllmRouter, fakes: list[FakeVllm], calls: int = 8
) -> tuple[Counter[int], float]:
    for k in range(calls):
        msgs = [{"role": "user", "content": f"{CONTEXT}\nagent {k}: what follows?"}]
        router.chat(msgs, max_tokens=1)
    homes = Counter(
        i for i, f in enumerate(fakes) for r in f.api_requests() if r.path.endswith("completions")
    )
    stats = router.stats().values()
    share = sum(s.cached_tokens for s in stats) / sum(s.prompt_tokens for s in stats)
    return homes, share


def close(router: VllmRouter, pubs: list[KvEventPublisher]) -> None:
    router.close()
    for p in pubs:
        p.close()


def test_a_burst_sharing_a_new_context_stays_on_one_replica_before_its_events() -> None:
    """4 replicas, 8 back-to-back calls sharing a 3k-token context, no event back yet:
    without speculative entries every replica looked equally empty and the burst
    spread (cached share ~0.6); with them all 8 go where the first went."""
    router, pubs, fakes = burst_router(4, paused=True)
    try:
        homes, share = run_burst(router, fakes)
        assert len(homes) == 1 and sum(homes.values()) == 8, homes
        assert share > 0.8
        index = router._d.kv_index
        assert index is not None
        home = next(iter(homes))
        assert index.speculative(home) >= 3000 // 16
        assert all(index.speculative(i) == 0 for i in range(4) if i != home)
    finally:
        close(router, pubs)


def test_the_burst_stays_together_with_events_flowing_over_zmq() -> None:
    router, pubs, fakes = burst_router(4, paused=False)
    try:
        homes, share = run_burst(router, fakes)
        assert len(homes) == 1, homes
        assert share > 0.8
    finally:
        close(router, pubs)


def test_without_speculative_entries_the_lagging_burst_spreads() -> None:
    """The defect, kept visible: ttl 0 is the old behaviour (events only)."""
    router, pubs, fakes = burst_router(4, paused=True, ttl=0.0)
    try:
        homes, _ = run_burst(router, fakes)
        assert len(homes) > 1
    finally:
        close(router, pubs)


def stored(tokens: list[int], hashes: list[int], parent: int | None = None) -> dict[str, Any]:
    return {
        "type": "BlockStored",
        "block_hashes": hashes,
        "parent_block_hash": parent,
        "token_ids": tokens,
        "block_size": 4,
    }


def test_an_entry_is_confirmed_by_block_stored_and_otherwise_expires() -> None:
    clock = FakeClock(0.0)
    index = KvEventIndex(2, block_size=4, clock=clock, speculative_ttl=3.0)
    prompt = list(range(1, 14))  # 3 full blocks and one token
    index.expect(0, prompt)
    assert index.match(prompt) == [3, 0]
    assert index.lookup(prompt).complete == [False, False]  # speculation is not a hit
    assert index.speculated == [3, 0]
    index.apply(0, stored(prompt[:8], [7, 8]))  # the first two blocks arrive
    assert index.confirmed == [2, 0] and index.speculative(0) == 1
    clock.advance(3.5)  # the third never does
    assert index.speculative(0) == 0 and index.expired == [1, 0]
    assert index.match(prompt) == [2, 0]


def test_a_held_block_is_not_speculated_and_a_restart_drops_the_entries() -> None:
    index = KvEventIndex(1, block_size=4, clock=FakeClock(0.0))
    prompt = list(range(1, 10))
    index.apply(0, stored(prompt[:4], [1]))
    index.expect(0, prompt)
    assert index.speculated == [1]  # the second block only
    index.clear(0)
    assert index.speculative(0) == 0 and index.match(prompt) == [0]


def test_speculative_entries_are_bounded_and_the_ttl_is_checked() -> None:
    index = KvEventIndex(1, block_size=1, clock=FakeClock(0.0), max_blocks=10)
    index.expect(0, list(range(100)))
    assert index.speculative(0) == 10
    with pytest.raises(ConfigurationError):
        KvEventIndex(1, speculative_ttl=-1.0)
