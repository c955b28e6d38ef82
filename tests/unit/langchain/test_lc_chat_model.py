"""CachedChatModel: every path cached, hits replayed as chunks, tools and structure kept."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_agent_cache import AgentCache, CachedChatModel, chat_models
from langchain_core.language_models import BaseChatModel
from langchain_core.load import dumpd
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import (
    RunnableBinding,
    RunnableParallel,
    RunnableSequence,
    RunnableWithFallbacks,
)
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langchain_tests.unit_tests import ChatModelUnitTests
from lc_fakes import CountingChat, TokenRecorder, chat, make_layered
from pydantic import BaseModel

import agent_cache.shared as shared


def offline_openai() -> ChatOpenAI:
    """A ChatOpenAI that is never called (no network in unit tests)."""
    return ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", model="gpt-test")  # type: ignore[arg-type]


# ---------------------------------------------------------------- standard suite
class TestCachedChatModelStandard(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return CachedChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"llm": offline_openai(), "cache": make_layered()}

    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        # timeout / max_retries / api_key configure the wrapped client, not the wrapper
        return {"temperature": 0, "max_tokens": 100, "stop": []}

    @pytest.mark.xfail(
        reason="langchain-core's load(allowed_objects='all') admits only classes in its own "
        "serialization registry, never a third-party class; CachedChatModel round-trips "
        "with an explicit allow-list (test_serialized_wrapper_loads_back_without_its_cache)",
        raises=ValueError,
        strict=True,
    )
    def test_serdes(self, model: BaseChatModel, snapshot: Any) -> None:
        super().test_serdes(model, snapshot)

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        # "provider:model" goes through init_chat_model, which reads the key from the env
        return (
            {"OPENAI_API_KEY": "from-env"},
            {"llm": "openai:gpt-test"},
            {"model_name": "gpt-test"},
        )


# ---------------------------------------------------------------- invoke / batch
@pytest.fixture
def model() -> Iterator[tuple[CachedChatModel, CountingChat]]:
    inner = chat("Paris is the capital of France.", "Tokyo.", "Rome.", "Berlin.")
    yield CachedChatModel(llm=inner, cache=make_layered()), inner


def test_invoke_hit_skips_the_model_and_is_marked(model: Any) -> None:
    cached, inner = model
    first = cached.invoke("What is the capital of France?")
    second = cached.invoke("What is the capital of France?")
    assert inner.calls == 1
    assert second.content == first.content == "Paris is the capital of France."
    assert first.response_metadata["agent_cache"]["hit"] is False  # a miss: same keys
    assert second.response_metadata["agent_cache"]["layer"] == "exact"
    assert second.usage_metadata["input_tokens"] == 0


async def test_ainvoke_and_abatch(model: Any) -> None:
    cached, inner = model
    await cached.ainvoke("What is the capital of France?")
    answers = await cached.abatch(["What is the capital of France?", "Capital of Japan?"])
    assert [a.content for a in answers] == ["Paris is the capital of France.", "Tokyo."]
    assert inner.calls == 2


def test_batch_caches_each_input(model: Any) -> None:
    cached, inner = model
    cached.batch(["A?", "B?"], config={"max_concurrency": 1})
    again = cached.batch(["A?", "B?"])
    assert inner.calls == 2 and {a.content for a in again} == {
        "Paris is the capital of France.",
        "Tokyo.",
    }


def test_semantic_hit_reports_layer_and_score() -> None:
    inner = chat("Use the reset link.", "WRONG")
    cached = CachedChatModel(llm=inner, cache=make_layered())
    cached.invoke("how do I reset my password")
    hit = cached.invoke("how can I reset my password")
    assert inner.calls == 1
    meta = hit.response_metadata["agent_cache"]
    assert meta["layer"] == "semantic" and 0.75 <= meta["score"] <= 1.0
    assert meta["matched_prompt"] == "how do I reset my password"


def test_forwarded_parameters_reach_the_model_and_the_key() -> None:
    inner = chat("a", "b")
    layered = make_layered()
    CachedChatModel(llm=inner, cache=layered, temperature=0.0, max_tokens=5).invoke("q")
    assert inner.seen_kwargs[0]["temperature"] == 0.0 and inner.seen_kwargs[0]["max_tokens"] == 5
    CachedChatModel(llm=inner, cache=layered, temperature=0.0, max_tokens=9).invoke("q")
    assert inner.calls == 2  # another max_tokens is another key


# ---------------------------------------------------------------- streaming
def test_stream_miss_is_stored_and_a_hit_is_replayed_with_tokens(model: Any) -> None:
    cached, inner = model
    cold = TokenRecorder()
    streamed = list(cached.stream("Capital of France?", config={"callbacks": [cold]}))
    assert "".join(str(c.content) for c in streamed) == "Paris is the capital of France."
    assert inner.calls == 1
    warm = TokenRecorder()
    replay = list(cached.stream("Capital of France?", config={"callbacks": [warm]}))
    assert inner.calls == 1
    assert all(isinstance(c, AIMessageChunk) for c in replay)
    assert len(replay) >= 6  # word by word, not one blob
    assert "".join(warm.tokens) == "Paris is the capital of France."
    assert len(warm.runs) == 1  # one run reports the tokens (the wrapped model is silent)
    merged = replay[0]
    for c in replay[1:]:
        merged += c
    assert merged.response_metadata["agent_cache"]["layer"] == "exact"


def test_invoke_after_stream_hits(model: Any) -> None:
    cached, inner = model
    list(cached.stream("Capital of France?"))
    assert cached.invoke("Capital of France?").content == "Paris is the capital of France."
    assert inner.calls == 1


def test_abandoned_stream_is_not_stored(model: Any) -> None:
    cached, inner = model
    for _ in cached.stream("Capital of France?"):
        break
    assert cached.invoke("Capital of France?").content == "Tokyo."
    assert inner.calls == 2


async def test_astream_replays_a_hit(model: Any) -> None:
    cached, inner = model
    await cached.ainvoke("Capital of France?")
    recorder = TokenRecorder()
    chunks = [
        c async for c in cached.astream("Capital of France?", config={"callbacks": [recorder]})
    ]
    assert inner.calls == 1 and len(chunks) >= 6
    assert "".join(recorder.tokens) == "Paris is the capital of France."


def test_streaming_flag_makes_invoke_fire_tokens_on_a_hit(model: Any) -> None:
    _, inner = model
    cached = CachedChatModel(llm=inner, cache=make_layered(), streaming=True)
    cached.invoke("Capital of France?")
    recorder = TokenRecorder()
    cached.invoke("Capital of France?", config={"callbacks": [recorder]})
    assert inner.calls == 1 and "".join(recorder.tokens) == "Paris is the capital of France."


async def test_astream_events_sees_replayed_tokens(model: Any) -> None:
    cached, _ = model
    await cached.ainvoke("Capital of France?")
    events = [e async for e in cached.astream_events("Capital of France?", version="v2")]
    streamed = [e["data"]["chunk"].content for e in events if e["event"] == "on_chat_model_stream"]
    assert "".join(streamed) == "Paris is the capital of France." and len(streamed) >= 6


# ---------------------------------------------------------------- tools and structure
@tool
def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"sunny in {city}"


@tool
def get_time(city: str) -> str:
    """Get the local time in a city."""
    return "12:00"


def weather_call() -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}]
    )


def test_tool_calls_survive_a_hit_on_invoke_and_on_stream() -> None:
    inner = chat(weather_call(), weather_call(), "WRONG")
    cached = CachedChatModel(llm=inner, cache=make_layered())
    bound = cached.bind_tools([get_weather])
    assert isinstance(bound, RunnableBinding) and bound.bound is cached
    first = bound.invoke("Weather in Paris?")
    hit = bound.invoke("Weather in Paris?")
    assert inner.calls == 1
    assert (
        hit.tool_calls
        == first.tool_calls
        == [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}]
    )
    chunks = list(bound.stream("Weather in Paris?"))
    merged = chunks[0]
    for c in chunks[1:]:
        merged += c
    assert inner.calls == 1
    assert merged.tool_calls == first.tool_calls


def test_bound_tools_are_part_of_the_key() -> None:
    inner = chat(weather_call(), "It is noon.")
    cached = CachedChatModel(llm=inner, cache=make_layered())
    cached.bind_tools([get_weather]).invoke("Weather in Paris?")
    other = cached.bind_tools([get_time]).invoke("Weather in Paris?")
    assert inner.calls == 2 and other.content == "It is noon."
    assert inner.seen_kwargs[1]["tools"][0]["function"]["name"] == "get_time"


class Weather(BaseModel):
    city: str
    sunny: bool


def test_with_structured_output_is_cached() -> None:
    call = AIMessage(
        content="",
        tool_calls=[{"name": "Weather", "args": {"city": "Paris", "sunny": True}, "id": "s1"}],
    )
    inner = chat(call, "WRONG")
    cached = CachedChatModel(llm=inner, cache=make_layered())
    structured = cached.with_structured_output(Weather)
    first = structured.invoke("Weather in Paris?")
    second = structured.invoke("Weather in Paris?")
    assert inner.calls == 1
    assert first == second == Weather(city="Paris", sunny=True)


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
@pytest.mark.parametrize("include_raw", [False, True])
def test_openai_structured_output_routes_through_the_wrapper(
    method: str, include_raw: bool
) -> None:
    llm = offline_openai()
    cached = CachedChatModel(llm=llm, cache=make_layered())
    runnable = cached.with_structured_output(Weather, method=method, include_raw=include_raw)
    found: list[Any] = []

    def walk(node: Any) -> None:
        if node is cached:
            found.append(node)
            return
        assert node is not llm, "the wrapped model must not be called directly"
        children: list[Any] = []
        if isinstance(node, RunnableBinding):
            children.append(node.bound)
        if isinstance(node, RunnableSequence):
            children += node.steps
        if isinstance(node, RunnableParallel):
            children += list(node.steps__.values())
        if isinstance(node, RunnableWithFallbacks):
            children += [node.runnable, *node.fallbacks]
        for child in children:
            walk(child)

    walk(runnable)
    assert found


def test_structured_output_cached_from_openai_json_schema_parses_again() -> None:
    """ChatOpenAI's json_schema path puts a pydantic ``parsed`` object in the message;
    the cache stores its JSON and the parser rebuilds the model from it on a hit."""

    class ParsedFake(CountingChat):
        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            self._calls += 1
            msg = AIMessage(
                content='{"city": "Paris", "sunny": true}',
                additional_kwargs={"parsed": Weather(city="Paris", sunny=True)},
            )
            return ChatResult(generations=[ChatGeneration(message=msg)])

    inner = ParsedFake(messages=iter([]))
    agent = AgentCache(make_layered(), mark_hits=False)
    cached = CachedChatModel(llm=inner, cache=agent)
    cached.invoke("Weather?")
    (gen,) = cached.agent_cache.lookup_result(  # type: ignore[union-attr]
        cached._call([HumanMessage("Weather?")], None, {}).prompt,
        cached._call([HumanMessage("Weather?")], None, {}).llm_string,
    ).generations
    assert gen.message.additional_kwargs["parsed"] == {"city": "Paris", "sunny": True}  # type: ignore[attr-defined]
    from langchain_openai.chat_models.base import _oai_structured_outputs_parser

    assert _oai_structured_outputs_parser(gen.message, Weather) == Weather(
        city="Paris",  # type: ignore[arg-type]
        sunny=True,
    )
    assert inner.calls == 1


# ---------------------------------------------------------------- construction
def test_cache_argument_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    layered = make_layered()
    from_layered = CachedChatModel(llm=chat("a"), cache=layered)
    assert isinstance(from_layered.agent_cache, AgentCache)
    assert from_layered.agent_cache.layered is layered
    agent = AgentCache(layered, namespace="chat")
    assert CachedChatModel(llm=chat("a"), cache=agent).agent_cache is agent
    default = make_layered()
    monkeypatch.setattr(chat_models, "default_cache", lambda path=None: default)
    assert CachedChatModel(llm=chat("a")).agent_cache.layered is default
    assert CachedChatModel(llm=chat("a"), cache=True).agent_cache.layered is default
    assert CachedChatModel(llm=chat("a"), cache=False).agent_cache is None
    assert CachedChatModel(llm=chat("a"), cache=layered).cache is False  # LangChain's path off
    with pytest.raises(ValueError, match="takes an AgentCache, a LayeredCache, a directory"):
        CachedChatModel(llm=chat("a"), cache=42)  # type: ignore[arg-type]


def test_cache_argument_may_be_a_directory(tmp_path: Path) -> None:
    """``cache=".agent_cache"``, as ``CachedLLM`` and ``AgentCache(path)`` take it: the
    process's shared cache there."""
    where = tmp_path / "cache"
    model = CachedChatModel(llm=chat("a"), cache=str(where))
    assert model.agent_cache is not None
    assert model.agent_cache.layered is AgentCache(where).layered
    assert Path(str(model.agent_cache.layered.path)) == where.resolve()


