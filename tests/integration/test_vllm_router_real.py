"""VllmRouter against real OpenAI-compatible servers on loopback.

* the real local model (SmolLM2-135M on llama.cpp, the ``llm_server`` fixture) next to a
  dead port: failover, plain and streamed generation, LangChain's ``ChatOpenAI`` and
  LlamaIndex's ``OpenAILike`` sending through the routing transport;
* the vLLM stub (:class:`~agent_cache.vllm.testing.FakeVllmServer`, real sockets) for what
  llama.cpp does not implement: ``cached_tokens``, ``/health``, ``/metrics``, a replica
  that dies or hangs, and the frameworks' cached-token fields.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from agent_cache.errors import BackendError
from agent_cache.local_llm import DEFAULT_MODEL_ALIAS
from agent_cache.vllm import VllmRouter
from agent_cache.vllm.testing import FakeVllm, FakeVllmServer

pytestmark = pytest.mark.integration

SYSTEM = "You are a terse assistant. Answer in a few words. " * 4


def _dead_url() -> str:
    with socket.socket() as sock:  # a port nobody listens on (bound, then released)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


@pytest.fixture
def real_router(llm_server: str) -> Iterator[VllmRouter]:
    dead = _dead_url()
    with VllmRouter(
        [dead, llm_server],
        policy="round_robin",
        model=DEFAULT_MODEL_ALIAS,
        timeout=120,
        backoff_initial=0.05,
    ) as router:
        yield router


# ---------------------------------------------------------------------------- llama.cpp
def test_failover_from_a_dead_port_to_the_real_model(
    real_router: VllmRouter, llm_server: str
) -> None:
    dead = real_router.endpoints[0]
    reply = real_router.chat(ask("Say hello."), max_tokens=8, temperature=0)
    text = reply["choices"][0]["message"]["content"]
    assert isinstance(text, str) and text.strip()
    assert reply["usage"]["prompt_tokens"] > 10
    stats = real_router.stats()
    assert stats[dead].failures == 1 and stats[dead].prompt_tokens == 0
    assert stats[llm_server].prompt_tokens == reply["usage"]["prompt_tokens"]
    assert stats[llm_server].cached_tokens == 0  # llama.cpp sends no prompt_tokens_details


def test_streaming_and_completions_on_the_real_model(real_router: VllmRouter) -> None:
    chunks = list(real_router.stream_chat(ask("Count to three."), max_tokens=8, temperature=0))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.strip()
    completion = real_router.complete("The capital of France is", max_tokens=4, temperature=0)
    assert completion["choices"][0]["text"] and completion["usage"]["completion_tokens"] > 0
    assert all(s.in_flight == 0 for s in real_router.stats().values())


def test_router_learns_the_real_tokenizers_chars_per_token(real_router: VllmRouter) -> None:
    """The ratio is exactly the characters the router rendered over the
    ``usage.prompt_tokens`` llama.cpp sent (SmolLM2's tokenizer and chat template: 3.5
    on this short, template-heavy prompt, not the 4.0 the router starts from)."""
    from agent_cache.vllm.prefix_tree import render_for_prefix

    assert real_router.chars_per_token == 4.0
    msgs = ask("Summarise the refund policy of a shop that sells garden furniture online.")
    reply = real_router.chat(msgs, max_tokens=2, temperature=0)
    tokens = reply["usage"]["prompt_tokens"]
    assert tokens >= 32
    learned = real_router.chars_per_token
    assert learned == len(render_for_prefix(msgs)) / tokens
    assert learned != 4.0 and 2.0 < learned < 8.0
    assert {s.chars_per_token for s in real_router.stats().values()} == {learned}


async def test_async_failover_on_the_real_model(llm_server: str) -> None:
    async with VllmRouter(
        [_dead_url(), llm_server], policy="round_robin", model=DEFAULT_MODEL_ALIAS, timeout=120
    ) as router:
        reply = await router.achat(ask("Say yes."), max_tokens=4, temperature=0)
        assert reply["choices"][0]["message"]["content"].strip()
        chunks = [c async for c in router.astream_chat(ask("Say no."), max_tokens=4)]
        assert any(c["choices"] and c["choices"][0]["delta"].get("content") for c in chunks)


def test_all_endpoints_dead_names_every_one() -> None:
    urls = [_dead_url(), _dead_url()]
    with (
        VllmRouter(urls, timeout=2, backoff_initial=0.01) as router,
        pytest.raises(BackendError) as info,
    ):
        router.chat(ask("hi"), max_tokens=2)
    assert all(u in str(info.value) for u in urls)
    assert "ConnectError" in str(info.value)


def test_langchain_chat_openai_through_the_router(real_router: VllmRouter, llm_server: str) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        base_url=llm_server,
        api_key="EMPTY",
        model=DEFAULT_MODEL_ALIAS,
        http_client=real_router.httpx_client(),
        max_retries=0,
        max_tokens=8,
        temperature=0,
        use_responses_api=False,
    )
    message = llm.invoke([("system", SYSTEM), ("user", "Say hello.")])
    assert isinstance(message.content, str) and message.content.strip()
    assert message.usage_metadata is not None and message.usage_metadata["input_tokens"] > 10
    streamed = "".join(str(c.content) for c in llm.stream([("user", "Say hi.")]))
    assert streamed.strip()
    stats = real_router.stats()
    assert stats[real_router.endpoints[0]].failures >= 1  # the dead port was tried first
    assert stats[llm_server].requests >= 2


async def test_langchain_async_through_the_router(real_router: VllmRouter, llm_server: str) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        base_url=llm_server,
        api_key="EMPTY",
        model=DEFAULT_MODEL_ALIAS,
        http_async_client=real_router.async_httpx_client(),
        max_retries=0,
        max_tokens=6,
        temperature=0,
        use_responses_api=False,
    )
    message = await llm.ainvoke([("user", "Say hello.")])
    assert str(message.content).strip()


def test_llamaindex_openai_like_through_the_router(
    real_router: VllmRouter, llm_server: str
) -> None:
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model=DEFAULT_MODEL_ALIAS,
        api_base=llm_server,
        api_key="fake",
        is_chat_model=True,
        context_window=2048,
        max_tokens=8,
        temperature=0,
        max_retries=0,
        http_client=real_router.httpx_client(),
    )
    response = llm.chat(
        [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content="Say hello.")]
    )
    assert response.message.content and response.message.content.strip()
    assert response.raw is not None and response.raw.usage.prompt_tokens > 10
    assert real_router.stats()[llm_server].prompt_tokens >= response.raw.usage.prompt_tokens


# ---------------------------------------------------------------------------- vLLM stub
@pytest.fixture
def stubs() -> Iterator[list[FakeVllmServer]]:
    servers = [FakeVllmServer(FakeVllm(name)).start() for name in "abc"]
    try:
        yield servers
    finally:
        for s in servers:
            s.stop()


def test_stub_cluster_affinity_cached_tokens_and_salt(stubs: list[FakeVllmServer]) -> None:
    with VllmRouter([s.base_url for s in stubs], salt_secret="k") as router:
        cached = []
        for q in range(5):
            reply = router.chat(
                [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": "Doc: refunds. " * 40 + f"q{q}"},
                ],
                namespace="tenant-1",
            )
            cached.append((reply["usage"]["prompt_tokens_details"] or {}).get("cached_tokens", 0))
        assert cached[0] == 0 and all(c > 0 for c in cached[1:])
        served = [len(s.fake.api_requests()) for s in stubs]
        assert sorted(served) == [0, 0, 5]
        salts = {r.body["cache_salt"] for s in stubs for r in s.fake.api_requests()}
        assert salts == {router.cache_salt("tenant-1")}
        metrics = router.metrics()
        assert sum(m.hits for m in metrics.values() if m) == sum(cached)
        assert all(router.check_health().values())


def test_stub_replica_dies_and_hangs(stubs: list[FakeVllmServer]) -> None:
    with VllmRouter(
        [s.base_url for s in stubs],
        policy="round_robin",
        timeout=0.5,
        breaker_threshold=1,
        breaker_reset=60,
        backoff_initial=0.01,
    ) as router:
        stubs[0].stop()  # a dead replica: connection refused
        stubs[1].fake.hang(seconds=2.0)  # a hung one: read timeout
        reply = router.chat(ask("hello"), max_tokens=3)
        assert reply["choices"][0]["message"]["content"].startswith("Hello from")
        states = {u: s.state for u, s in router.stats().items()}
        assert list(states.values()).count("open") >= 1
        health = router.check_health()
        assert health[stubs[0].base_url] is False and health[stubs[2].base_url] is True
        for _ in range(3):
            assert router.chat(ask("again"), max_tokens=3)["choices"]
        assert router.stats()[stubs[0].base_url].prompt_tokens == 0


def test_frameworks_see_cached_tokens_through_the_router(stubs: list[FakeVllmServer]) -> None:
    from langchain_openai import ChatOpenAI
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai_like import OpenAILike

    long_user = "Documents: shipping takes two days. " * 30 + "How long?"
    with VllmRouter([s.base_url for s in stubs]) as router:
        chat = ChatOpenAI(
            base_url=stubs[0].base_url,
            api_key="EMPTY",
            model="fake-model",
            http_client=router.httpx_client(),
            max_retries=0,
            use_responses_api=False,
        )
        first = chat.invoke([("system", SYSTEM), ("user", long_user)])
        second = chat.invoke([("system", SYSTEM), ("user", long_user)])
        assert first.usage_metadata is not None and second.usage_metadata is not None
        assert second.usage_metadata["input_token_details"]["cache_read"] > 0
        streamed = None
        for chunk in chat.stream([("system", SYSTEM), ("user", long_user)]):
            streamed = chunk if streamed is None else streamed + chunk
        assert streamed is not None and streamed.usage_metadata is not None
        assert streamed.usage_metadata["input_token_details"]["cache_read"] > 0  # via the
        # include_usage the transport adds (ChatOpenAI leaves it off for a custom base_url)

        llm = OpenAILike(
            model="fake-model",
            api_base=stubs[1].base_url,
            api_key="fake",
            is_chat_model=True,
            context_window=4096,
            max_retries=0,
            http_client=router.httpx_client(),
        )
        msgs = [
            ChatMessage(role="system", content=SYSTEM),
            ChatMessage(role="user", content=long_user),
        ]
        llm.chat(msgs)
        raw = llm.chat(msgs).raw
        assert raw is not None and raw.usage.prompt_tokens_details.cached_tokens > 0
        total = router.stats()
        assert sum(s.cached_tokens for s in total.values()) > 0
