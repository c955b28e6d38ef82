"""A LangChain chat model and a LlamaIndex chat LLM, routed through the router, keep each
conversation (session) on one replica, and each turn reuses the previous turn's blocks."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest

from agent_cache.vllm import SESSION_HEADER, VllmRouter
from agent_cache.vllm.testing import FakeVllm, mock_transport

URLS = ["http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"]
SYSTEM = "You are a planning agent. Think step by step and call tools when needed. " * 4


def cluster() -> tuple[VllmRouter, dict[str, FakeVllm]]:
    fakes = {f"{c}:8000": FakeVllm(c) for c in "abc"}
    transport = mock_transport(fakes)
    router = VllmRouter(
        URLS,
        client=httpx.Client(transport=transport),
        async_client=httpx.AsyncClient(transport=transport),
        metrics_interval=None,
        backoff_initial=0.0,
    )
    return router, fakes


def replicas_by_session(fakes: dict[str, FakeVllm]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in fakes.values():
        for r in f.api_requests():
            assert SESSION_HEADER not in r.headers
            user = next(m["content"] for m in r.body["messages"] if m["role"] == "user")
            out.setdefault(user.split(":")[0], set()).add(f.name)
    return out


def test_langchain_chat_model_keeps_each_run_on_its_replica() -> None:
    pytest.importorskip("langchain_openai")
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_openai import ChatOpenAI

    router, fakes = cluster()
    cached: list[int] = []
    for run in range(4):
        llm = ChatOpenAI(
            base_url=URLS[0],
            api_key="x",
            model="fake-model",
            http_client=router.httpx_client(),
            default_headers={SESSION_HEADER: f"run-{run}"},  # one agent run = one session
            max_retries=0,
            use_responses_api=False,
        )
        history: list[object] = [SystemMessage(SYSTEM), HumanMessage(f"run {run}: plan the task")]
        for step in range(3):
            reply = llm.invoke(history)
            usage = reply.usage_metadata or {}
            cached.append(usage.get("input_token_details", {}).get("cache_read", 0))
            history += [AIMessage(reply.content), HumanMessage(f"tool result {step} " * 10)]
    sessions = replicas_by_session(fakes)
    assert len(sessions) == 4 and all(len(r) == 1 for r in sessions.values())
    assert len({next(iter(r)) for r in sessions.values()}) >= 2  # runs spread over replicas
    steps = [c for i, c in enumerate(cached) if i % 3]  # every step after the first
    assert all(c > 0 for c in steps)  # reuses the previous step's blocks, answer included


def test_llamaindex_chat_llm_keeps_each_conversation_on_its_replica() -> None:
    pytest.importorskip("llama_index.llms.openai_like")
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai_like import OpenAILike

    router, fakes = cluster()
    for conv in range(3):
        llm = OpenAILike(
            model="fake-model",
            api_base=URLS[0],
            api_key="x",
            is_chat_model=True,
            http_client=router.httpx_client(session_id=f"chat-{conv}"),
            max_retries=0,
        )
        history = [ChatMessage(role="system", content=SYSTEM)]
        for turn in range(3):
            history.append(ChatMessage(role="user", content=f"conv {conv}: question {turn}"))
            reply = llm.chat(history)
            history.append(reply.message)
    sessions = replicas_by_session(fakes)
    assert len(sessions) == 3 and all(len(r) == 1 for r in sessions.values())
    served = Counter(f.name for f in fakes.values() for _ in f.api_requests())
    assert sum(served.values()) == 9
