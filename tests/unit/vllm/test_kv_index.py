"""The KV-event index against what vLLM 0.33 really publishes (issue 20): long chains,
multimodal and LoRA extra keys, duplicate blocks under one hash, group_idx, offload
tiers, per-replica block sizes, publisher restarts, silent replicas, malformed events."""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import httpx
import pytest

from agent_cache.testing import FakeClock
from agent_cache.vllm import VllmRouter, kv_events
from agent_cache.vllm._dispatch import Call
from agent_cache.vllm.kv_events import KvEventIndex


def stored(hashes: Any, parent: Any, tokens: Any, block_size: Any = 2, **kw: Any) -> dict[str, Any]:
    return {
        "type": "BlockStored",
        "block_hashes": hashes,
        "parent_block_hash": parent,
        "token_ids": tokens,
        "block_size": block_size,
        "lora_id": None,
        "medium": "GPU",
        **kw,
    }


def removed(hashes: Any, **kw: Any) -> dict[str, Any]:
    return {"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU", **kw}


# ------------------------------------------------------------------ point 1
def test_a_32k_token_chain_is_stored_twice_and_matched_in_under_5_ms() -> None:
    rng = random.Random(0)
    tokens = [rng.randrange(150_000) for _ in range(32_768)]
    n = len(tokens) // 16
    index = KvEventIndex(3, block_size=16)
    event = stored([rng.getrandbits(64) for _ in range(n)], None, tokens, block_size=16)
    index.apply(0, event)  # one batch of 2,048 blocks
    index.apply(1, event)  # a second replica announces the same prefix
    assert index.malformed == [0, 0, 0]
    query = [*tokens, 7]
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        got = index.match(query)
        best = min(best, time.perf_counter() - start)
    assert got == [n, n, 0]
    assert best < 0.005, f"32k-token match took {best * 1000:.2f} ms"


def test_the_index_is_bounded_least_recently_stored_first() -> None:
    index = KvEventIndex(1, block_size=2, max_blocks=2)
    index.apply(0, stored([1, 2], None, [1, 2, 3, 4]))
    index.apply(0, stored([3], None, [9, 9]))
    assert index.blocks(0) == 2 and index.evicted[0] == 1
    assert index.match([9, 9, 0]) == [1]


# ------------------------------------------------------------------ point 2
def test_multimodal_pairs_arrive_as_lists_and_key_their_blocks() -> None:
    index = KvEventIndex(1, block_size=2)
    # vLLM's to_event_extra_keys: an (mm_identifier, offset) pair per item; msgpack
    # gives it back as a list
    index.apply(0, stored([1, 2], None, [5, 6, 7, 8], extra_keys=[None, [["img-abc", 1]]]))
    assert index.malformed == [0] and index.blocks(0) == 2
    assert index.match([5, 6, 7, 8, 0]) == [1]  # the image block is another image's
    index.apply(0, stored([3, 4], None, [5, 6, 7, 8], extra_keys=[None, [["img-abc", 1]]]))
    assert index.blocks(0) == 2  # same content, same keys


def test_any_malformed_event_is_counted_and_skipped() -> None:
    index = KvEventIndex(1, block_size=2)
    garbage: list[Any] = [
        stored([[1, 2]], None, [1, 2]),  # a list as a hash
        stored([1], None, [{"a": 1}, 2]),  # a dict as a token
        stored("xy", None, [1, 2]),
        stored([1], None, [1, 2], block_size="big"),
        stored([1], None, [1, 2], block_size=-2),
        stored([1], None, [1, 2], extra_keys=7),
        stored([1], None, [1, 2], group_idx="zero"),
        removed(None),
        removed([[1]]),
        ["BlockStored", 5],
        {"type": 3},
        None,
        42,
    ]
    for e in garbage:
        index.apply(0, e)
    assert index.malformed[0] >= 8
    index.apply(0, stored([9], None, [1, 2]))
    assert index.match([1, 2, 3]) == [1]


# ------------------------------------------------------------------ point 3
def test_duplicates_share_one_hash_and_are_counted_per_copy_and_group() -> None:
    index = KvEventIndex(1, block_size=2)
    index.apply(0, stored([10], None, [1, 2]))
    index.apply(0, stored([10], None, [1, 2]))  # a second copy, the same hash
    index.apply(0, removed([10]))  # one copy evicted
    index.apply(0, stored([11], 10, [3, 4]))  # a child under the surviving copy
    assert index.orphans == [0]
    assert index.match([1, 2, 3, 4, 5]) == [2]
    index.apply(0, removed([10]))  # the last copy
    assert index.match([1, 2, 3, 4, 5]) == [0]
    index.apply(0, removed([11]))
    assert index.blocks(0) == 0  # nothing is "held" forever

    # hybrid models announce a hash once per KV cache group
    index.apply(0, stored([20], None, [1, 2], group_idx=0))
    index.apply(0, stored([20], None, [1, 2], group_idx=1))
    index.apply(0, removed([20], group_idx=1))
    assert index.match([1, 2, 3]) == [1]
    index.apply(0, removed([20], group_idx=0))
    assert index.match([1, 2, 3]) == [0]


