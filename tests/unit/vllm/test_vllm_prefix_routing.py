"""The ``"prefix"`` policy: a bounded prefix tree of what was sent where, live load,
sessions, /metrics scraping, against hand-worked cases and the fake vLLM."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest

from agent_cache.errors import ConfigurationError
from agent_cache.testing import FakeClock
from agent_cache.vllm import SESSION_HEADER, LoadMetrics, VllmRouter
from agent_cache.vllm.choice import PrefixChooser
from agent_cache.vllm.prefix_tree import PrefixTree, prefix_blocks
from agent_cache.vllm.testing import FakeVllm, mock_transport

SYSTEM = "You are the support assistant of ACME. Answer from the documents. " * 6
URLS = ["http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"]


# ------------------------------------------------------------------ blocks and tree
def test_a_next_turn_extends_the_previous_turns_blocks() -> None:
    turn1 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "q1 " * 50}]
    turn2 = [
        *turn1,
        {"role": "assistant", "content": "a1 " * 40},
        {"role": "user", "content": "q2 " * 30},
    ]
    b1, b2 = prefix_blocks(turn1), prefix_blocks(turn2)
    assert len(b2) > len(b1) and b2[: len(b1)] == b1
    assert prefix_blocks(turn1, namespace="t")[0] != b1[0]  # namespaces share nothing
    tokens = list(range(40))
    assert len(prefix_blocks(tokens)) == 2  # 16-token blocks, the partial one unhashed
    assert prefix_blocks(turn1, tools=[{"name": "f"}])[0] != b1[0]
    with pytest.raises(ConfigurationError):
        prefix_blocks("x", block_chars=0)


def test_tree_longest_match_per_replica_stops_at_the_first_miss() -> None:
    tree = PrefixTree(3)
    tree.insert(0, [1, 2, 3])
    tree.insert(1, [1, 2, 3, 4, 5])
    tree.insert(2, [1, 9])
    assert tree.match([1, 2, 3, 4, 5, 6]) == [3, 5, 1]
    assert tree.match([7, 1, 2]) == [0, 0, 0]
    tree.remove(1, [4])
    assert tree.match([1, 2, 3, 4, 5]) == [3, 3, 1]
    tree.clear(0)
    assert tree.match([1, 2, 3]) == [0, 3, 1] and tree.size(0) == 0


def test_tree_expires_with_capacity_least_recent_first_and_a_chain_tail_first() -> None:
    tree = PrefixTree(1, capacity_blocks=4)
    tree.insert(0, [1, 2, 3])  # recency, oldest first: 3, 2, 1
    tree.insert(0, [1, 2, 7])  # touches 2 and 1, adds 7: oldest first 3, 7, 2, 1
    assert tree.size(0) == 4 and tree.match([1, 2, 3]) == [3]
    tree.insert(0, [8])  # over capacity: 3 (the first chain's tail) goes
    assert tree.match([1, 2, 3]) == [2] and tree.match([1, 2, 7]) == [3]
    tree.set_capacity(0, 2)  # shrinking expires at once: 7 and 2 go, the heads stay
    assert tree.match([1, 2, 7]) == [1] and tree.match([8]) == [1]
    with pytest.raises(ConfigurationError):
        PrefixTree(2, capacity_blocks=[1])


# ------------------------------------------------------------------ the chooser
def rank(chooser: PrefixChooser, blocks: list[int], session: str | None = None) -> list[int]:
    return chooser.rank(
        range(chooser.n),
        blocks,
        block_tokens=16.0,
        prompt_tokens=16.0 * len(blocks),
        session=session,
    )


def test_the_longest_prefix_decides_not_a_fixed_window() -> None:
    chooser = PrefixChooser(3)
    shared = list(range(100, 140))  # the same first 40 blocks (~2,500 characters)
    chooser.assign(0, [*shared, 1, 2], session=None)
    chooser.assign(1, [*shared, 5, 6, 7, 8, 9, 10], session=None)
    assert rank(chooser, [*shared, 5, 6, 7, 8, 9, 10, 11])[0] == 1
    assert rank(chooser, [*shared, 1, 2, 3])[0] == 0


def test_queued_prefill_outweighs_a_short_cached_prefix_but_not_a_long_one() -> None:
    clock = FakeClock(0.0)
    chooser = PrefixChooser(2, load_weight=1.0, prefill_rate=1000.0, clock=clock)
    short, long = list(range(20)), list(range(1000, 1060))
    for blocks in (short, long):  # mean prompt 200 tokens; nothing left queued
        chooser.assign(0, blocks, session=None, prompt_tokens=200.0, uncached_tokens=0.0)
    chooser.observe(0, LoadMetrics(running=1, waiting=4, kv_usage=0.5), clock())
    # 4 waiting x 200 tokens = 800 tokens queued on replica 0 (other routers' work)
    # short: 60 blocks (960 tokens), 20 cached there: 640 + 800 > 960 on the idle one
    assert rank(chooser, short + list(range(50, 90)))[0] == 1
    # long: 61 blocks (976 tokens), 60 cached there: 16 + 800 < 976
    assert rank(chooser, [*long, 1])[0] == 0
    clock.advance(0.3)  # 300 tokens drained: 640 + 500 > 960 still
    assert rank(chooser, short + list(range(50, 90)))[0] == 1
    clock.advance(0.3)  # 640 + 200 < 960
    assert rank(chooser, short + list(range(50, 90)))[0] == 0
    # the guard: 6 running + 4 waiting = 10 requests: 10 + 1 > ceil(11 x 1.25 / 2) + 2
    chooser.observe(0, LoadMetrics(running=6, waiting=4, kv_usage=0.9), clock())
    assert rank(chooser, [*long, 1])[0] == 1
    clock.advance(31)  # the reading is stale and the queue drained: the prefix decides
    assert rank(chooser, [*long, 1])[0] == 0


@pytest.mark.parametrize("near_tie", [0.0, 0.05])
def test_queued_prefill_is_live_and_leaves_when_requests_finish(near_tie: float) -> None:
    clock = FakeClock(0.0)
    chooser = PrefixChooser(2, load_weight=1.0, prefill_rate=1000.0, clock=clock, near_tie=near_tie)
    blocks = list(range(30))  # 480 tokens
    for _ in range(3):  # three requests of one prefix at the same instant
        first = rank(chooser, [*blocks, 7])[0]
        chooser.assign(first, [*blocks, 7], session=None, prompt_tokens=496.0)
        chooser.started(first)
    # the first queues 496 tokens on one replica; the second would wait for them there
    # (0 uncached + 496 queued) or prefill them on the other (496 + 0): a tie. Without
    # the near-tie rule load breaks it (the other replica: 992 tokens prefilled in all);
    # with it the replica holding the prefix keeps it (one prefill, the same wait).
    if near_tie == 0.0:
        assert chooser.pending(0) + chooser.pending(1) == 992.0
        assert chooser.loads[0].in_flight >= 1 and chooser.loads[1].in_flight >= 1
    else:
        assert chooser.pending(0) + chooser.pending(1) == 496.0
        assert sorted(r.in_flight for r in chooser.loads) == [0, 3]
    for i in (0, 1):
        while chooser.loads[i].in_flight:
            chooser.finished(i)
    assert chooser.pending(0) == chooser.pending(1) == 0.0


def test_a_near_tie_goes_to_the_replica_holding_more_but_a_real_gap_does_not() -> None:
    ctx = list(range(200))  # 3,200 tokens of a new shared context, sent to replica 0

    def burst(near_tie: float) -> tuple[PrefixChooser, FakeClock]:
        clock = FakeClock(0.0)
        c = PrefixChooser(2, load_weight=1.0, prefill_rate=1000.0, clock=clock, near_tie=near_tie)
        c.assign(0, [*ctx, 1], session=None, prompt_tokens=3216.0, uncached_tokens=3216.0)
        clock.advance(0.1)  # 3,116 tokens still queued there
        c.assign(0, [9999], session=None, prompt_tokens=200.0, uncached_tokens=200.0)
        return c, clock

    on, _ = burst(0.05)
    off, _ = burst(0.0)
    # staying costs 16 uncached + 3,316 queued = 3,332; the idle replica 3,216 + 0 (3.6 %
    # apart): without the rule the idle replica wins and prefills the context a second
    # time; with it the replica holding the context keeps the request
    assert rank(off, [*ctx, 2])[0] == 1
    assert rank(on, [*ctx, 2])[0] == 0
    # a real gap (2,000 more tokens queued there: 5,332 against 3,216) is no tie
    on.assign(0, [8888], session=None, prompt_tokens=2000.0, uncached_tokens=2000.0)
    assert rank(on, [*ctx, 3])[0] == 1
    with pytest.raises(ConfigurationError, match="near_tie"):
        PrefixChooser(2, near_tie=1.5)


def test_a_hot_prefix_spills_and_the_spill_is_remembered() -> None:
    chooser = PrefixChooser(3, load_weight=0.0, load_factor=1.0, load_slack=0)
    hot = list(range(50))
    homes = []
    for _ in range(6):  # six requests of one prefix in flight at once
        first = rank(chooser, [*hot, len(homes) + 1000])[0]
        chooser.assign(first, [*hot, len(homes) + 1000], session=None)
        chooser.started(first)
        homes.append(first)
    assert max(Counter(homes).values()) == 2  # bound: ceil(1.0 * (in flight + 1) / 3)
    spilled = set(homes)
    for i in homes:
        chooser.finished(i)
    matched = chooser.tree.match(hot)
    assert all(matched[i] == 50 for i in spilled)  # every replica it spilled to holds it


def test_sessions_keep_their_replica_until_it_is_overloaded() -> None:
    chooser = PrefixChooser(2, load_weight=0.0, load_factor=1.0, load_slack=0)
    first = rank(chooser, [1, 2, 3], session="s")[0]
    chooser.assign(first, [1, 2, 3], session="s")
    other = 1 - first
    chooser.tree.insert(other, [7, 8, 9, 10])  # the next turn's text is held elsewhere
    assert rank(chooser, [7, 8, 9, 10, 11], session="s")[0] == first
    assert rank(chooser, [7, 8, 9, 10, 11])[0] == other  # without the session
    for _ in range(3):
        chooser.started(first)  # overloaded: 3 + 1 > ceil((3 + 1) / 2)
    moved = rank(chooser, [7, 8, 9, 10, 11], session="s")[0]
    assert moved == other
    chooser.assign(moved, [7, 8, 9, 10, 11], session="s")
    assert chooser.session_replica("s") == other


# ------------------------------------------------------------------ through the router
class Cluster:
    def __init__(self, n: int = 3, **fake_kwargs: Any) -> None:
        self.fakes = {f"{c}:8000": FakeVllm(c, **fake_kwargs) for c in "abc"[:n]}
        self.transport = mock_transport(self.fakes)
        self.clock = FakeClock(0.0)

    def router(self, **kwargs: Any) -> VllmRouter:
        kwargs.setdefault("backoff_initial", 0.0)
        return VllmRouter(
            URLS[: len(self.fakes)],
            client=httpx.Client(transport=self.transport),
            async_client=httpx.AsyncClient(transport=self.transport),
            clock=self.clock,
            salt_secret="s",
            **kwargs,
        )

    def served(self) -> Counter[str]:
        return Counter({f.name: len(f.api_requests()) for f in self.fakes.values()})

    def paths(self) -> Counter[str]:
        return Counter(r.path for f in self.fakes.values() for r in f.requests)


def conversation(c: int, turns: int) -> list[list[dict[str, str]]]:
    msgs: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
    out = []
    for t in range(turns):
        msgs = [*msgs, {"role": "user", "content": f"chat {c} turn {t}: " + "detail " * 30}]
        out.append(list(msgs))
        msgs = [*msgs, {"role": "assistant", "content": f"Hello from {'abc'[c % 3]}."}]
    return out


def test_multi_turn_chats_stay_put_and_beat_round_robin_on_cached_tokens() -> None:
    results: dict[str, float] = {}
    for policy in ("prefix", "round_robin"):
        cluster = Cluster()
        router = cluster.router(policy=policy, metrics_interval=None)
        chats = [conversation(c, 5) for c in range(5)]  # 5: coprime to 3 replicas
        for t in range(5):  # the chats interleave, turn by turn
            for c in range(5):
                reply = router.chat(chats[c][t], max_tokens=4)
                answer = reply["choices"][0]["message"]["content"]
                if t + 1 < 5:  # the next turn carries what this replica answered
                    chats[c][t + 1][2 * t + 2]["content"] = answer
                    for later in chats[c][t + 2 :]:
                        later[2 * t + 2]["content"] = answer
        stats = router.stats().values()
        results[policy] = sum(s.cached_tokens for s in stats) / sum(s.prompt_tokens for s in stats)
    # every turn after the first finds its whole history (the best possible here: first
    # turns share only the system prompt); round-robin scatters the turns
    assert results["prefix"] > 0.77
    assert results["prefix"] > 1.5 * results["round_robin"]


def test_session_id_keeps_an_agent_run_on_its_replica_through_the_transport() -> None:
    cluster = Cluster()
    router = cluster.router(metrics_interval=None)
    client = router.httpx_client()
    for run in range(3):
        for step in range(4):  # each step's prompt differs from the start (a new plan)
            body = {
                "model": "m",
                "messages": [{"role": "user", "content": f"step {step} of run {run} " * 20}],
            }
            resp = client.post(
                "http://a:8000/v1/chat/completions",
                json=body,
                headers={SESSION_HEADER: f"run-{run}"},
            )
            assert resp.status_code == 200
    by_run: dict[str, set[str]] = {}
    for f in cluster.fakes.values():
        for r in f.api_requests():
            assert SESSION_HEADER not in r.headers  # stripped before vLLM
            by_run.setdefault(r.body["messages"][0]["content"].split()[4], set()).add(f.name)
    assert all(len(names) == 1 for names in by_run.values())
    assert router.chat([{"role": "user", "content": "x"}], session_id="run-0")["choices"]


def test_metrics_are_scraped_on_an_interval_and_teach_the_capacity() -> None:
    cluster = Cluster(capacity_blocks=401)  # 400 usable blocks x 16 = 6,400 tokens
    router = cluster.router(metrics_interval=5.0, chars_per_token=4.0)  # 16 tokens a block
    router.chat([{"role": "user", "content": "hello " * 50}])
    assert cluster.paths()["/metrics"] == 3  # due on the first call
    cluster.clock.advance(2)
    router.chat([{"role": "user", "content": "hello " * 50}])
    assert cluster.paths()["/metrics"] == 3
    cluster.clock.advance(4)
    router.chat([{"role": "user", "content": "hello " * 50}])
    assert cluster.paths()["/metrics"] == 6
    tree = router._d.chooser.tree
    assert [tree.capacity(i) for i in range(3)] == [400, 400, 400]  # 6,400 / 16 per block


def test_busy_replica_from_metrics_loses_new_prefixes() -> None:
    cluster = Cluster()
    cluster.fakes["a:8000"].waiting, cluster.fakes["a:8000"].running = 20, 10
    cluster.fakes["b:8000"].waiting, cluster.fakes["b:8000"].running = 20, 10
    router = cluster.router(metrics_interval=5.0)
    for d in range(6):
        router.chat([{"role": "user", "content": f"new document {d} " * 40}])
    assert cluster.served() == Counter({"c": 6, "a": 0, "b": 0})
    least = Cluster()
    least.fakes["a:8000"].waiting = 5
    router = least.router(policy="least_loaded", metrics_interval=5.0)
    for d in range(4):
        router.chat([{"role": "user", "content": f"doc {d}"}])
    assert least.served()["a"] == 0


def test_a_replica_whose_breaker_opens_is_forgotten() -> None:
    cluster = Cluster()
    router = cluster.router(metrics_interval=None, breaker_threshold=1)
    prompt = [{"role": "user", "content": "a long shared document " * 40}]
    router.chat(prompt)
    home = next(f for f in cluster.fakes.values() if f.api_requests())
    i = [f.name for f in cluster.fakes.values()].index(home.name)
    assert router._d.chooser.tree.size(i) > 0
    home.fail(503)
    router.chat(prompt)  # fails on its home, which opens the breaker, then fails over
    assert router._d.chooser.tree.size(i) == 0


async def test_async_calls_scrape_and_route_the_same_way() -> None:
    cluster = Cluster()
    router = cluster.router(metrics_interval=5.0)
    conv = conversation(0, 3)
    for msgs in conv:
        await router.achat(msgs)
    assert cluster.paths()["/metrics"] == 3
    assert sorted(cluster.served().values()) == [0, 0, 3]
