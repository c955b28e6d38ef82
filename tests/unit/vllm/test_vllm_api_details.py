"""API details read from vLLM's code: the fake follows them, the router and the
transports respect them (errors inside streams, stream_options, /v1/responses,
/tokenize fields, timeouts of long generations)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agent_cache.errors import BackendError
from agent_cache.vllm import VllmRouter
from agent_cache.vllm.testing import FakeVllm, FakeVllmServer, mock_transport

SYSTEM = "You answer from the documents. " * 10
URLS = ["http://a:8000/v1", "http://b:8000/v1"]


def messages(doc: str = "d") -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Documents: {doc} " * 30 + "Q?"},
    ]


def make(**router_kwargs: Any) -> tuple[VllmRouter, dict[str, FakeVllm], httpx.Client]:
    fakes = {"a:8000": FakeVllm("a"), "b:8000": FakeVllm("b")}
    transport = mock_transport(fakes)
    router_kwargs.setdefault("backoff_initial", 0.0)
    router = VllmRouter(
        URLS,
        client=httpx.Client(transport=transport),
        async_client=httpx.AsyncClient(transport=transport),
        salt_secret="s",
        **router_kwargs,
    )
    return router, fakes, httpx.Client(transport=transport)


def api_bodies(fakes: dict[str, FakeVllm]) -> list[Any]:
    return [r.body for f in fakes.values() for r in f.api_requests()]


# ------------------------------------------------------------------ the fake follows vLLM
def test_fake_errors_have_vllms_current_shape() -> None:
    _, fakes, client = make()
    fakes["a:8000"].fail(503)
    resp = client.post("http://a:8000/v1/chat/completions", json={"messages": messages()})
    assert resp.status_code == 503
    assert set(resp.json()) == {"error"}
    assert set(resp.json()["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"stream_options": {"include_usage": True}}, "only be defined when `stream=True`"),
        ({"cache_salt": ""}, "non-empty string"),
        ({"cache_salt": 7}, "non-empty string"),
        ({"cache_salt": "x" * 129}, "at most 128 characters"),
        ({"cache_salt": "tenant/a"}, "must not contain"),
        ({"cache_salt": "a@b"}, "must not contain"),
    ],
)
def test_fake_validates_like_vllm(extra: dict[str, Any], message: str) -> None:
    _, _, client = make()
    resp = client.post("http://a:8000/v1/chat/completions", json={"messages": messages(), **extra})
    assert resp.status_code == 400
    assert message in resp.json()["error"]["message"]


def test_fake_stream_has_usage_only_on_the_final_chunk() -> None:
    _, _, client = make()
    body = {"messages": messages(), "stream": True, "stream_options": {"include_usage": True}}
    with client.stream("POST", "http://a:8000/v1/chat/completions", json=body) as resp:
        chunks = [json.loads(x[6:]) for x in resp.iter_lines() if x.startswith("data: {")]
    assert all("usage" not in c for c in chunks[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0


def test_fake_can_fail_in_the_middle_of_a_stream() -> None:
    _, fakes, client = make()
    fakes["a:8000"].fail_stream(after=2)
    body = {"messages": messages(), "stream": True}
    with client.stream("POST", "http://a:8000/v1/chat/completions", json=body) as resp:
        assert resp.status_code == 200
        lines = [x for x in resp.iter_lines() if x.startswith("data: ")]
    assert len(lines) == 4  # two chunks, the error event, [DONE]
    assert json.loads(lines[2][6:])["error"]["code"] == 500
    assert lines[3] == "data: [DONE]"


# ------------------------------------------------------------------ errors inside streams
def test_router_stream_error_after_200_raises_and_counts_as_a_failure() -> None:
    router, fakes, _ = make(policy="round_robin")
    fakes["a:8000"].fail_stream(after=1)
    got: list[dict[str, Any]] = []
    with pytest.raises(BackendError, match="after HTTP 200: engine failed") as info:
        for chunk in router.stream_chat(messages()):
            got.append(chunk)
    assert info.value.endpoint == URLS[0]
    assert len(got) == 1  # the chunk before the error was handed on
    stats = router.stats()[URLS[0]]
    assert stats.failures == 1 and stats.in_flight == 0


async def test_async_router_stream_error_after_200_raises() -> None:
    router, fakes, _ = make(policy="round_robin")
    fakes["a:8000"].fail_stream(after=0)
    with pytest.raises(BackendError, match="after HTTP 200"):
        async for _ in router.astream_chat(messages()):
            pass
    assert router.stats()[URLS[0]].failures == 1


def test_transport_counts_a_stream_error_as_a_failure() -> None:
    router, fakes, _ = make(policy="round_robin")
    fakes["a:8000"].fail_stream(after=1)
    client = router.httpx_client()
    body = {"model": "m", "messages": messages(), "stream": True}
    with client.stream("POST", "http://a:8000/v1/chat/completions", json=body) as resp:
        list(resp.iter_lines())  # the framework's client sees the error event itself
    stats = router.stats()[URLS[0]]
    assert stats.failures == 1 and stats.in_flight == 0


# ------------------------------------------------------------------ stream_options
def test_router_sends_stream_options_only_on_streaming_calls() -> None:
    router, fakes, _ = make()
    extra = {"stream_options": {"include_usage": True}}
    reply = router.chat(messages(), extra_body=extra)  # vLLM would answer 400
    assert reply["usage"]["prompt_tokens"] > 0
    list(router.stream_chat(messages(), extra_body=extra))
    first, second = api_bodies(fakes)
    assert "stream_options" not in first and "stream" not in first
    assert second["stream_options"] == {"include_usage": True}


def test_transport_drops_stream_options_from_non_streaming_bodies() -> None:
    router, fakes, _ = make()
    client = router.httpx_client()
    body = {"model": "m", "messages": messages(), "stream_options": {"include_usage": True}}
    resp = client.post("http://a:8000/v1/chat/completions", json=body)
    assert resp.status_code == 200
    assert "stream_options" not in api_bodies(fakes)[0]


# ------------------------------------------------------------------ /v1/responses
def responses_body(doc: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "instructions": SYSTEM, "input": f"Documents: {doc} " * 30, **extra}


def test_responses_get_cache_salt_affinity_and_recorded_usage() -> None:
    router, fakes, _ = make()
    client = router.httpx_client(namespace="tenant")
    for _ in range(3):
        resp = client.post("http://a:8000/v1/responses", json=responses_body("same"))
        assert resp.status_code == 200
    served = [f.name for f in fakes.values() for _ in f.api_requests()]
    assert len(set(served)) == 1  # one prefix, one replica
    assert all(b["cache_salt"] == router.cache_salt("tenant") for b in api_bodies(fakes))
    stats = router.stats()
    assert sum(s.prompt_tokens for s in stats.values()) > 0
    assert sum(s.cached_tokens for s in stats.values()) > 0


def test_responses_stream_usage_is_read_from_response_completed() -> None:
    router, fakes, _ = make()
    client = router.httpx_client()
    body = responses_body("x", stream=True)
    for _ in range(2):
        with client.stream("POST", "http://a:8000/v1/responses", json=body) as resp:
            list(resp.iter_lines())
    assert all("stream_options" not in b for b in api_bodies(fakes))
    stats = router.stats().values()
    assert sum(s.cached_tokens for s in stats) > 0 and all(s.in_flight == 0 for s in stats)


# ------------------------------------------------------------------ /tokenize
def test_tokenize_passes_tools_and_chat_template_kwargs() -> None:
    router, fakes, _ = make()
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    kwargs = {"enable_thinking": False}
    msgs = [{"role": "user", "content": "hi"}]
    tokens = router.tokenize(msgs, tools=tools, chat_template_kwargs=kwargs)
    assert tokens == FakeVllm.tokenize_text(
        FakeVllm.render(msgs, tools=tools, template_kwargs=kwargs)
    )
    assert tokens != router.tokenize(msgs)
    body = next(r.body for f in fakes.values() for r in f.requests if r.path == "/tokenize")
    assert body["tools"] == tools and body["chat_template_kwargs"] == kwargs


# ------------------------------------------------------------------ timeouts
def test_a_long_non_streaming_generation_is_not_cut_at_the_chunk_timeout() -> None:
    router, fakes, _ = make(policy="round_robin", timeout=1.0, generation_timeout=30.0)
    fakes["a:8000"].slow(10.0)  # a 10 s answer: longer than `timeout`, within the limit
    reply = router.chat(messages())
    assert reply["choices"][0]["message"]["content"] == "Hello from a."
    assert len(fakes["b:8000"].api_requests()) == 0  # not run again on the other replica


def test_a_generation_longer_than_its_limit_fails_over() -> None:
    router, fakes, _ = make(policy="round_robin", timeout=1.0, generation_timeout=5.0)
    fakes["a:8000"].slow(10.0)
    reply = router.chat(messages())
    assert reply["choices"][0]["message"]["content"] == "Hello from b."


def test_streams_and_short_calls_keep_the_short_read_timeout() -> None:
    router, fakes, _ = make(policy="round_robin", timeout=1.0, generation_timeout=30.0)
    fakes["a:8000"].slow(10.0)  # the first chunk does not come within `timeout`
    chunks = list(router.stream_chat(messages()))
    assert chunks and router.stats()[URLS[0]].failures == 1


def test_a_slow_answer_over_a_real_socket() -> None:
    fake = FakeVllm("slow")
    with FakeVllmServer(fake) as server:
        router = VllmRouter([server.base_url], timeout=0.2, generation_timeout=5.0)
        fake.slow(0.5)
        assert router.chat(messages(), max_tokens=2)["choices"]
        router.close()
    assert len(fake.api_requests()) == 1