# ------------------------------------------------------------------ point 4
def lora_event(hashes: list[int], tokens: list[int], salt: str | None = None) -> dict[str, Any]:
    # 0.33: the LoRA name first in every block's extra keys, the salt on block 0
    n = len(hashes)
    extra = [("sql-lora", salt) if i == 0 and salt else ("sql-lora",) for i in range(n)]
    return stored(hashes, None, tokens, lora_id=1, lora_name="sql-lora", extra_keys=extra)


def test_lora_blocks_match_requests_naming_the_adapter() -> None:
    index = KvEventIndex(1, block_size=2)
    index.apply(0, lora_event([1, 2], [1, 2, 3, 4], salt="s"))
    assert index.lora_of("sql-lora") == "sql-lora" and index.lora_of("base") is None
    assert index.match([1, 2, 3, 4, 5], salt="s", lora="sql-lora") == [2]
    assert index.match([1, 2, 3, 4, 5], salt="s") == [0]
    assert index.match([1, 2, 3, 4, 5], lora="sql-lora") == [0]  # block 0 has the salt
    # an older release that left the name out of extra_keys keys the same blocks
    index.apply(0, stored([7], None, [8, 8], lora_name="sql-lora"))
    assert index.match([8, 8, 0], lora="sql-lora") == [1]


def router_for(n: int, **kw: Any) -> VllmRouter:
    return VllmRouter(
        [f"http://r{i}:8000/v1" for i in range(n)],
        client=httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(404))),
        kv_events=[f"tcp://127.0.0.1:{5557 + 10 * i}" for i in range(n)],
        metrics_interval=None,
        clock=FakeClock(0.0),
        **kw,
    )


def test_the_router_routes_a_lora_request_to_the_replica_holding_its_blocks() -> None:
    router = router_for(2)
    index = router._d.kv_index
    assert index is not None
    tokens = list(range(100, 164))
    hashes = list(range(1, 33))
    index.apply(1, {**lora_event(hashes, tokens), "block_size": 2})
    index.set_block_size(0, 2)
    index.set_block_size(1, 2)
    call = router._channel.route(
        Call("POST", "chat/completions", body={"model": "sql-lora"}), [*tokens, 1], None
    )
    plan = router._d._plan(call)
    assert call.kv is not None and call.kv.blocks == [0, 32]
    assert plan[0] is router._d.endpoints[1]
    router.close()


# ------------------------------------------------------------------ point 5
def test_the_block_size_comes_from_metrics_and_a_mismatch_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    router = router_for(2, kv_block_size=16)
    index = router._d.kv_index
    assert index is not None
    page = (
        'vllm:num_requests_running{engine="0"} 0.0\n'
        'vllm:cache_config_info{block_size="64",num_gpu_blocks="1000",engine="0"} 1.0\n'
    )
    with caplog.at_level(logging.WARNING, "agent_cache.vllm"):
        router._d.observe_metrics(router._d.endpoints[0], page)
    assert index.block_sizes == [64, 16]
    assert any("block size is 64" in r.getMessage() for r in caplog.records)
    tokens = list(range(1, 129))
    index.apply(0, stored([1, 2], None, tokens, block_size=64))
    assert index.match([*tokens, 0]) == [2, 0]
    router.close()


def test_the_block_size_is_learned_from_events_without_metrics() -> None:
    index = KvEventIndex(1, block_size=16)
    tokens = list(range(1, 129))
    index.apply(0, stored([1, 2], None, tokens, block_size=64))
    assert index.block_sizes == [64]
    assert index.match([*tokens, 0]) == [2]


# ------------------------------------------------------------------ point 6
def test_offload_tiers_are_kept_apart_and_weighted_below_the_gpu() -> None:
    index = KvEventIndex(2, block_size=2, lower_tier_weight=0.5)
    index.apply(0, stored([1, 2], None, [1, 2, 3, 4]))
    index.apply(0, stored([1, 2], None, [1, 2, 3, 4], medium="CPU"))
    index.apply(0, removed([1, 2], medium="CPU"))  # the CPU tier evicts its copy
    index.apply(1, stored([1, 2], None, [1, 2, 3, 4], medium="CPU"))
    got = index.lookup([1, 2, 3, 4, 5])
    assert got.blocks == [2, 0]  # GPU hits
    assert got.tokens == [4.0, 2.0]  # CPU blocks are loaded, worth half here
    index.apply(0, removed([1, 2]))
    assert index.blocks(0) == 0


