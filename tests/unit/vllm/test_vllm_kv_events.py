"""KV events: the index against hand-worked events, the wire format of vLLM's publisher
(msgspec structs over ZMQ), and routing by what replicas announced, with the fallback
when events stop."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

pytest.importorskip("zmq")
pytest.importorskip("msgspec")

from agent_cache.testing import FakeClock
from agent_cache.vllm import VllmRouter
from agent_cache.vllm.kv_events import KvEventIndex, decode_event_batch
from agent_cache.vllm.prefix_tree import prefix_blocks
from agent_cache.vllm.testing import FakeVllm, KvEventPublisher, mock_transport


def stored(hashes: list[int], parent: int | None, tokens: list[int], **kw: Any) -> dict[str, Any]:
    return {
        "type": "BlockStored",
        "block_hashes": hashes,
        "parent_block_hash": parent,
        "token_ids": tokens,
        "block_size": 2,
        **kw,
    }


def test_index_follows_stored_removed_and_cleared() -> None:
    index = KvEventIndex(2, block_size=2)
    index.apply(0, stored([10, 11], None, [1, 2, 3, 4]))
    index.apply(0, stored([12], 11, [5, 6]))  # a chain continued in a later event
    index.apply(1, stored([90], None, [1, 2]))  # another seed: other hashes, same tokens
    assert index.match([1, 2, 3, 4, 5, 6, 7]) == [3, 1]
    assert index.match([1, 2, 3, 4, 5, 6]) == [2, 1]  # the last token is recomputed
    index.apply(0, {"type": "BlockRemoved", "block_hashes": [11], "medium": "GPU"})
    assert index.match([1, 2, 3, 4, 5, 6, 7]) == [1, 1]  # the walk stops at the gap
    index.apply(1, {"type": "AllBlocksCleared"})
    assert index.match([1, 2, 3]) == [1, 0]
    assert index.blocks(0) == 2 and index.blocks(1) == 0


def test_index_counts_duplicates_and_skips_orphans_and_keys_the_salt() -> None:
    index = KvEventIndex(1, block_size=2)
    index.apply(0, stored([10], None, [1, 2]))
    index.apply(0, stored([20], None, [1, 2]))  # a duplicate block, another id
    index.apply(0, {"type": "BlockRemoved", "block_hashes": [10], "medium": None})
    assert index.match([1, 2, 3]) == [1]  # one copy is left
    index.apply(0, stored([31], 999, [7, 8]))  # parent never announced: cannot place it
    assert index.match([7, 8, 9]) == [0]
    index.apply(0, stored([40], None, [5, 6], extra_keys=[("salt-a",)]))
    assert index.match([5, 6, 0], salt="salt-a") == [1]
    assert index.match([5, 6, 0]) == [0] and index.match([5, 6, 0], salt="salt-b") == [0]
    # vLLM's array encoding (array_like structs): the tag first, then the fields
    index.apply(0, ["BlockStored", [50], None, [8, 9], 2, None, "GPU"])
    assert index.match([8, 9, 0]) == [1]


def test_events_that_stop_make_the_index_step_aside() -> None:
    clock = FakeClock(0.0)
    index = KvEventIndex(2, block_size=2, stale_after=5.0, clock=clock)
    index.apply(0, stored([10], None, [1, 2]))
    index.sent(0)
    clock.advance(1)
    index.apply(0, stored([11], 10, [3, 4]))  # the answer to what was sent
    index.sent(1)  # replica 1 is idle and silent: that alone is not a failure
    clock.advance(4)
    assert index.match([1, 2, 3]) == [1, 0]
    clock.advance(2)  # replica 1 was sent a request 6 s ago and said nothing
    assert index.match([1, 2, 3]) == [1, None]  # only replica 1 is unknown now
    index.apply_batch(1, [], seq=0)  # an empty batch is a sign of life
    assert index.match([1, 2, 3]) == [1, 0]
    index.apply_batch(1, [], seq=3)
    assert index.gaps[1] == 1


@pytest.mark.parametrize("array_like", [False, True])
def test_publisher_wire_format_decodes(array_like: bool) -> None:
    import msgspec

    pub = KvEventPublisher(array_like=array_like)
    stored_t, removed_t, cleared_t, batch_t = pub._schema()
    batch = batch_t(
        ts=1.5,
        events=[
            stored_t(
                block_hashes=[7],
                parent_block_hash=None,
                token_ids=[1, 2],
                block_size=2,
                lora_id=None,
                medium="GPU",
            ),
            removed_t(block_hashes=[7], medium="GPU"),
            cleared_t(),
        ],
    )
    ts, events = decode_event_batch(msgspec.msgpack.encode(batch))
    assert ts == 1.5
    assert [e["type"] for e in events] == ["BlockStored", "BlockRemoved", "AllBlocksCleared"]
    assert events[0]["block_hashes"] == [7] and events[0]["token_ids"] == [1, 2]
    with pytest.raises(ValueError):
        decode_event_batch(msgspec.msgpack.encode(3))


# ------------------------------------------------------------------ over ZMQ
SYSTEM = "You are the support assistant. " * 8


def tokenizer(prompt: str | Sequence[Any]) -> list[int]:
    text = prompt if isinstance(prompt, str) else FakeVllm.render(list(prompt))
    return FakeVllm.tokenize_text(text)


def wait_for(predicate: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for KV events")
        time.sleep(0.02)


def test_router_routes_by_announced_blocks_and_falls_back_when_events_stop() -> None:
    pubs = [KvEventPublisher().bind() for _ in range(3)]
    fakes = {f"{c}:8000": FakeVllm(c, kv_events=p) for c, p in zip("abc", pubs, strict=True)}
    transport = mock_transport(fakes)
    clock = FakeClock(0.0)
    router = VllmRouter(
        [f"http://{c}:8000/v1" for c in "abc"],
        client=httpx.Client(transport=transport),
        kv_events=[p.endpoint for p in pubs],
        tokenizer=tokenizer,
        metrics_interval=None,
        clock=clock,
        backoff_initial=0.0,
    )
    index = router._d.kv_index
    assert index is not None
    try:
        router._d.start_events()
        time.sleep(0.3)  # ZMQ subscriptions take a moment to reach the publisher
        convo = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "my order never arrived " * 20},
        ]
        router.chat(convo)
        home = next(i for i, f in enumerate(fakes.values()) if f.api_requests())
        wait_for(lambda: index.blocks(home) > 0)
        follow_up = [
            *convo,
            {"role": "assistant", "content": f"Hello from {'abc'[home]}."},
            {"role": "user", "content": "and the refund?"},
        ]
        for i in range(3):  # the router's own record is wrong: it says another replica
            router._d.chooser.tree.clear(i)
        router._d.chooser.tree.insert((home + 1) % 3, prefix_blocks(follow_up))
        matched = [m or 0 for m in index.match(tokenizer(follow_up))]
        assert matched[home] > 0
        assert sum(matched) == matched[home]
        seen = index.events_seen[home]
        reply = router.chat(follow_up)
        assert reply["choices"][0]["message"]["content"] == f"Hello from {'abc'[home]}."
        cached = reply["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached == matched[home] * 16  # the announced prefix is what vLLM hit

        # the follow-up's own events reach the index before its publisher stops: one
        # still in flight would count as announced after the next request (a flake
        # under load)
        wait_for(lambda: index.events_seen[home] > seen)
        # events stop: the replica was sent a request and announced nothing
        pubs[home].paused = True
        again = [*follow_up, {"role": "user", "content": "hello?"}]
        router.chat(again)
        clock.advance(11)
        assert index.match(tokenizer(follow_up))[home] is None  # the tree decides there
        reply = router.chat(again)  # the tree recorded `again` on its home
        assert reply["choices"][0]["message"]["content"] == f"Hello from {'abc'[home]}."
    finally:
        router.close()
        for p in pubs:
            p.close()
