"""The prefix-cache simulator against hand-worked cases of vLLM V1's rules."""

from __future__ import annotations

import random

import pytest

from agent_cache.errors import ConfigurationError
from agent_cache.prompt import PrefixCacheSimulator, simulate_prefix_cache

B = 16


def toks(n: int, start: int = 0) -> list[int]:
    return list(range(start, start + n))


def test_repeated_32_token_prompt_caches_16_because_the_last_token_is_recomputed() -> None:
    result = simulate_prefix_cache([toks(32), toks(32)])
    assert result.cached_tokens == [0, 16]
    assert result.prompt_tokens == [32, 32]
    assert result.hit_rate == 16 / 64


def test_repeated_100_token_prompt_caches_96() -> None:
    assert simulate_prefix_cache([toks(100), toks(100)]).cached_tokens == [0, 96]


@pytest.mark.parametrize(("n", "expected"), [(15, 0), (16, 0), (17, 16), (48, 32), (49, 48)])
def test_cap_is_n_minus_1_floor_div_block_size(n: int, expected: int) -> None:
    assert simulate_prefix_cache([toks(n), toks(n)]).cached_tokens[1] == expected


def test_only_full_blocks_are_shared() -> None:
    # 40-token prompt and another sharing its first 39 tokens: blocks 0 and 1 are full and
    # equal; the partial third block never counts.
    a = toks(40)
    b = a[:39] + [9999]
    assert simulate_prefix_cache([a, b]).cached_tokens == [0, 32]


def test_hashes_are_chained_so_the_walk_stops_at_the_first_miss() -> None:
    a = toks(64)
    first_differs = [7777] + a[1:]  # blocks 1..3 have equal tokens but another parent
    assert simulate_prefix_cache([a, first_differs]).cached_tokens == [0, 0]
    second_differs = a[:16] + [7777] + a[17:]  # block 0 hits, block 1 misses, 2..3 not looked at
    assert simulate_prefix_cache([a, second_differs]).cached_tokens == [0, 16]


def test_cache_salt_isolates_and_spreads_through_the_chain() -> None:
    p = toks(64)
    assert simulate_prefix_cache([p, p], salts=["tenant-a", "tenant-b"]).cached_tokens == [0, 0]
    assert simulate_prefix_cache([p, p], salts=["tenant-a", "tenant-a"]).cached_tokens == [0, 48]
    assert simulate_prefix_cache([p, p], salts=["tenant-a", None]).cached_tokens == [0, 0]
    with pytest.raises(ConfigurationError):
        simulate_prefix_cache([p, p], salts=["only-one"])


def test_eviction_takes_the_tail_of_a_chain_first() -> None:
    # 4 usable blocks (capacity 5 minus the null block). A = 49 tokens fills all 4
    # (3 full + 1 partial). On finish the blocks are freed in reverse: the partial block
    # goes to the head (no hash), then the chain's tail block 2, then 1, then 0.
    sim = PrefixCacheSimulator(B, capacity_blocks=5)
    a = toks(49)
    assert sim.run(a) == 0
    assert sim.run(toks(32, start=1000)) == 0  # needs 2 blocks: the partial + A's tail
    assert sim.evicted_blocks == 1
    assert sim.run(a) == 32  # A's blocks 0 and 1 survived; block 2 (its tail) did not


def test_freed_partial_blocks_are_reused_before_cached_ones() -> None:
    sim = PrefixCacheSimulator(B, capacity_blocks=5)
    a = toks(49)
    sim.run(a)
    assert sim.run(toks(10, start=1000)) == 0  # one block: the freed partial, no eviction
    assert sim.evicted_blocks == 0
    assert sim.run(a) == 48


def test_output_tokens_take_slots_and_can_evict() -> None:
    sim = PrefixCacheSimulator(B, capacity_blocks=5)
    a = toks(48)
    sim.run(a)  # 3 blocks cached; free queue: [fresh 3, 2, 1, 0]
    # 16 prompt + 32 output tokens: 3 slots, the fresh block 3, then A's blocks 2 and 1
    sim.run(toks(16, start=500), output_tokens=32)
    assert sim.evicted_blocks == 2
    assert sim.run(a) == 16


def test_a_request_larger_than_the_pool_is_an_error() -> None:
    sim = PrefixCacheSimulator(B, capacity_blocks=3)
    with pytest.raises(ConfigurationError, match="capacity_blocks"):
        sim.run(toks(64))


def test_lookup_does_not_change_state() -> None:
    sim = PrefixCacheSimulator(B)
    p = toks(40)
    assert sim.lookup(p) == 0
    sim.run(p)
    assert sim.lookup(p) == 32
    assert sim.lookup(p) == 32
    assert (sim.hits, sim.queries) == (0, 40)


def test_bad_parameters() -> None:
    with pytest.raises(ConfigurationError):
        PrefixCacheSimulator(0)
    with pytest.raises(ConfigurationError):
        PrefixCacheSimulator(16, capacity_blocks=1)


def _lcp_blocks(a: list[int], b: list[int]) -> int:
    n = 0
    while (n + 1) * B <= min(len(a), len(b)) and a[n * B : (n + 1) * B] == b[n * B : (n + 1) * B]:
        n += 1
    return n


def test_unbounded_equals_the_block_aligned_lcp_shortcut_and_bounds_the_lru() -> None:
    rng = random.Random(7)
    stems = [[rng.randrange(50) for _ in range(rng.randrange(8, 90))] for _ in range(6)]
    stream = []
    for _ in range(120):
        stem = rng.choice(stems)
        cut = rng.randrange(len(stem) + 1)
        stream.append(stem[:cut] + [rng.randrange(50) for _ in range(rng.randrange(0, 40))])
    unbounded = simulate_prefix_cache(stream)
    for i, tokens in enumerate(stream):
        shared = max((_lcp_blocks(tokens, earlier) for earlier in stream[:i]), default=0)
        assert unbounded.cached_tokens[i] == B * min(shared, max(0, (len(tokens) - 1) // B))
    bounded = simulate_prefix_cache(stream, capacity_blocks=12)
    assert all(c <= u for c, u in zip(bounded.cached_tokens, unbounded.cached_tokens, strict=True))
    assert bounded.hits < unbounded.hits
    assert all(c % B == 0 for c in bounded.cached_tokens)
