"""The routing httpx transports that frameworks' OpenAI clients send through."""

from __future__ import annotations

import json

import httpx
import pytest

from agent_cache.errors import BackendError
from agent_cache.vllm import NAMESPACE_HEADER, VllmRouter
from agent_cache.vllm.testing import FakeVllm, mock_transport

SYSTEM = "You answer from the documents. " * 10


def body(doc: str = "d", **extra: object) -> dict[str, object]:
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Documents: {doc} " * 30 + "Q?"},
        ],
        **extra,
    }


@pytest.fixture
def setup() -> tuple[VllmRouter, dict[str, FakeVllm]]:
    fakes = {"a:8000": FakeVllm("a"), "b:8000": FakeVllm("b")}
    transport = mock_transport(fakes)
    router = VllmRouter(
        ["http://a:8000/v1", "http://b:8000/v1"],
        client=httpx.Client(transport=transport),
        async_client=httpx.AsyncClient(transport=transport),
        backoff_initial=0,
        salt_secret="s",
        metrics_interval=None,  # scraping has its own tests
    )
    return router, fakes


def sent(fakes: dict[str, FakeVllm]) -> list[tuple[str, str, object]]:
    return [(f.name, r.path, r.body) for f in fakes.values() for r in f.requests]


def test_requests_are_retargeted_and_salted(setup: tuple[VllmRouter, dict[str, FakeVllm]]) -> None:
    router, fakes = setup
    with router.httpx_client(namespace="tenant") as client:
        # the base URL can be any of the endpoints, or a placeholder with the same /v1 path
        resp = client.post(
            "http://router.invalid/v1/chat/completions",
            json=body(),
            headers={"authorization": "Bearer EMPTY"},
        )
    assert resp.status_code == 200
    assert resp.json()["choices"][0]["message"]["content"].startswith("Hello from")
    [(name, path, payload)] = sent(fakes)
    assert path == "/v1/chat/completions"
    assert isinstance(payload, dict) and payload["cache_salt"] == router.cache_salt("tenant")
    fake = next(f for f in fakes.values() if f.name == name)
    assert fake.requests[0].headers["authorization"] == "Bearer EMPTY"
    assert client.is_closed  # the caller's client is closed; the router stays usable:
    assert router.chat(body()["messages"])["choices"]  # type: ignore[arg-type]


def test_namespace_header_wins_and_is_stripped(
    setup: tuple[VllmRouter, dict[str, FakeVllm]],
) -> None:
    router, fakes = setup
    client = router.httpx_client(namespace="default-ns")
    client.post(
        "http://a:8000/v1/chat/completions", json=body(), headers={NAMESPACE_HEADER: "from-header"}
    )
    [req] = [r for f in fakes.values() for r in f.requests]
    assert req.body["cache_salt"] == router.cache_salt("from-header")
    assert NAMESPACE_HEADER not in req.headers


def test_same_prefix_same_replica_through_the_transport(
    setup: tuple[VllmRouter, dict[str, FakeVllm]],
) -> None:
    router, fakes = setup
    client = router.httpx_client()
    cached = []
    for q in range(4):
        data = client.post("http://a:8000/v1/chat/completions", json=body("x", user=f"q{q}")).json()
        cached.append((data["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0))
    assert cached[0] == 0 and all(c > 0 for c in cached[1:])
    assert sorted(len(f.api_requests()) for f in fakes.values()) == [0, 4]
    assert sum(s.cached_tokens for s in router.stats().values()) == sum(cached)


def test_streams_get_include_usage_and_usage_is_recorded(
    setup: tuple[VllmRouter, dict[str, FakeVllm]],
) -> None:
    router, fakes = setup
    client = router.httpx_client()
    for _ in range(2):
        with client.stream(
            "POST", "http://a:8000/v1/chat/completions", json=body(stream=True)
        ) as resp:
            lines = [line for line in resp.iter_lines() if line.startswith("data: {")]
    last = json.loads(lines[-1][len("data: ") :])
    assert last["choices"] == [] and last["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    payloads = [r.body for f in fakes.values() for r in f.api_requests()]
    assert all(p["stream_options"] == {"include_usage": True} for p in payloads)
    stats = router.stats().values()
    assert (
        sum(s.cached_tokens for s in stats)
        == last["usage"]["prompt_tokens_details"]["cached_tokens"]
    )
    assert all(s.in_flight == 0 for s in stats)


def test_root_paths_and_client_errors_pass_through(
    setup: tuple[VllmRouter, dict[str, FakeVllm]],
) -> None:
    router, fakes = setup
    client = router.httpx_client()
    assert client.get("http://a:8000/health").status_code == 200
    assert client.get("http://a:8000/v1/models").json()["data"][0]["id"] == "fake-model"
    bad = client.post("http://a:8000/v1/chat/completions", json={"model": "m", "messages": 3})
    assert bad.status_code == 400  # handed to the framework, not raised
    assert {path for _, path, _ in sent(fakes)} == {"/health", "/v1/models", "/v1/chat/completions"}


def test_all_replicas_down_raises_backend_error(
    setup: tuple[VllmRouter, dict[str, FakeVllm]],
) -> None:
    router, fakes = setup
    for f in fakes.values():
        f.die()
    with pytest.raises(BackendError) as info:
        router.httpx_client().post("http://a:8000/v1/chat/completions", json=body())
    assert "http://a:8000/v1" in str(info.value) and "http://b:8000/v1" in str(info.value)


async def test_async_transport(setup: tuple[VllmRouter, dict[str, FakeVllm]]) -> None:
    router, fakes = setup
    async with router.async_httpx_client(namespace="t") as client:
        first = await client.post("http://a:8000/v1/chat/completions", json=body())
        async with client.stream(
            "POST", "http://a:8000/v1/chat/completions", json=body(stream=True)
        ) as resp:
            lines = [line async for line in resp.aiter_lines() if line.startswith("data: {")]
    assert first.status_code == 200
    usage = json.loads(lines[-1][len("data: ") :])["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] > 0
    assert all(
        r.body["cache_salt"] == router.cache_salt("t")
        for f in fakes.values()
        for r in f.api_requests()
    )
    assert all(s.in_flight == 0 for s in router.stats().values())
    assert not router.channel.async_client().is_closed  # the router's own client stays open


def test_the_transport_stands_on_the_channel_not_on_the_router() -> None:
    import ast
    import inspect

    from agent_cache.vllm import transport

    tree = ast.parse(inspect.getsource(transport))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "agent_cache.vllm.router" not in imported
    private = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    }
    assert private == set()  # no one else's privates (router._d, router._calls, ...)


def test_a_transport_given_the_routers_channel_routes_like_the_router(
    setup: tuple[VllmRouter, dict[str, FakeVllm]],
) -> None:
    from agent_cache.vllm import RoutingTransport

    router, fakes = setup
    with httpx.Client(transport=RoutingTransport(router.channel, namespace="t")) as client:
        resp = client.post("http://a:8000/v1/chat/completions", json=body())
    assert resp.status_code == 200
    sent = [r for f in fakes.values() for r in f.api_requests()]
    assert [r.body["cache_salt"] for r in sent] == [router.cache_salt("t")]
