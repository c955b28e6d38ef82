"""AgentCache: LangChain's BaseCache contract, scope, sampling, serialization."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from langchain_agent_cache import AgentCache
from langchain_core.caches import BaseCache
from langchain_core.globals import set_llm_cache
from langchain_core.load import dumps
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, Generation
from langchain_tests.integration_tests import AsyncCacheTestSuite, SyncCacheTestSuite
from lc_fakes import chat, make_layered
from pydantic import BaseModel

from agent_cache import ConfigurationError, LayeredCache
from agent_cache.testing import HashEmbedder

LLM = "model=fake---[('stop', None)]"


def prompt_of(*messages: object) -> str:
    return dumps(list(messages))


class RecordingEmbedder:
    """Remembers every text it embeds."""

    name = "recording"

    def __init__(self) -> None:
        self.inner = HashEmbedder(dim=256)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def agent_cache() -> Iterator[AgentCache]:
    with AgentCache(make_layered()) as cache:
        yield cache


# ---------------------------------------------------------------- standard suites
class TestAgentCacheSync(SyncCacheTestSuite):
    @pytest.fixture
    def cache(self) -> BaseCache:
        return AgentCache(make_layered())


class TestAgentCacheAsync(AsyncCacheTestSuite):
    @pytest.fixture
    async def cache(self) -> BaseCache:
        return AgentCache(make_layered())


# ---------------------------------------------------------------- what is stored
def tool_call_generation() -> ChatGeneration:
    msg = AIMessage(
        content="",
        tool_calls=[{"name": "get_weather", "args": {"city": "Oslo", "days": 2}, "id": "c1"}],
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
        additional_kwargs={"refusal": None},
    )
    return ChatGeneration(message=msg, generation_info={"finish_reason": "tool_calls"})


def test_every_chat_generation_round_trips_with_tool_calls_and_usage() -> None:
    cache = AgentCache(make_layered(), mark_hits=False)
    gens = [tool_call_generation(), ChatGeneration(message=AIMessage("second answer"))]
    prompt = prompt_of(HumanMessage("weather in Oslo?"))
    cache.update(prompt, LLM, gens)
    assert cache.lookup(prompt, LLM) == gens


def test_stored_value_is_langchain_json_not_pickle(agent_cache: AgentCache) -> None:
    prompt = prompt_of(HumanMessage("weather in Oslo?"))
    agent_cache.update(prompt, LLM, [tool_call_generation()])
    hit = agent_cache.layered.lookup(
        "weather in Oslo?", LLM, "default", context=agent_cache._plan(prompt, LLM).context
    )
    assert hit is not None
    record = hit.response
    assert record["v"] == 1
    (stored,) = record["generations"]
    assert stored["lc"] == 1 and stored["id"][-1] == "ChatGeneration"
    assert stored["kwargs"]["message"]["kwargs"]["tool_calls"][0]["args"] == {
        "city": "Oslo",
        "days": 2,
    }


def test_hit_is_marked_and_reports_zero_new_tokens(agent_cache: AgentCache) -> None:
    prompt = prompt_of(HumanMessage("weather in Oslo?"))
    agent_cache.update(prompt, LLM, [tool_call_generation()])
    (gen,) = agent_cache.lookup(prompt, LLM) or []
    assert isinstance(gen, ChatGeneration) and isinstance(gen.message, AIMessage)
    meta = gen.message.response_metadata["agent_cache"]
    assert meta["layer"] == "exact" and meta["score"] is None
    assert meta["saved_usage"]["total_tokens"] == 19
    assert gen.message.usage_metadata == {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    assert gen.message.tool_calls[0]["args"] == {"city": "Oslo", "days": 2}


class Answer(BaseModel):
    city: str
    temp_c: float


def test_structured_output_parsed_model_is_stored_as_json() -> None:
    cache = AgentCache(make_layered(), mark_hits=False)
    parsed = Answer(city="Oslo", temp_c=3.5)
    msg = AIMessage(content='{"city": "Oslo", "temp_c": 3.5}', additional_kwargs={"parsed": parsed})
    prompt = prompt_of(HumanMessage("structured weather"))
    cache.update(prompt, LLM, [ChatGeneration(message=msg)])
    (gen,) = cache.lookup(prompt, LLM) or []
    assert gen.message.additional_kwargs["parsed"] == {"city": "Oslo", "temp_c": 3.5}  # type: ignore[attr-defined]


def test_unserializable_generation_is_served_but_not_stored(
    agent_cache: AgentCache, caplog: pytest.LogCaptureFixture
) -> None:
    msg = AIMessage(content="ok", additional_kwargs={"handle": object()})
    prompt = prompt_of(HumanMessage("keep it"))
    with caplog.at_level(logging.WARNING, logger="agent_cache.langchain"):
        agent_cache.update(prompt, LLM, [ChatGeneration(message=msg)])
    assert agent_cache.lookup(prompt, LLM) is None
    assert "not cached" in caplog.text


def test_empty_answer_is_not_stored(agent_cache: AgentCache) -> None:
    prompt = prompt_of(HumanMessage("say nothing"))
    agent_cache.update(prompt, LLM, [ChatGeneration(message=AIMessage(""))])
    assert agent_cache.lookup(prompt, LLM) is None


def test_load_allow_list_refuses_other_classes(
    agent_cache: AgentCache, caplog: pytest.LogCaptureFixture
) -> None:
    """A tampered entry naming a non-allowed class is a miss, never instantiated."""
    evil = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain_core", "prompts", "prompt", "PromptTemplate"],
        "kwargs": {"template": "{x}", "input_variables": ["x"]},
    }
    agent_cache.layered.store("tampered", {"v": 1, "generations": [evil]}, LLM)
    with caplog.at_level(logging.WARNING, logger="agent_cache.langchain"):
        assert agent_cache.lookup("tampered", LLM) is None
    assert "unreadable" in caplog.text


# ---------------------------------------------------------------- scope
def conversation(topic: str, follow_up: str) -> str:
    return prompt_of(
        SystemMessage("You are a geography tutor."),
        HumanMessage(f"Tell me about {topic}."),
        AIMessage(f"{topic} is a country."),
        HumanMessage(follow_up),
    )


def test_same_follow_up_in_another_conversation_is_a_miss(agent_cache: AgentCache) -> None:
    agent_cache.update(
        conversation("France", "What about its population?"),
        LLM,
        [Generation(text="About 68 million.")],
    )
    assert agent_cache.lookup(conversation("Japan", "What about its population?"), LLM) is None
    hit = agent_cache.lookup(conversation("France", "what about its  population?"), LLM)
    assert hit is not None and hit[0].text == "About 68 million."


def test_paraphrase_in_the_same_conversation_is_a_semantic_hit() -> None:
    embedder = RecordingEmbedder()
    cache = AgentCache(make_layered(embedder=embedder))
    cache.update(
        conversation("France", "How many people live in France?"),
        LLM,
        [ChatGeneration(message=AIMessage("About 68 million."))],
    )
    found = cache.lookup_result(conversation("France", "How many people live in France now?"), LLM)
    assert found is not None and found.hit.layer == "semantic"
    assert found.generations[0].message.response_metadata["agent_cache"]["score"] > 0.75  # type: ignore[attr-defined]
    # only the question was embedded, never the serialized message list
    assert embedder.texts and all(not t.lstrip().startswith(("[", "{")) for t in embedder.texts)
    assert set(embedder.texts) == {
        "How many people live in France?",
        "How many people live in France now?",
    }


def test_system_prompt_and_tool_results_are_scope() -> None:
    cache = AgentCache(make_layered())
    base = [
        SystemMessage("Be terse."),
        HumanMessage("Weather in Oslo?"),
        AIMessage("", tool_calls=[{"name": "w", "args": {"c": "Oslo"}, "id": "a1"}]),
        ToolMessage("rain", tool_call_id="a1"),
    ]
    cache.update(prompt_of(*base), LLM, [Generation(text="Rainy.")])
    # same conversation with other random tool-call ids: same scope
    renamed = [
        *base[:2],
        AIMessage("", tool_calls=[{"name": "w", "args": {"c": "Oslo"}, "id": "zz"}]),
        ToolMessage("rain", tool_call_id="zz"),
    ]
    assert cache.lookup(prompt_of(*renamed), LLM) is not None
    other_result = [*base[:3], ToolMessage("sun", tool_call_id="a1")]
    assert cache.lookup(prompt_of(*other_result), LLM) is None
    other_system = [SystemMessage("Be verbose."), *base[1:]]
    assert cache.lookup(prompt_of(*other_system), LLM) is None


def test_llm_string_is_part_of_the_key(agent_cache: AgentCache) -> None:
    prompt = prompt_of(HumanMessage("hello"))
    agent_cache.update(prompt, LLM, [Generation(text="hi")])
    assert agent_cache.lookup(prompt, LLM + "tools=[search]") is None
    assert agent_cache.lookup(prompt, LLM) is not None


# ---------------------------------------------------------------- sampling policy
HOT = "model=fake---[('stop', None), ('temperature', 0.9)]"


def test_sampled_calls_are_cached_by_default(agent_cache: AgentCache) -> None:
    agent_cache.update("a poem", HOT, [Generation(text="roses")])
    assert agent_cache.lookup("a poem", HOT) is not None


def test_skip_policy_neither_reads_nor_writes_sampled_calls() -> None:
    layered = make_layered()
    cache = AgentCache(layered, sampling="skip")
    cache.update("a poem", HOT, [Generation(text="roses")])
    assert layered.stats().stores == 0
    cache.update("a poem", LLM, [Generation(text="roses")])  # temperature unknown: cached
    assert cache.lookup("a poem", LLM) is not None
    assert cache.lookup("a poem", HOT) is None


def test_n_samples_collects_k_answers_then_rotates() -> None:
    cache = AgentCache(make_layered(), sampling="n_samples", n_samples=2)
    assert cache.lookup("a poem", HOT) is None
    cache.update("a poem", HOT, [Generation(text="roses")])
    assert cache.lookup("a poem", HOT) is None  # one of two: still a miss
    cache.update("a poem", HOT, [Generation(text="violets")])
    served = [(cache.lookup("a poem", HOT) or [Generation(text="?")])[0].text for _ in range(4)]
    assert served == ["roses", "violets", "roses", "violets"]


def test_temperature_zero_is_cached_even_with_skip() -> None:
    cold = "model=fake---[('stop', None), ('temperature', 0.0)]"
    cache = AgentCache(make_layered(), sampling="skip")
    cache.update("a poem", cold, [Generation(text="roses")])
    assert cache.lookup("a poem", cold) is not None


# ---------------------------------------------------------------- through LangChain
def test_set_llm_cache_serves_the_second_invoke_without_a_model_call() -> None:
    model = chat("Paris.", "WRONG")
    set_llm_cache(AgentCache(make_layered()))
    try:
        first = model.invoke("Capital of France?")
        second = model.invoke("capital of  france?")
    finally:
        set_llm_cache(None)
    assert model.calls == 1
    assert first.content == second.content == "Paris."
    assert second.response_metadata["agent_cache"]["layer"] == "exact"


async def test_async_paths_through_a_model() -> None:
    model = chat("Paris.", "WRONG")
    model_cache = AgentCache(make_layered())
    model.cache = model_cache
    await model.ainvoke("Capital of France?")
    again = await model.ainvoke("Capital of France?")
    assert model.calls == 1 and again.content == "Paris."
    await model_cache.aclear()
    assert (
        await model_cache.alookup(
            prompt_of(HumanMessage("Capital of France?")), model._get_llm_string()
        )
        is None
    )


# ---------------------------------------------------------------- housekeeping
def test_clear_removes_only_its_namespace() -> None:
    layered = make_layered()
    cache = AgentCache(layered, namespace="chat")
    cache.update("q", LLM, [Generation(text="a")])
    layered.store("tool-args", "tool result", "tool:x@", namespace="tools")
    cache.clear()
    assert cache.lookup("q", LLM) is None
    assert layered.lookup("tool-args", "tool:x@", namespace="tools") is not None


def test_repr_is_stable_so_llm_strings_do_not_change() -> None:
    a, b = AgentCache(make_layered()), AgentCache(make_layered())
    assert repr(a) == repr(b) == "AgentCache(namespace='default', sampling='cache')"


def test_bad_arguments_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        AgentCache(make_layered(), sampling="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        AgentCache(make_layered(), n_samples=0)
    with pytest.raises(ConfigurationError):
        AgentCache(make_layered(), path=None)
    with pytest.raises(ConfigurationError):
        AgentCache(42)  # type: ignore[arg-type]


def test_a_path_is_the_process_cache_for_that_directory(tmp_path: Path) -> None:
    # AgentCache(".agent_cache"), the SQLiteCache(".langchain.db") habit, and
    # AgentCache(path=...) are the cache every adapter's default opens there: one object
    from agent_cache import default_cache

    where = tmp_path / "shared"
    by_position, by_keyword = AgentCache(str(where)), AgentCache(path=where)
    assert by_position.layered is by_keyword.layered is default_cache(where)
    by_position.close()  # not its own: the shared cache stays open
    assert default_cache(where) is by_keyword.layered


def test_builds_its_own_core_cache_and_closes_only_that(tmp_path: object) -> None:
    own = AgentCache(path=None, embedder=HashEmbedder())
    assert isinstance(own.layered, LayeredCache) and own.layered.path is None
    own.update("q", LLM, [Generation(text="a")])
    assert own.lookup("q", LLM) is not None
    own.close()
    shared = make_layered()
    AgentCache(shared).close()
    shared.store("still", "open")  # a cache passed in is never closed
    assert shared.lookup("still") is not None


def test_replicas_behind_other_urls_and_keys_share_entries() -> None:
    from langchain_openai import ChatOpenAI

    def llm_string(**kw: object) -> str:
        args: dict[str, object] = {
            "base_url": "http://gpu-1:8000/v1",
            "api_key": "k1",
            "model": "m",
            "temperature": 0.0,
        }
        args.update(kw)
        return ChatOpenAI(**args)._get_llm_string()  # type: ignore[arg-type]

    cache = AgentCache(make_layered())
    cache.update("q", llm_string(), [Generation(text="a")])
    assert (
        cache.lookup(
            "q",
            llm_string(base_url="http://gpu-2:8000/v1", api_key="k2", timeout=30, max_retries=5),
        )
        is not None
    )
    assert cache.lookup("q", llm_string(model="other")) is None
    assert cache.lookup("q", llm_string(temperature=0.5)) is None
    strict = AgentCache(make_layered(), ignore_fields=frozenset())
    strict.update("q", llm_string(), [Generation(text="a")])
    assert strict.lookup("q", llm_string(base_url="http://gpu-2:8000/v1")) is None
