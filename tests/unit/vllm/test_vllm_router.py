"""VllmRouter contract tests against in-process fakes of vLLM (httpx.MockTransport).

The fake implements vLLM's documented fields; every test here runs without a socket.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest

import agent_cache.vllm as vllm_pkg
from agent_cache import LayeredCache
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.testing import FakeClock, HashEmbedder
from agent_cache.vllm import VllmRouter
from agent_cache.vllm.testing import FakeVllm, mock_transport

SYSTEM = "You are the support assistant of ACME. Answer from the documents. " * 6
URLS = ["http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"]


def msgs(doc: str, question: str = "What now?") -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Documents: {doc} " * 40 + question},
    ]


class Cluster:
    def __init__(self, n: int = 3, **fake_kwargs: Any) -> None:
        self.fakes = {f"{name}:8000": FakeVllm(name, **fake_kwargs) for name in "abc"[:n]}
        self.transport = mock_transport(self.fakes)
        self.client = httpx.Client(transport=self.transport)
        self.aclient = httpx.AsyncClient(transport=self.transport)
        self.clock = FakeClock(0.0)

    def __getitem__(self, name: str) -> FakeVllm:
        return self.fakes[f"{name}:8000"]

    def router(self, urls: list[str] | None = None, **kwargs: Any) -> VllmRouter:
        kwargs.setdefault("backoff_initial", 0.0)
        kwargs.setdefault("salt_secret", "test-secret")
        kwargs.setdefault("metrics_interval", None)  # scraping has its own tests
        return VllmRouter(
            urls or URLS[: len(self.fakes)],
            client=self.client,
            async_client=self.aclient,
            clock=self.clock,
            **kwargs,
        )

    def served_by(self) -> Counter[str]:
        return Counter({f.name: len(f.api_requests()) for f in self.fakes.values()})


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


def test_all_is_pinned() -> None:
    assert sorted(vllm_pkg.__all__) == sorted(
        [
            "NAMESPACE_HEADER",
            "SESSION_HEADER",
            "AsyncRoutingTransport",
            "EndpointStats",
            "LoadMetrics",
            "PrefixCacheMetrics",
            "RoutingTransport",
            "ServeFlag",
            "VllmRouter",
            "affinity_key",
            "parse_load_metrics",
            "parse_prefix_cache_metrics",
            "parse_prometheus_text",
            "vllm_command",
            "vllm_flags",
        ]
    )
    for name in vllm_pkg.__all__:
        assert hasattr(vllm_pkg, name), name


def test_constructor_does_no_io_and_validates() -> None:
    seen: list[httpx.Request] = []
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(200))
    )
    VllmRouter(["http://nowhere.invalid:1/v1"], client=client)
    assert seen == []
    for bad in ([], "http://a/v1", ["ftp://a/v1"], ["http://a/v1", "http://a/v1/"]):
        with pytest.raises(ConfigurationError):
            VllmRouter(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        VllmRouter(URLS, policy="random")  # type: ignore[arg-type]


def test_chat_returns_the_body_with_usage_and_extra_body_passes_through(cluster: Cluster) -> None:
    router = cluster.router(model="m1")
    reply = router.chat(
        msgs("refunds"), max_tokens=2, temperature=0, extra_body={"top_k": 5, "priority": 3}
    )
    assert reply["choices"][0]["message"]["content"].startswith("Hello from")
    assert reply["usage"]["prompt_tokens"] > 100
    sent = [r for f in cluster.fakes.values() for r in f.api_requests()]
    assert len(sent) == 1
    body = sent[0].body
    assert body["model"] == "m1" and body["top_k"] == 5 and body["priority"] == 3
    assert body["max_tokens"] == 2 and "stream" not in body and "cache_salt" not in body


def test_cache_salt_per_namespace(cluster: Cluster) -> None:
    router = cluster.router()
    router.chat(msgs("x"), namespace="tenant-a")
    router.chat(msgs("x"), namespace="tenant-a")
    router.chat(msgs("x"), namespace="tenant-b")
    router.chat(msgs("x"), namespace="tenant-c", extra_body={"cache_salt": "mine"})
    bodies = [r.body for f in cluster.fakes.values() for r in f.api_requests()]
    salts = Counter(b.get("cache_salt") for b in bodies)
    salt_a, salt_b = router.cache_salt("tenant-a"), router.cache_salt("tenant-b")
    assert salts == Counter({salt_a: 2, salt_b: 1, "mine": 1})
    assert len(salt_a) == 64 and int(salt_a, 16) >= 0 and salt_a != salt_b
    other = VllmRouter(URLS, salt_secret="test-secret")  # same secret: same salts
    assert other.cache_salt("tenant-a") == salt_a
    assert VllmRouter(URLS).cache_salt("tenant-a") != salt_a  # default: a random secret


def test_salt_isolates_tenants_on_a_shared_server() -> None:
    cluster = Cluster(n=1)
    router = cluster.router()
    router.chat(msgs("x"), namespace="a")
    again = router.chat(msgs("x"), namespace="a")
    other = router.chat(msgs("x"), namespace="b")
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert other["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}  # as vLLM 0.33


@pytest.mark.parametrize("zero_cached", ["null", "missing", "zero"])
def test_cached_tokens_null_or_missing_count_as_zero(zero_cached: str) -> None:
    cluster = Cluster(n=1, zero_cached=zero_cached)
    cache = LayeredCache(path=None, embedder=HashEmbedder())
    router = cluster.router(cache=cache)
    first = router.chat(msgs("x"))
    if zero_cached == "missing":
        assert "prompt_tokens_details" not in first["usage"]
    second = router.chat(msgs("x"))
    p1, p2 = first["usage"]["prompt_tokens"], second["usage"]["prompt_tokens"]
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached == (p2 - 1) // 16 * 16
    stats = router.stats()["http://a:8000/v1"]
    assert (stats.prompt_tokens, stats.cached_tokens) == (p1 + p2, cached)
    assert cache.stats().kv == {"prompt_tokens": p1 + p2, "cached_tokens": cached}


def test_server_without_prompt_tokens_details_reports_zero() -> None:
    cluster = Cluster(n=1, prompt_tokens_details=False)
    router = cluster.router()
    router.chat(msgs("x"))
    router.chat(msgs("x"))
    assert router.stats()["http://a:8000/v1"].cached_tokens == 0
    assert router.metrics()["http://a:8000/v1"].hits > 0  # the server did hit; /metrics says so


def test_stream_sets_include_usage_and_reads_the_final_chunk(cluster: Cluster) -> None:
    router = cluster.router()
    list(router.stream_chat(msgs("x"), max_tokens=3))
    chunks = list(
        router.stream_chat(
            msgs("x"), max_tokens=3, extra_body={"stream_options": {"continuous_usage_stats": True}}
        )
    )
    body = next(f for f in cluster.fakes.values() if f.api_requests()).api_requests()[-1].body
    assert body["stream"] is True
    assert body["stream_options"] == {"continuous_usage_stats": True, "include_usage": True}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello from a." or text.startswith("Hello from")
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0
    stats = sum(s.cached_tokens for s in router.stats().values())
    assert stats == chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert all(s.in_flight == 0 for s in router.stats().values())


def test_complete_and_tokenize_use_the_right_paths(cluster: Cluster) -> None:
    router = cluster.router(policy="round_robin")
    reply = router.complete("Once upon a time", max_tokens=2)
    assert reply["choices"][0]["text"]
    tokens = router.tokenize("Hello world")
    assert tokens == FakeVllm.tokenize_text("Hello world")
    chat_tokens = router.tokenize([{"role": "user", "content": "hi"}])
    assert chat_tokens == FakeVllm.tokenize_text(
        FakeVllm.render([{"role": "user", "content": "hi"}])
    )
    paths = {r.path for f in cluster.fakes.values() for r in f.requests}
    assert paths == {"/v1/completions", "/tokenize"}  # /tokenize at the root, not /v1


def test_health_and_metrics_live_at_the_server_root(cluster: Cluster) -> None:
    router = cluster.router()
    router.chat(msgs("x"))
    router.chat(msgs("x"))
    assert router.check_health() == dict.fromkeys(URLS, True)
    metrics = router.metrics()
    assert sum(m.queries for m in metrics.values() if m) > 0
    hits = sum(m.hits for m in metrics.values() if m)
    assert hits == sum(s.cached_tokens for s in router.stats().values()) > 0
    paths = Counter(r.path for f in cluster.fakes.values() for r in f.requests)
    assert paths["/health"] == 3 and paths["/metrics"] == 3
    assert not any(p.startswith("/v1/health") or p.startswith("/v1/metrics") for p in paths)


def test_unhealthy_endpoint_is_skipped_until_it_recovers(cluster: Cluster) -> None:
    router = cluster.router()
    cluster["b"].engine_dead = True
    cluster["c"].die()
    assert router.check_health() == {URLS[0]: True, URLS[1]: False, URLS[2]: False}
    for i in range(6):
        router.chat(msgs(f"doc {i}"))
    assert cluster.served_by() == Counter({"a": 6, "b": 0, "c": 0})
    cluster["b"].engine_dead = False
    cluster["c"].revive()
    assert all(router.check_health().values())
    assert {s.state for s in router.stats().values()} == {"closed"}


def test_failover_from_a_dead_endpoint(cluster: Cluster) -> None:
    router = cluster.router(policy="round_robin")
    cluster["a"].die()
    for _ in range(4):
        assert router.chat(msgs("x"))["choices"]
    stats = router.stats()
    assert stats[URLS[0]].failures >= 1 and stats[URLS[0]].prompt_tokens == 0
    assert stats[URLS[1]].prompt_tokens + stats[URLS[2]].prompt_tokens > 0


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_retries_on_429_and_5xx(status: int) -> None:
    cluster = Cluster(n=1)
    cluster["a"].fail(status, times=2)
    router = cluster.router()
    assert router.chat(msgs("x"))["choices"]
    assert len(cluster["a"].requests) == 3
    assert router.stats()[URLS[0]].failures == 2


def test_a_4xx_is_not_retried() -> None:
    cluster = Cluster(n=1)
    cluster["a"].fail(400)
    router = cluster.router()
    with pytest.raises(BackendError, match="HTTP 400"):
        router.chat(msgs("x"))
    assert len(cluster["a"].requests) == 1
    assert router.stats()[URLS[0]].state == "closed"


def test_a_hung_endpoint_times_out_and_fails_over(cluster: Cluster) -> None:
    router = cluster.router(policy="round_robin")
    cluster["a"].hang(times=1)
    reply = router.chat(msgs("x"))
    assert reply["choices"][0]["message"]["content"] in ("Hello from b.", "Hello from c.")


def test_backend_error_names_every_endpoint_tried(cluster: Cluster) -> None:
    router = cluster.router(max_attempts=5)
    cluster["a"].die()
    cluster["b"].fail(503, times=10)
    cluster["c"].hang(times=10)
    with pytest.raises(BackendError) as info:
        router.chat(msgs("x"))
    err = info.value
    for url in URLS:
        assert url in str(err)
        assert url in (err.endpoint or "")
    assert "ConnectError" in str(err) and "HTTP 503" in str(err) and "ReadTimeout" in str(err)
    assert isinstance(err.__cause__, httpx.HTTPError)


def test_circuit_breaker_opens_then_half_opens_after_the_reset_time(cluster: Cluster) -> None:
    router = cluster.router(policy="round_robin", breaker_threshold=2, breaker_reset=10)
    cluster["a"].die()
    for _ in range(6):
        router.chat(msgs("x"))
    a_attempts = router.stats()[URLS[0]].requests
    assert router.stats()[URLS[0]].state == "open"
    for _ in range(6):
        router.chat(msgs("x"))
    assert router.stats()[URLS[0]].requests == a_attempts  # open: not even tried
    cluster["a"].revive()
    cluster.clock.advance(11)
    for _ in range(3):
        router.chat(msgs("x"))
    assert router.stats()[URLS[0]].state == "closed"
    assert len(cluster["a"].api_requests()) >= 1


def test_a_failed_trial_reopens_the_breaker(cluster: Cluster) -> None:
    router = cluster.router(urls=URLS[:1], breaker_threshold=1, breaker_reset=5, max_attempts=1)
    cluster["a"].fail(503, times=2)
    with pytest.raises(BackendError):
        router.chat(msgs("x"))
    with pytest.raises(BackendError, match="no endpoint available"):
        router.chat(msgs("x"))
    cluster.clock.advance(6)
    with pytest.raises(BackendError, match="HTTP 503"):
        router.chat(msgs("x"))  # the half-open trial fails
    assert router.stats()[URLS[0]].state == "open"
    cluster.clock.advance(6)
    assert router.chat(msgs("x"))["choices"]
    assert router.stats()[URLS[0]].state == "closed"


def test_affinity_keeps_a_prefix_on_one_replica_and_spreads_prefixes(cluster: Cluster) -> None:
    router = cluster.router(policy="affinity")
    for q in range(8):
        router.chat(msgs("refund policy", question=f"question {q}?"))
    served = cluster.served_by()
    assert sorted(served.values()) == [0, 0, 8]
    for d in range(30):
        router.chat(msgs(f"document {d}"))
    assert min(cluster.served_by().values()) >= 5


def test_affinity_beats_round_robin_on_cached_tokens() -> None:
    results = {}
    for policy in ("affinity", "round_robin"):
        cluster = Cluster()
        router = cluster.router(policy=policy)
        for rnd in range(4):
            for d in range(5):  # 5 is coprime to 3: round-robin scatters each document
                router.chat(msgs(f"document {d}", question=f"q{rnd}"))
        results[policy] = sum(s.cached_tokens for s in router.stats().values())
    assert results["affinity"] > 1.5 * results["round_robin"]


def test_bounded_load_spills_a_hot_prefix(cluster: Cluster) -> None:
    router = cluster.router(policy="affinity", load_window=12, load_factor=1.0)
    served: list[str] = []
    for q in range(40):
        before = {u: s.requests for u, s in router.stats().items()}
        router.chat(msgs("the one hot document", question=f"q{q}"))
        served += [u for u, s in router.stats().items() if s.requests > before[u]]
    # at most ceil(1.0 * (12 + 1) / 3) = 5 of any 12 consecutive requests on one replica
    for i in range(len(served) - 11):
        assert max(Counter(served[i : i + 12]).values()) <= 5
    counts = Counter(served)
    assert len(counts) == 3
    assert counts.most_common(1)[0][1] >= 15  # the preferred replica still takes the most


def test_round_robin_alternates(cluster: Cluster) -> None:
    router = cluster.router(policy="round_robin")
    for _ in range(9):
        router.chat(msgs("same"))
    assert cluster.served_by() == Counter({"a": 3, "b": 3, "c": 3})


def test_warm_prefixes_short_prefix_everywhere_long_prefix_on_its_replica(cluster: Cluster) -> None:
    router = cluster.router()
    system_only = [{"role": "system", "content": SYSTEM}]
    assert router.warm_prefixes([system_only]) == 3
    assert cluster.served_by() == Counter({"a": 1, "b": 1, "c": 1})
    body = cluster["a"].api_requests()[0].body
    assert body["max_tokens"] == 1
    deep = [
        *msgs("warm document")[:1],
        {"role": "user", "content": "Documents: warm document " * 40},
    ]
    assert router.warm_prefixes([deep]) == 1
    first = router.chat(msgs("warm document"))  # the first real request already hits
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] > 200
    # warm-ups are not traffic: only the real request's usage is recorded
    assert sum(s.prompt_tokens for s in router.stats().values()) == first["usage"]["prompt_tokens"]


def test_a_replica_that_comes_back_is_warmed_again(cluster: Cluster) -> None:
    router = cluster.router()
    system_only = [{"role": "system", "content": SYSTEM}]
    router.warm_prefixes([system_only], namespace="t")
    cluster["b"].engine_dead = True
    router.check_health()
    before = len(cluster["b"].api_requests())
    cluster["b"].engine_dead = False
    router.check_health()
    after = cluster["b"].api_requests()
    assert len(after) == before + 1
    assert after[-1].body["cache_salt"] == router.cache_salt("t")
    router.check_health()  # nothing new to warm
    assert len(cluster["b"].api_requests()) == before + 1


def test_never_closes_a_client_it_was_given(cluster: Cluster) -> None:
    with cluster.router() as router:
        router.chat(msgs("x"))
    assert not cluster.client.is_closed
    owned = VllmRouter(URLS)
    inner = owned.channel.client()
    owned.close()
    assert inner.is_closed


async def test_a_stream_left_early_frees_its_replica(cluster: Cluster) -> None:
    """Leaving a stream after its first chunk closes the response and ends the request
    on its replica, for both twins (the async one inside its own generator's close)."""
    router = cluster.router()
    sync_stream = router.stream_chat(msgs("x"), namespace="t")
    next(sync_stream)
    assert sum(s.in_flight for s in router.stats().values()) == 1
    sync_stream.close()
    assert sum(s.in_flight for s in router.stats().values()) == 0
    async_stream = router.astream_chat(msgs("x"), namespace="t")
    await async_stream.__anext__()
    assert sum(s.in_flight for s in router.stats().values()) == 1
    await async_stream.aclose()
    assert sum(s.in_flight for s in router.stats().values()) == 0


# ---------------------------------------------------------------------------- async twins
async def test_async_twins(cluster: Cluster) -> None:
    router = cluster.router()
    reply = await router.achat(msgs("x"), namespace="t")
    assert reply["usage"]["prompt_tokens"] > 0
    chunks = [c async for c in router.astream_chat(msgs("x"), namespace="t")]
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert (await router.acomplete("hello there"))["choices"][0]["text"]
    assert await router.atokenize("Hello world") == FakeVllm.tokenize_text("Hello world")
    assert all(await router.acheck_health())
    assert any(m and m.hits for m in (await router.ametrics()).values())
    assert await router.awarm_prefixes(["plain text prefix"]) == 3
    await router.aclose()
    assert not cluster.aclient.is_closed
    sync_sent = [r for r in cluster.fakes.values() if r.requests]
    assert sync_sent  # every request above went through the async client's transport


async def test_async_failover_and_error(cluster: Cluster) -> None:
    router = cluster.router(policy="round_robin")
    cluster["a"].die()
    cluster["b"].fail(502, times=1)
    assert (await router.achat(msgs("x")))["choices"]
    cluster["b"].die()
    cluster["c"].die()
    with pytest.raises(BackendError, match="every endpoint tried"):
        await router.achat(msgs("y"))


async def test_async_router_owns_its_async_client() -> None:
    router = VllmRouter(URLS)
    inner = router.channel.async_client()
    async with router:
        pass
    assert inner.is_closed


def test_models_lists_the_served_ids(cluster: Cluster) -> None:
    router = cluster.router(policy="round_robin")
    assert router.models() == [cluster["a"].model]
    assert asyncio.run(router.amodels()) == [cluster["a"].model]
    paths = {r.path for f in cluster.fakes.values() for r in f.requests}
    assert paths == {"/v1/models"}


def test_a_plain_chat_sends_only_openai_fields(cluster: Cluster) -> None:
    """Without a namespace or a stream nothing vLLM-only is sent, so any
    OpenAI-compatible server (llama.cpp's) takes the body."""
    router = cluster.router(model="m1", policy="round_robin")
    router.chat([{"role": "user", "content": "hi"}], max_tokens=4, temperature=0.0)
    (sent,) = [r for f in cluster.fakes.values() for r in f.api_requests()]
    assert set(sent.body) == {"model", "messages", "max_tokens", "temperature"}
