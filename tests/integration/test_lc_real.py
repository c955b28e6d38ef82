"""The LangChain adapters against a real local model (SmolLM2-135M on llama.cpp).

Model requests are counted at the HTTP layer, so "served from the cache" means the
server never saw the request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain_agent_cache import AgentCache, CachedChatModel, cache_step, cache_tool
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.globals import set_llm_cache
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from agent_cache import DEFAULT_THRESHOLD, LayeredCache
from agent_cache.local_llm import LocalLlamaServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tool_server() -> Iterator[str]:
    """SmolLM2 with llama-cpp-python's function-calling chat format (real tool calls)."""
    with LocalLlamaServer(
        n_ctx=2048, extra_args=("--chat_format", "chatml-function-calling")
    ) as server:
        yield server.base_url


@pytest.fixture
def cache(tmp_path: Path, minilm: Any) -> Iterator[LayeredCache]:
    with LayeredCache(path=tmp_path / "cache", embedder=minilm) as layered:
        yield layered


def real_llm(base_url: str, **kw: Any) -> tuple[ChatOpenAI, list[str]]:
    """ChatOpenAI on the local server, and the list of HTTP requests it makes."""
    requests: list[str] = []

    async def record(request: httpx.Request) -> None:
        requests.append(request.url.path)

    http = httpx.Client(event_hooks={"request": [lambda r: requests.append(r.url.path)]})
    ahttp = httpx.AsyncClient(event_hooks={"request": [record]})
    model = httpx.get(f"{base_url}/models", timeout=10).json()["data"][0]["id"]
    kw.setdefault("extra_body", {"max_tokens": 32})
    llm = ChatOpenAI(
        base_url=base_url,
        api_key="x",
        model=model,  # type: ignore[arg-type]
        temperature=0,
        http_client=http,
        http_async_client=ahttp,
        **kw,
    )
    return llm, requests


class Tokens(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"It is sunny and 21 C in {city}."


FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}


# ---------------------------------------------------------------- chat model
def test_paraphrase_is_served_from_the_cache(llm_server: str, cache: LayeredCache) -> None:
    llm, requests = real_llm(llm_server)
    chat = CachedChatModel(llm=llm, cache=cache)
    first = chat.invoke("What is the capital of France?")
    second = chat.invoke("What's the capital city of France?")
    assert len(requests) == 1
    assert isinstance(first.content, str) and first.content.strip()
    assert second.content == first.content
    meta = second.response_metadata["agent_cache"]
    assert meta["layer"] == "semantic" and meta["score"] >= DEFAULT_THRESHOLD
    assert first.usage_metadata and first.usage_metadata["input_tokens"] > 0
    assert second.usage_metadata and second.usage_metadata["input_tokens"] == 0


def test_multi_turn_follow_up_in_another_conversation_is_a_miss(
    llm_server: str, cache: LayeredCache
) -> None:
    llm, requests = real_llm(llm_server)
    chat = CachedChatModel(llm=llm, cache=cache)

    def conversation(country: str) -> list[Any]:
        return [
            SystemMessage("You are a geography tutor. Answer briefly."),
            HumanMessage(f"Tell me about {country}."),
            AIMessage(f"{country} is a country."),
            HumanMessage("What about its population?"),
        ]

    france = chat.invoke(conversation("France"))
    japan = chat.invoke(conversation("Japan"))
    assert len(requests) == 2, "the same follow-up in another conversation must miss"
    assert japan.response_metadata["agent_cache"]["hit"] is False
    again = chat.invoke(conversation("France"))
    assert len(requests) == 2
    assert again.content == france.content and again.response_metadata["agent_cache"]["hit"]


def test_stream_replays_a_hit_token_by_token(llm_server: str, cache: LayeredCache) -> None:
    llm, requests = real_llm(llm_server)
    chat = CachedChatModel(llm=llm, cache=cache)
    cold = "".join(str(c.content) for c in chat.stream("Name three primary colours."))
    assert len(requests) == 1 and cold.strip()
    tokens = Tokens()
    warm = list(chat.stream("Name three primary colours.", config={"callbacks": [tokens]}))
    assert len(requests) == 1
    assert len(warm) > 3 and "".join(tokens.tokens) == cold
    assert "".join(str(c.content) for c in warm) == cold


def test_concurrent_identical_streams_make_one_request(
    llm_server: str, cache: LayeredCache
) -> None:
    import threading

    llm, requests = real_llm(llm_server)
    chat = CachedChatModel(llm=llm, cache=cache)
    texts: list[str] = []
    go = threading.Barrier(3)

    def ask() -> None:
        go.wait(10)
        texts.append("".join(str(c.content) for c in chat.stream("Name a large animal.")))

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(requests) == 1 and cache.stats().stores == 1
    assert len(texts) == 3 and texts[0].strip() and texts == [texts[0]] * 3