# ------------------------------------------------------------------ point 7
def test_a_sequence_reset_drops_that_replicas_blocks() -> None:
    index = KvEventIndex(2, block_size=2)
    for seq in range(5):
        index.apply_batch(0, [stored([seq], None, [seq, seq])], seq=seq)
    index.apply_batch(1, [stored([9], None, [1, 1])], seq=0)
    assert index.blocks(0) == 5
    index.apply_batch(0, [stored([50], None, [7, 7])], seq=0)  # vLLM restarted
    assert index.restarts == [1, 0]
    assert index.blocks(0) == 1 and index.match([7, 7, 0]) == [1, 0]
    assert index.match([1, 1, 0]) == [0, 1]


# ------------------------------------------------------------------ point 8
def test_a_silent_replica_only_switches_itself_off() -> None:
    clock = FakeClock(0.0)
    index = KvEventIndex(3, block_size=2, stale_after=5.0, clock=clock)
    index.apply(0, stored([1], None, [1, 2]))
    index.apply(1, stored([1], None, [1, 2]))
    index.sent(2)
    index.sent(1, expect=False)  # a fully cached prompt: may announce nothing
    clock.advance(6)
    assert index.match([1, 2, 3]) == [1, 1, None]


def test_a_fully_cached_request_does_not_make_its_replica_stale() -> None:
    router = router_for(2)
    index = router._d.kv_index
    assert index is not None
    tokens = list(range(100, 164))
    index.set_block_size(0, 2)
    index.set_block_size(1, 2)
    index.apply(0, stored(list(range(1, 33)), None, tokens))
    call = router._channel.route(Call("POST", "completions", body={}), tokens, None)
    plan = router._d._plan(call)
    assert plan[0] is router._d.endpoints[0]
    router._d._begin(plan[0], call)  # sent; it holds all 32 full blocks
    router._d.clock.advance(30)  # type: ignore[attr-defined]
    assert index.match(tokens) == [31, 0]


# ------------------------------------------------------------------ point 9
def test_data_parallel_ranks_are_subscribed_on_offset_ports() -> None:
    assert kv_events.offset_endpoint_port("tcp://gpu-1:5557", 0) == "tcp://gpu-1:5557"
    assert kv_events.offset_endpoint_port("tcp://gpu-1:5557", 3) == "tcp://gpu-1:5560"
    assert kv_events.offset_endpoint_port("tcp://*:0", 3) == "tcp://*:0"
    assert kv_events.offset_endpoint_port("inproc://cache", 1) == "inproc://cache_dp1"
    router = router_for(2, kv_dp_ranks=[2, 1])
    subs = [(s.endpoint, s.replica, s.rank) for s in router._d._subscribers]
    assert subs == [
        ("tcp://127.0.0.1:5557", 0, 0),
        ("tcp://127.0.0.1:5558", 0, 1),
        ("tcp://127.0.0.1:5567", 1, 0),
    ]
    index = router._d.kv_index
    assert index is not None
    index.set_block_size(0, 2)
    index.apply_batch(0, [stored([1], None, [1, 2])], seq=4, rank=0)
    index.apply_batch(0, [stored([2], None, [3, 4])], seq=0, rank=1)  # its own sequence
    assert index.restarts == [0, 0] and index.blocks(0) == 2
    index.apply_batch(0, [{"type": "AllBlocksCleared"}], seq=1, rank=1)
    assert index.blocks(0) == 1  # rank 0's blocks stay
    router.close()


def test_capacity_sums_the_engines_and_prefers_kv_cache_size_tokens() -> None:
    from agent_cache.vllm.metrics import parse_load_metrics

    line = (
        'vllm:cache_config_info{{block_size="16",num_gpu_blocks="101",{extra}engine="{e}"}} 1.0\n'
    )
    head = 'vllm:num_requests_running{engine="0"} 0.0\n'
    two = head + line.format(extra="", e=0) + line.format(extra="", e=1)
    m = parse_load_metrics(two)
    assert m is not None and m.capacity_tokens == 2 * 100 * 16
    hybrid = head + "".join(line.format(extra='kv_cache_size_tokens="5000",', e=e) for e in (0, 1))
    m = parse_load_metrics(hybrid)
    assert m is not None and m.capacity_tokens == 10_000