def test_serialized_wrapper_loads_back_without_its_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.load import load

    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    default = make_layered()
    monkeypatch.setattr(shared, "default_cache", lambda path=None: default)
    monkeypatch.setattr(chat_models, "default_cache", lambda path=None: default)
    model = CachedChatModel(llm=offline_openai(), cache=make_layered(), temperature=0.0)
    data = dumpd(model)
    assert data["id"] == ["langchain_agent_cache", "chat_models", "CachedChatModel"]
    assert "cache" not in data["kwargs"] and "agent_cache" not in data["kwargs"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # load() is marked beta
        loaded = load(
            data,
            valid_namespaces=["langchain_agent_cache"],
            allowed_objects=[CachedChatModel, ChatOpenAI],
            secrets_from_env=True,
        )
    assert isinstance(loaded, CachedChatModel) and loaded.temperature == 0.0
    assert loaded.model_name == "gpt-test" and loaded.agent_cache.layered is default


def test_global_llm_cache_is_not_consulted_by_the_wrapper() -> None:
    from langchain_core.globals import set_llm_cache

    spy = AgentCache(make_layered())
    inner = chat("x", "y")
    set_llm_cache(spy)
    try:
        CachedChatModel(llm=inner, cache=make_layered(), disable_streaming=True).invoke("q")
    finally:
        set_llm_cache(None)
    # the wrapped model is called raw (no run, no LangChain cache of its own): the agent
    # cache is the one cache on this path
    assert spy.layered.stats().lookups == 0


def test_a_model_that_cannot_stream_is_split_into_chunks_and_cached() -> None:
    inner = chat("hello big world", "WRONG", disable_streaming=True)
    cached = CachedChatModel(llm=inner, cache=make_layered())
    cold = [c.content for c in cached.stream("greet")]
    warm = [c.content for c in cached.stream("greet")]
    assert "".join(cold) == "".join(warm) == "hello big world"
    assert len(cold) > 1 and inner.calls == 1
