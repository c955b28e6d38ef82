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
    b = [*a[:39], 9999]
    assert simulate_prefix_cache([a, b]).cached_tokens == [0, 32]


def test_hashes_are_chained_so_the_walk_stops_at_the_first_miss() -> None:
    a = toks(64)
    first_differs = [7777, *a[1:]]  # blocks 1..3 have equal tokens but another parent
    assert simulate_prefix_cache([a, first_differs]).cached_tokens == [0, 0]
    second_differs = [*a[:16], 7777, *a[17:]]  # block 0 hits, block 1 misses, 2..3 not looked at
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


# ---------------------------------------------------------------- generated tokens
def test_generated_blocks_are_cached_so_the_next_turn_reuses_them() -> None:
    # Turn 1: 40 prompt + 30 generated tokens = 70; the last sampled token is never
    # computed, so (70 - 1) // 16 = 4 full blocks are cached (2 of them hold output).
    # Turn 2 repeats prompt + answer and adds 10 tokens: 80 tokens, cap (80-1)//16 = 4.
    prompt, answer = toks(40), toks(30, start=500)
    turn2 = prompt + answer + toks(10, start=900)
    with_ids = PrefixCacheSimulator(B)
    assert with_ids.run(prompt, output_token_ids=answer) == 0
    assert with_ids.run(turn2) == 64
    counts_only = PrefixCacheSimulator(B)  # the old model: only prompt blocks are kept
    counts_only.run(prompt, output_tokens=30)
    assert counts_only.run(turn2) == 32


def test_the_last_sampled_token_is_not_cached() -> None:
    # 16 prompt + 16 output = 32 tokens, but only 31 computed: one full block (the
    # prompt's); a block completed by the final sampled token is not cached.
    sim = PrefixCacheSimulator(B)
    sim.run(toks(16), output_token_ids=toks(16, start=100))
    assert sim.lookup(toks(16) + toks(16, start=100) + [7]) == 16
    # 17 output tokens: 32 computed, two full blocks
    sim = PrefixCacheSimulator(B)
    sim.run(toks(16), output_token_ids=toks(17, start=100))
    assert sim.lookup(toks(16) + toks(17, start=100)) == 32


def test_a_different_answer_shares_only_the_prompt_blocks() -> None:
    sim = PrefixCacheSimulator(B)
    prompt = toks(32)
    sim.run(prompt, output_token_ids=toks(40, start=500))
    other = prompt + toks(40, start=700) + [1]  # the chat kept a different answer
    assert sim.lookup(other) == 32


def test_generated_blocks_count_against_capacity_and_are_evicted_tail_first() -> None:
    # 4 usable blocks; 32 prompt + 33 output: 65 tokens, 5 slots needed: too many.
    sim = PrefixCacheSimulator(B, capacity_blocks=5)
    with pytest.raises(ConfigurationError):
        sim.run(toks(32), output_token_ids=toks(33, start=500))
    # 32 + 32 = 64 tokens: 4 slots, (64-1)//16 = 3 cached (2 prompt + 1 output) + 1 partial
    sim = PrefixCacheSimulator(B, capacity_blocks=5)
    sim.run(toks(32), output_token_ids=toks(32, start=500))
    turn2 = toks(32) + toks(32, start=500) + [9]
    assert sim.lookup(turn2) == 48
    # free queue after finishing: [partial, output block, prompt block 1, prompt block 0]
    sim.run(toks(10, start=2000))  # 1 block: the freed partial one, nothing evicted
    assert sim.lookup(turn2) == 48
    sim.run(toks(20, start=3000))  # 2 blocks: the partial, then the chain's tail
    assert sim.evicted_blocks == 1
    assert sim.lookup(turn2) == 32


def test_multi_turn_stream_hit_rate_by_hand() -> None:
    # Three turns, each adds 20 user tokens and gets a 20-token answer.
    system = toks(64, start=10_000)
    history: list[int] = list(system)
    prompts, outputs = [], []
    for t in range(3):
        history = history + toks(20, start=100 * t)
        answer = toks(20, start=5000 + 100 * t)
        prompts.append(list(history))
        outputs.append(answer)
        history = history + answer
    r = simulate_prefix_cache(prompts, outputs=outputs)
    # turn 1: 84 tokens, nothing cached; computed 84+19 = 103 -> 6 blocks cached
    # turn 2: 124 tokens, cap 123//16 = 7, cached blocks cover 96 -> 96
    #         computed 124+19 = 143 -> 8 blocks cached
    # turn 3: 164 tokens, cap 10, cached 8 blocks -> 128
    assert r.cached_tokens == [0, 96, 128]
    without = simulate_prefix_cache(prompts)
    assert without.cached_tokens == [0, 80, 112]  # prompt blocks only: 5, then 7 blocks
    with pytest.raises(ConfigurationError):
        simulate_prefix_cache(prompts, outputs=outputs[:1])
