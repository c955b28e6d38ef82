"""Joint batch order (``order_batch`` + ``schedule_batch``) and the online orderer's
defaults, as properties over generated streams of several shapes."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from agent_cache.bench.prefix_sweep import VARIANTS, Variant, make_stream
from agent_cache.errors import ConfigurationError
from agent_cache.prompt import PopularityOrderer, schedule_batch, simulate_prefix_cache
from agent_cache.prompt._paths import PathTrie


def words(text: str) -> list[int]:
    """A deterministic word-level tokenizer (a word's id from its letters)."""
    return [sum(ord(c) * 31**i for i, c in enumerate(w)) % 50_000 for w in text.split()]


class Render:
    """System tokens + each document's tokens + the question's (as the sweep renders)."""

    def __init__(self, docs: dict[str, str]) -> None:
        self.system = list(range(1, 40))
        self.docs = {d: words(f"[{d}] {t}") for d, t in docs.items()}

    def __call__(self, ids: Sequence[str], question: str) -> list[int]:
        out = list(self.system)
        for d in ids:
            out += self.docs[d]
        return out + words(question)


Requests = Sequence[tuple[tuple[str, ...], str]]


def _docs(docs: dict[str, str], ids: Sequence[str]) -> list[dict[str, str]]:
    return [{"id": d, "content": docs[d]} for d in ids]


def _joint(stream_docs: dict[str, str], reqs: Requests) -> tuple[list[int], list[list[str]]]:
    render = Render(stream_docs)
    grouped = PopularityOrderer().order_batch([_docs(stream_docs, ids) for ids, _ in reqs])
    orders = [[d["id"] for d in g] for g in grouped]
    run = schedule_batch([render(o, q) for o, (_, q) in zip(orders, reqs, strict=True)])
    return run, orders


@pytest.mark.parametrize("variant", VARIANTS[:6], ids=lambda v: v.name)
def test_joint_order_keeps_every_request_and_document(variant: Variant) -> None:
    stream = make_stream(150, seed=variant.seed, **variant.params)
    run, orders = _joint(stream.docs, stream.requests)
    assert sorted(run) == list(range(150))  # every request exactly once
    for (ids, _), order in zip(stream.requests, orders, strict=True):
        assert sorted(order) == sorted(set(ids))  # its own documents, each once
    assert _joint(stream.docs, stream.requests) == (run, orders)  # deterministic


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_joint_order_beats_arrival_and_canonical_schedules(variant: Variant) -> None:
    stream = make_stream(300, seed=variant.seed, **variant.params)
    render = Render(stream.docs)
    reqs = stream.requests
    cap = variant.capacity_blocks

    def rate(run: Sequence[int], orders: Sequence[Sequence[str]]) -> float:
        prompts = [render(orders[i], reqs[i][1]) for i in run]
        return simulate_prefix_cache(prompts, capacity_blocks=cap).hit_rate

    canon = [sorted(ids) for ids, _ in reqs]
    arrival = rate(range(len(reqs)), canon)
    sched = schedule_batch([render(c, q) for c, (_, q) in zip(canon, reqs, strict=True)])
    canonical_scheduled = rate(sched, canon)
    run, orders = _joint(stream.docs, reqs)
    joint = rate(run, orders)
    assert canonical_scheduled > arrival
    assert joint > canonical_scheduled


def test_a_long_shared_document_leads_a_short_one_shared_a_little_more() -> None:
    # "short" is in 4 requests (saves 3 x 10 chars), "long" in 3 (saves 2 x 400 chars)
    long, short = "L" * 400, "s" * 10
    batch = [[short, long, "x1"], [long, short, "x2"], [short, long, "x3"], [short, "x4"]]
    orders = PopularityOrderer().order_batch(batch)
    assert [o[0] for o in orders[:3]] == [long, long, long]
    assert orders[3][0] == short


def test_schedule_batch_runs_every_shared_prefix_contiguously() -> None:
    rng = random.Random(11)
    for _ in range(20):
        batch = [[rng.randrange(3) for _ in range(rng.randint(1, 6))] for _ in range(40)]
        order = schedule_batch(batch)
        assert sorted(order) == list(range(40))
        ran = [tuple(batch[i]) for i in order]
        for depth in (1, 2, 3):
            heads = [r[:depth] for r in ran if len(r) >= depth]
            seen: set[tuple[int, ...]] = set()
            for j, h in enumerate(heads):  # a prefix, once left, never comes back
                if j and h != heads[j - 1]:
                    assert h not in seen
                seen.add(h)


def _online(
    stream_docs: dict[str, str], reqs: Requests, orderer: PopularityOrderer | None, cap: int
) -> float:
    render = Render(stream_docs)
    counts: dict[str, int] = {}
    for ids, _ in reqs:
        for d in ids:
            counts[d] = counts.get(d, 0) + 1
    prompts = []
    for ids, q in reqs:
        if orderer is None:  # the oracle: true counts known in advance
            order = sorted(ids, key=lambda d: (-counts[d], d))
        else:
            order = [d["id"] for d in orderer.order(_docs(stream_docs, ids))]
        prompts.append(render(order, q))
    return simulate_prefix_cache(prompts, capacity_blocks=cap).hit_rate


@pytest.mark.parametrize("name", ["base", "80 topics", "wide k", "small cache"])
def test_online_order_beats_the_count_oracle(name: str) -> None:
    variant = next(v for v in VARIANTS if v.name == name)
    stream = make_stream(800, seed=variant.seed, **variant.params)
    cap = variant.capacity_blocks
    oracle = _online(stream.docs, stream.requests, None, cap)
    learned = _online(stream.docs, stream.requests, PopularityOrderer(), cap)
    ranking = _online(stream.docs, stream.requests, PopularityOrderer(follow_paths=False), cap)
    # reusing what was sent lately (what is cached) beats the true counts known in advance
    assert learned > oracle
    assert learned > ranking


def test_a_path_window_that_fits_a_large_cache_reaches_the_oracle() -> None:
    variant = next(v for v in VARIANTS if v.name == "large cache")
    stream = make_stream(800, seed=variant.seed, **variant.params)
    cap = variant.capacity_blocks
    oracle = _online(stream.docs, stream.requests, None, cap)
    learned = _online(stream.docs, stream.requests, PopularityOrderer(path_window=256), cap)
    assert learned >= 0.99 * oracle


def test_recent_paths_are_followed_by_rank_and_forgotten_after_the_window() -> None:
    trie = PathTrie(max_nodes=1000, window=5)
    trie.add(["b", "a", "c"], step=1)
    trie.add(["a", "b"], step=2)
    rank = {"a": 0, "b": 1, "c": 2}
    assert trie.match({"a", "b", "c"}, rank, step=3) == ["a", "b"]  # "a" ranks first
    assert trie.match({"b", "c"}, rank, step=3) == ["b"]  # "b" then "a": "a" is missing
    assert trie.match({"a", "b", "c"}, rank, step=7) == ["a", "b"]  # step 2 is 5 calls back
    assert trie.match({"a", "b", "c"}, rank, step=8) == []  # now both are too old
    trie.add(["z"], step=20)  # adding prunes what is older than the window
    assert list(trie.paths()) == [["z"]] and len(trie) == 1


def test_the_trie_stays_under_its_node_budget() -> None:
    trie = PathTrie(max_nodes=50, window=10_000)
    for step in range(200):
        trie.add([f"d{step}", f"e{step}"], step=step)
        assert len(trie) <= 50
    rank: dict[str, int] = {}
    assert trie.match({"d199", "e199"}, rank, step=200) == ["d199", "e199"]  # newest kept
    assert trie.match({"d0", "e0"}, rank, step=200) == []  # oldest dropped first
    with pytest.raises(ConfigurationError):
        PathTrie(max_nodes=10, window=0)


def test_equally_popular_documents_stop_trading_places() -> None:
    orderer = PopularityOrderer()
    changes, last = [], orderer.ranking()
    for name in "xy" * 300:  # counts alternate one ahead of the other
        orderer.order([name], key=str)
        changes.append(orderer.ranking() != last)
        last = orderer.ranking()
    assert any(changes[:40])  # early on a lead of one passes (the counts know little)
    assert not any(changes[100:])  # later a 5 % lead is needed