async def test_async_invoke_and_stream_hit(llm_server: str, cache: LayeredCache) -> None:
    llm, requests = real_llm(llm_server)
    chat = CachedChatModel(llm=llm, cache=cache)
    first = await chat.ainvoke("Say hello in French.")
    chunks = [c async for c in chat.astream("Say hello in French.")]
    assert len(requests) == 1 and "".join(str(c.content) for c in chunks) == first.content


# ---------------------------------------------------------------- tool calls
def test_tool_calls_survive_a_hit(tool_server: str, cache: LayeredCache) -> None:
    llm, requests = real_llm(tool_server)
    chat = CachedChatModel(llm=llm, cache=cache)
    bound = chat.bind_tools([get_weather], tool_choice=FORCE_WEATHER)  # type: ignore[arg-type]
    first = bound.invoke("What is the weather in Paris?")
    assert first.tool_calls and first.tool_calls[0]["name"] == "get_weather"
    hit = bound.invoke("What is the weather in Paris?")
    assert len(requests) == 1
    assert hit.tool_calls == first.tool_calls
    chunks = list(bound.stream("What is the weather in Paris?"))
    merged = chunks[0]
    for c in chunks[1:]:
        merged += c
    assert len(requests) == 1 and merged.tool_calls == first.tool_calls


def test_set_llm_cache_keeps_tool_calls(tool_server: str, cache: LayeredCache) -> None:
    llm, requests = real_llm(tool_server)
    bound = llm.bind_tools([get_weather], tool_choice=FORCE_WEATHER)
    set_llm_cache(AgentCache(cache))
    try:
        first = bound.invoke("What is the weather in Oslo?")
        second = bound.invoke("What is the weather in Oslo?")
    finally:
        set_llm_cache(None)
    assert len(requests) == 1
    assert first.tool_calls and second.tool_calls == first.tool_calls
    assert second.response_metadata["agent_cache"]["layer"] == "exact"


def test_agent_repeated_tool_call_hits_the_tool_cache(
    tool_server: str, cache: LayeredCache
) -> None:
    """The model (not cached here) really emits the tool call twice; the tool runs once."""
    llm, requests = real_llm(tool_server, model_kwargs={"tool_choice": "auto"})
    runs: list[str] = []

    @tool(return_direct=True)  # llama.cpp's server rejects the follow-up turn's null content
    def weather(city: str) -> str:
        """Get the current weather for a city."""
        runs.append(city)
        return f"It is sunny and 21 C in {city}."

    agent = create_agent(llm, tools=[cache_tool(weather, ttl=600, cache=cache)])
    results = []
    for _ in range(2):
        state = agent.invoke({"messages": [("user", "What is the weather in Paris?")]})
        results.append([m.content for m in state["messages"] if isinstance(m, ToolMessage)])
    assert len(requests) == 2, "each run asked the model"
    assert results[0] and results[0] == results[1]
    assert len(runs) == 1, runs


# ---------------------------------------------------------------- sub-steps
def test_sub_step_is_reused_across_two_runs(llm_server: str, tmp_path: Path, minilm: Any) -> None:
    llm, requests = real_llm(llm_server)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Split the question into two simpler questions."), ("human", "{question}")]
    )
    question = {"question": "Compare the climates of Spain and Norway."}
    outputs = []
    for _ in range(2):  # two runs, each with a fresh cache object over the same store
        with LayeredCache(path=tmp_path / "steps", embedder=minilm) as layered:
            step = cache_step(prompt | llm | StrOutputParser(), name="decompose", cache=layered)
            outputs.append(step.invoke(question))
    assert len(requests) == 1 and outputs[0] == outputs[1] and outputs[0].strip()

    with LayeredCache(path=tmp_path / "steps", embedder=minilm) as layered:
        semantic = cache_step(
            prompt | llm | StrOutputParser(), name="decompose-s", semantic=True, cache=layered
        )
        a = semantic.invoke({"question": "How do I reset my password?"})
        b = semantic.invoke({"question": "How can I reset my password?"})
    assert len(requests) == 2 and a == b


def test_a_langchain_embeddings_as_embedder_serves_a_paraphrase(
    llm_server: str, tmp_path: Path
) -> None:
    import warnings

    from agent_cache.embedders import DEFAULT_EMBEDDER, resolve_model_path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's notice
        from langchain_community.embeddings import HuggingFaceEmbeddings

    embeddings = HuggingFaceEmbeddings(model_name=resolve_model_path(DEFAULT_EMBEDDER))
    llm, requests = real_llm(llm_server)
    chat = CachedChatModel(llm=llm, cache=LayeredCache(path=tmp_path / "lc", embedder=embeddings))
    first = chat.invoke("How do I reset my password?")
    streamed = "".join(str(c.content) for c in chat.stream("How can I reset my password?"))
    assert len(requests) == 1  # the paraphrase came from the semantic layer, streamed
    assert streamed == first.content
    again = chat.invoke("How can I reset my password?")
    assert again.response_metadata["agent_cache"]["layer"] == "semantic"
    assert again.usage_metadata is not None and again.usage_metadata["total_tokens"] == 0
