"""``VllmRouter(chars_per_token=None)``: the characters-per-token ratio learned from the
replicas' ``usage``, and what follows it (call sizes, the prefix tree's capacity)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from agent_cache.errors import ConfigurationError
from agent_cache.testing import FakeClock
from agent_cache.vllm import VllmRouter
from agent_cache.vllm._calls import Generation
from agent_cache.vllm._ratio import CharsPerToken
from agent_cache.vllm.prefix_tree import prefix_blocks
from agent_cache.vllm.testing import FakeVllm, mock_transport

URLS = ["http://a:8000/v1", "http://b:8000/v1"]


def words(i: int, n: int = 200) -> str:
    """``n`` six-letter words and spaces: the fake counts one token a word (plus BOS),
    so the prompt has ``7 n / (n + 1)`` characters a token."""
    return f"doc{i:03d} " + "abcdef " * (n - 1)


RATIO = 7 * 200 / 201


def make_router(**kwargs: Any) -> tuple[VllmRouter, dict[str, FakeVllm]]:
    fakes = {"a:8000": FakeVllm("a"), "b:8000": FakeVllm("b")}
    transport = mock_transport(fakes)
    kwargs.setdefault("metrics_interval", None)
    router = VllmRouter(
        URLS,
        client=httpx.Client(transport=transport),
        async_client=httpx.AsyncClient(transport=transport),
        clock=FakeClock(0.0),
        salt_secret="s",
        backoff_initial=0.0,
        **kwargs,
    )
    return router, fakes


# ------------------------------------------------------------------ the estimate
def test_estimate_is_a_ratio_of_sums_over_a_sliding_window() -> None:
    r = CharsPerToken(window=3)
    assert r.value == 4.0 and r.learned and r.samples == 0
    assert r.observe(600, 100) and r.value == 6.0
    assert r.observe(200, 100) and r.value == 4.0  # (600 + 200) / 200
    assert not r.observe(10, 5)  # under min_tokens: ignored
    assert not r.observe(5_000, 100)  # 50 a token: not text the router sees
    assert not r.observe(50, 100)  # 0.5 a token: neither
    assert not r.observe(0, 100)
    assert r.samples == 2 and r.value == 4.0
    r.observe(300, 100)
    r.observe(300, 100)  # the window drops 600/100
    assert r.samples == 3 and r.value == pytest.approx(800 / 300)


def test_an_explicit_ratio_never_moves_and_bad_ones_are_refused() -> None:
    r = CharsPerToken(5.0)
    assert not r.learned and not r.observe(6_000, 1_000) and r.value == 5.0
    for bad in (0.0, -1.0):
        with pytest.raises(ConfigurationError):
            CharsPerToken(bad)
        with pytest.raises(ConfigurationError):
            VllmRouter(URLS, chars_per_token=bad)
    with pytest.raises(ConfigurationError):
        CharsPerToken(window=0)


def test_concurrent_observations_keep_the_sums_exact() -> None:
    r = CharsPerToken(window=100_000)
    barrier = threading.Barrier(8)

    def feed(k: int) -> None:
        barrier.wait()
        for j in range(500):
            r.observe(100 + k * 10 + j % 7, 40)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(feed, range(8)))
    chars = sum(100 + k * 10 + j % 7 for k in range(8) for j in range(500))
    assert r.samples == 4_000
    assert r.value == pytest.approx(chars / (4_000 * 40), rel=1e-12)


# ------------------------------------------------------------------ the router
def test_router_learns_the_replicas_ratio_from_usage() -> None:
    router, _fakes = make_router()
    assert router.chars_per_token == 4.0
    router.complete(words(0), max_tokens=4)
    assert router.chars_per_token == pytest.approx(RATIO)
    for i in range(1, 6):
        router.complete(words(i), max_tokens=4)
    assert router.chars_per_token == pytest.approx(RATIO)
    stats = router.stats()
    assert {s.chars_per_token for s in stats.values()} == {router.chars_per_token}
    # the next call is sized with the learned ratio
    call = router._calls.completion(words(9), Generation())
    assert call.prompt_tokens == pytest.approx(len(words(9)) / RATIO)
    assert call.block_tokens == pytest.approx(64 / RATIO)


def test_chat_streams_and_the_routing_transport_teach_it_too() -> None:
    msgs = [{"role": "user", "content": words(1)}]
    router, _ = make_router()
    list(router.stream_chat(msgs, max_tokens=4))
    streamed = router.chars_per_token
    assert streamed != 4.0 and 5.0 < streamed < 8.0  # the chat template's tokens count
    router, _ = make_router()
    router.chat(msgs, max_tokens=4)
    assert router.chars_per_token == pytest.approx(streamed)
    router, _ = make_router()
    with router.httpx_client() as client:
        body = {"model": "fake-model", "prompt": words(2), "max_tokens": 4}
        assert client.post("http://a:8000/v1/completions", json=body).status_code == 200
    assert router.chars_per_token == pytest.approx(RATIO)
    router, _ = make_router()
    with router.httpx_client() as client:  # a chat stream through the transport
        body = {"model": "fake-model", "messages": msgs, "max_tokens": 4, "stream": True}
        with client.stream("POST", "http://a:8000/v1/chat/completions", json=body) as resp:
            resp.read()
    assert router.chars_per_token == pytest.approx(streamed)


def test_a_batch_of_prompts_counts_all_their_characters() -> None:
    def batch(request: httpx.Request) -> httpx.Response:  # usage sums the prompts
        prompts = json.loads(request.content)["prompt"]
        tokens = sum(len(FakeVllm.tokenize_text(p)) for p in prompts)
        usage = {"prompt_tokens": tokens, "completion_tokens": 1}
        return httpx.Response(200, json={"choices": [{"text": "x"}], "usage": usage})

    transport = httpx.MockTransport(batch)
    router = VllmRouter(URLS, client=httpx.Client(transport=transport), metrics_interval=None)
    with router.httpx_client() as client:
        body = {"model": "m", "prompt": [words(0), words(1), words(2)], "max_tokens": 1}
        assert client.post("http://a:8000/v1/completions", json=body).status_code == 200
    assert router.chars_per_token == pytest.approx(RATIO)  # not a third of it


async def test_async_calls_learn_it() -> None:
    router, _ = make_router()
    await router.acomplete(words(3), max_tokens=4)
    assert router.chars_per_token == pytest.approx(RATIO)
    await router.aclose()


def test_an_explicit_ratio_stays_exactly_as_before() -> None:
    router, _ = make_router(chars_per_token=4.0, capacity_tokens=6_400)
    for i in range(5):
        router.complete(words(i), max_tokens=4)
    assert router.chars_per_token == 4.0
    tree = router._d.chooser.tree
    assert [tree.capacity(i) for i in range(2)] == [400, 400]  # 6,400 / (64 / 4.0)


def test_calls_without_usage_token_ids_and_tiny_prompts_leave_it_alone() -> None:
    def no_usage(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": [{"text": "x", "index": 0}]})

    transport = httpx.MockTransport(no_usage)
    router = VllmRouter(URLS, client=httpx.Client(transport=transport), metrics_interval=None)
    router.complete(words(0), max_tokens=4)
    assert router.chars_per_token == 4.0
    router, _ = make_router()
    router.complete("hello there", max_tokens=4)  # 3 tokens: too few to say
    router._channel.send(router._calls.completion(words(0), Generation()))
    assert router.chars_per_token == pytest.approx(RATIO)

    def usage_always(request: httpx.Request) -> httpx.Response:
        usage = {"prompt_tokens": 300, "completion_tokens": 1}
        return httpx.Response(200, json={"choices": [{"text": "x"}], "usage": usage})

    transport = httpx.MockTransport(usage_always)
    other = VllmRouter(URLS, client=httpx.Client(transport=transport), metrics_interval=None)
    with other.httpx_client() as client:  # token ids: no characters to compare
        body = {"model": "m", "prompt": list(range(100, 400)), "max_tokens": 4}
        assert client.post("http://a:8000/v1/completions", json=body).status_code == 200
    assert other.stats()[URLS[0]].prompt_tokens + other.stats()[URLS[1]].prompt_tokens == 300
    assert other.chars_per_token == 4.0
    router, _ = make_router()
    router.warm_prefixes([words(5)])  # a warm-up is not traffic
    assert router.chars_per_token == 4.0


def test_tree_capacity_follows_the_estimate_and_keeps_its_blocks() -> None:
    router, _ = make_router(capacity_tokens=6_400)
    tree = router._d.chooser.tree
    assert [tree.capacity(i) for i in range(2)] == [400, 400]  # 4.0 to start
    router.complete(words(0), max_tokens=4)
    url = router.pick(words(0))
    i = router.endpoints.index(url)  # type: ignore[arg-type]
    blocks = prefix_blocks(words(0))
    assert tree.match(blocks)[i] == len(blocks)  # sent before the estimate moved: kept
    want = int(6_400 / (64 / router.chars_per_token))
    assert [tree.capacity(i) for i in range(2)] == [want, want] and want == int(100 * RATIO)


def test_capacity_from_metrics_follows_the_estimate() -> None:
    fakes = {
        "a:8000": FakeVllm("a", capacity_blocks=401),
        "b:8000": FakeVllm("b", capacity_blocks=401),
    }
    transport = mock_transport(fakes)
    router = VllmRouter(
        URLS, client=httpx.Client(transport=transport), metrics_interval=5.0, clock=FakeClock(0.0)
    )
    router.complete(words(0), max_tokens=4)  # /metrics read first (4.0), then usage
    tree = router._d.chooser.tree
    want = int(6_400 / (64 / RATIO))
    assert router.chars_per_token == pytest.approx(RATIO)
    assert [tree.capacity(i) for i in range(2)] == [want, want]


def test_concurrent_calls_agree_with_the_ratio_of_sums() -> None:
    router, _ = make_router(capacity_tokens=6_400)
    prompts = [f"q{i} " + "abcdef " * (50 + 7 * i) for i in range(24)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: router.complete(p, max_tokens=2), prompts))
    chars = sum(len(p) for p in prompts)
    tokens = sum(len(FakeVllm.tokenize_text(p)) for p in prompts)
    assert router.chars_per_token == pytest.approx(chars / tokens, rel=1e-12)
    cpt = 64 / router._d.text_block_tokens  # the ratio the capacity was last set with
    assert router.chars_per_token <= cpt <= router.chars_per_token / 0.99
    assert router._d.chooser.tree.capacity(0) == int(6_400 / (64 / cpt))


def test_capacity_grows_with_the_estimate_and_shrinks_past_one_percent() -> None:
    router, _ = make_router(capacity_tokens=6_400, chars_per_token=None)
    d, tree = router._d, router._d.chooser.tree
    d.observe_prompt(6_000, 1_000)
    assert tree.capacity(0) == 600  # 6,400 / (64 / 6.0)
    d.observe_prompt(6_300, 1_000)  # 6.15: growing expires nothing, so at once
    assert tree.capacity(0) == 615
    d.observe_prompt(5_700, 1_000)  # 6.0: 2.4 % lower, follows
    assert tree.capacity(0) == 600
    for _ in range(3):
        d.observe_prompt(5_950, 1_000)  # 5.98: a wobble within 1 %, kept
    assert router.chars_per_token < 6.0 and tree.capacity(0) == 600


def test_routing_bench_with_the_learned_ratio_matches_the_measured_one() -> None:
    """The RAG stream of ``agent-cache bench prefix`` (300 requests, word-level tokens),
    3 replicas of 400 blocks: routers that learn the ratio from usage end at the
    stream's measured ratio and cache as much as routers given it."""
    from agent_cache.bench import prefix as bench
    from agent_cache.bench import routing

    renderer = bench._Renderer(lambda text: FakeVllm.tokenize_text(text, bos=False))
    w = bench.make_workload(300, seed=0)
    orders, _ = bench._orders_online(w, w.requests, False)["canonical (`order_documents`)"]
    prompt = bench._given_prompt()
    msgs = [bench._messages(prompt, w, r, ids) for r, ids in zip(w.requests, orders, strict=True)]
    rag = bench._routing_streams(3, msgs, renderer, 1.0, 0.7, 0)["RAG"]
    measured = routing.measured_chars_per_token(rag, renderer.tokens)
    rows = {
        cpt: routing.run_stream(
            rag,
            "prefix tree + load",
            replicas=3,
            capacity_blocks=400,
            tokens=renderer.tokens,
            chars_per_token=cpt,
        )
        for cpt in (4.0, measured, None)
    }
    assert measured > 5.0  # far from the old default
    assert rows[None]["chars_per_token"] == pytest.approx(measured, rel=0.01)
    assert abs(rows[None]["cached_share"] - rows[measured]["cached_share"]) <= 0.01
    assert rows[None]["cached_share"] > rows[4.0]["cached_share"] + 0.01
