"""KV-event mode without a caller's tokenizer: the router asks the servers' own
``/tokenize`` (once per new prefix, cached), so its block keys are the engine's."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

import httpx
import pytest

pytest.importorskip("zmq")
pytest.importorskip("msgspec")

from agent_cache.testing import FakeClock
from agent_cache.vllm import VllmRouter
from agent_cache.vllm._calls import Generation
from agent_cache.vllm._dispatch import Call
from agent_cache.vllm._tokens import RETRY_AFTER, ServerTokens
from agent_cache.vllm.testing import FakeVllm, KvEventPublisher, mock_transport

CONTEXT = " ".join(f"doc{i % 211}-{i // 211}" for i in range(1500))


def wait_for(predicate: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for KV events")
        time.sleep(0.02)


def cluster(
    n: int = 4, *, paused: bool = False, clock: FakeClock | None = None, kv: bool = True
) -> tuple[VllmRouter, list[KvEventPublisher], list[FakeVllm]]:
    pubs = [KvEventPublisher().bind() for _ in range(n)]
    for p in pubs:
        p.paused = paused
    fakes = [FakeVllm(f"r{i}", kv_events=p) for i, p in enumerate(pubs)]
    transport = mock_transport({f"r{i}:8000": f for i, f in enumerate(fakes)})
    router = VllmRouter(
        [f"http://r{i}:8000/v1" for i in range(n)],
        client=httpx.Client(transport=transport),
        async_client=httpx.AsyncClient(transport=transport),
        kv_events=[p.endpoint for p in pubs] if kv else None,
        metrics_interval=None,
        clock=clock or FakeClock(0.0),
    )
    if kv:
        router._d.start_events()
        time.sleep(0.3)  # ZMQ subscriptions take a moment to reach the publisher
    return router, pubs, fakes


def close(router: VllmRouter, pubs: list[KvEventPublisher]) -> None:
    router.close()
    for p in pubs:
        p.close()


def generations(fakes: list[FakeVllm]) -> Counter[int]:
    return Counter(
        i for i, f in enumerate(fakes) for r in f.api_requests() if r.path.endswith("completions")
    )


def test_a_replica_holding_the_prompt_by_its_events_gets_it_without_a_tokenizer() -> None:
    """Another router's traffic left the context on one replica: only its KV events
    say so. Without a tokenizer the old router never matched events (the tree, which
    never saw that traffic, sent the request elsewhere)."""
    msgs = [{"role": "user", "content": f"{CONTEXT}\nsummarize it"}]
    plain, _, _ = cluster(kv=False)
    tree_choice = plain.endpoints.index(plain.pick(msgs) or "")
    holder = (tree_choice + 1) % 4
    router, pubs, fakes = cluster()
    try:
        fakes[holder].respond(
            "POST", "/v1/chat/completions", {}, json.dumps({"messages": msgs}).encode()
        )
        index = router._d.kv_index
        assert index is not None
        wait_for(lambda: index.blocks(holder) > 0)
        reply = router.chat(msgs, max_tokens=1)
        assert generations(fakes)[holder] == 2, generations(fakes)
        prompt = FakeVllm.tokenize_text(FakeVllm.render(msgs))
        assert reply["usage"]["prompt_tokens_details"]["cached_tokens"] >= len(prompt) - 16
        assert sum(f.tokenize_calls for f in fakes) == 1
    finally:
        close(router, pubs)


def test_a_shared_prefix_is_tokenized_once_and_its_burst_stays_on_one_replica() -> None:
    system = {"role": "system", "content": f"You answer from these notes.\n{CONTEXT}"}
    router, pubs, fakes = cluster(paused=True)  # the burst is over before any event
    try:
        for k in range(8):
            router.chat([system, {"role": "user", "content": f"question {k}?"}], max_tokens=1)
        homes = generations(fakes)
        assert len(homes) == 1 and sum(homes.values()) == 8, homes
        assert sum(f.tokenize_calls for f in fakes) == 1  # the prefix, once
        tokens = router._channel.server_tokens
        assert tokens is not None and tokens.hits == 7 and tokens.calls == 1
        # what was asked: the messages before the last, without a generation prompt
        body = next(r.body for f in fakes for r in f.requests if r.path == "/tokenize")
        assert body == {"messages": [system], "add_generation_prompt": False}
    finally:
        close(router, pubs)


def test_server_token_keys_match_the_blocks_the_engine_announces() -> None:
    system = {"role": "system", "content": CONTEXT}
    router, pubs, fakes = cluster()
    index = router._d.kv_index
    assert index is not None
    try:
        router.chat([system, {"role": "user", "content": "first"}], max_tokens=1)
        home = next(iter(generations(fakes)))
        wait_for(lambda: index.blocks(home) > 0)
        call = router._calls.chat([system, {"role": "user", "content": "second"}], Generation())
        assert router._channel._tokenize_plan(call) is None  # cached: no second call
        assert call.tokens is not None and call.tokens_partial
        matched = index.lookup(call.tokens, partial=True).blocks
        assert matched[home] == len(call.tokens) // 16 > 50
        assert all(m == 0 for i, m in enumerate(matched) if i != home)
    finally:
        close(router, pubs)


def test_async_calls_use_the_servers_tokens_too() -> None:
    system = {"role": "system", "content": CONTEXT}
    router, pubs, fakes = cluster(paused=True)

    async def burst() -> None:
        for k in range(4):
            await router.achat([system, {"role": "user", "content": f"q{k}"}], max_tokens=1)

    try:
        asyncio.run(burst())
        assert len(generations(fakes)) == 1
        assert sum(f.tokenize_calls for f in fakes) == 1
    finally:
        close(router, pubs)


def test_a_server_that_cannot_tokenize_pauses_matching_and_loses_no_call() -> None:
    clock = FakeClock(0.0)
    router, pubs, fakes = cluster(clock=clock)
    for f in fakes:
        original = f.respond

        def respond(method: str, path: str, *a: Any, _o: Any = original, **kw: Any) -> Any:
            if path == "/tokenize":
                return 404, {}, b'{"detail": "Not Found"}'
            return _o(method, path, *a, **kw)

        f.respond = respond  # type: ignore[method-assign]
    try:
        msgs = [{"role": "user", "content": "hello " * 100}]
        assert router.chat(msgs, max_tokens=1)["choices"]
        assert router.chat(msgs, max_tokens=1)["choices"]  # paused: not asked again
        tokens = router._channel.server_tokens
        assert tokens is not None and tokens.failures == 1
        clock.advance(RETRY_AFTER + 1)
        router.chat(msgs, max_tokens=1)
        assert tokens.failures == 2
    finally:
        close(router, pubs)


def test_the_token_cache_is_bounded_in_entries_and_tokens() -> None:
    cache = ServerTokens(FakeClock(0.0), max_entries=2, max_tokens=25)
    for k in range(3):
        call = Call("POST", "completions", body={"prompt": f"p{k}"}, blocks=[1])
        plan = cache.plan(call)
        assert plan is not None and plan.call.body == {"prompt": f"p{k}"}
        cache.done(plan, call, list(range(10)))
    assert len(cache) == 2
    call = Call("POST", "completions", body={"prompt": "p0"}, blocks=[1])
    assert cache.plan(call) is not None  # the oldest went
    cache.done(cache.plan(call) or pytest.fail(), call, list(range(20)))
    assert len(cache) == 1  # 20 + 10 tokens pass the budget of 25


def test_the_fakes_tokenize_follows_vllms_defaults() -> None:
    fake = FakeVllm()
    client = httpx.Client(transport=mock_transport({"a:8000": fake}))

    def tok(body: dict[str, Any]) -> list[int]:
        resp = client.post("http://a:8000/tokenize", json=body)
        assert resp.status_code == 200, resp.text
        return list(resp.json()["tokens"])

    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    full = tok({"messages": msgs})
    head = tok({"messages": msgs[:1], "add_generation_prompt": False})
    assert full[: len(head)] == head and len(full) > len(head)
    assert tok({"messages": msgs, "add_generation_prompt": False}) != full
    assert tok({"messages": msgs, "add_special_tokens": True})[:2] == [1, 1]  # a second BOS
    assert (
        tok({"prompt": "hi"})[0] == 1 and tok({"prompt": "hi", "add_special_tokens": False})[0] != 1
    )
    tail = FakeVllm.tokenize_text("<|im_end|>\n<|im_start|>assistant\n", bos=False)
    assert tok({"messages": msgs, "continue_final_message": True}) == full[: -len(tail)]
    assert (
        client.post("http://a:8000/tokenize", json={"messages": msgs, "prompt": "x"}).status_code
        == 400
    )


def test_framework_calls_through_the_transport_use_the_servers_tokens() -> None:
    system = {"role": "system", "content": CONTEXT}
    router, pubs, fakes = cluster(paused=True)
    try:
        client = router.httpx_client()
        for k in range(4):
            body = {
                "model": "fake-model",
                "messages": [system, {"role": "user", "content": f"q{k}"}],
            }
            resp = client.post(f"{router.endpoints[0]}/chat/completions", json=body)
            assert resp.status_code == 200
        assert len(generations(fakes)) == 1  # the burst stays together
        assert sum(f.tokenize_calls for f in fakes) == 1
        body = next(r.body for f in fakes for r in f.requests if r.path == "/tokenize")
        assert body["model"] == "fake-model" and body["add_generation_prompt"] is False
    finally:
        close(router, pubs)
