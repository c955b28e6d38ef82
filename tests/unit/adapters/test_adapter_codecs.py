"""The adapters on the core's ``encode``/``decode`` (no private signal exceptions): what
has no JSON form is served and not stored, a stored entry an adapter cannot read is
evicted and recomputed, and concurrent identical misses share the leader's object."""

from __future__ import annotations

import threading
import time
from typing import Any

from langchain_agent_cache import AgentCache
from langchain_agent_cache import cache_tool as lc_cache_tool
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, Generation
from langchain_core.tools import tool
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Event
from llama_index.tools.agent_cache import cache_step, cache_tool

from agent_cache import LayeredCache
from agent_cache.keys import canonical_json
from agent_cache.testing import HashEmbedder


def _cache() -> LayeredCache:
    return LayeredCache(path=None, embedder=HashEmbedder())


class Opaque:
    """Not JSON."""


class HandleEvent(Event):
    handle: Any


# ---------------------------------------------------------------- LlamaIndex cache_step
def test_li_step_output_with_no_json_form_is_returned_not_stored() -> None:
    cache = _cache()
    runs: list[str] = []

    @cache_step(name="open", cache=cache)
    def open_handle(path: str) -> HandleEvent:
        runs.append(path)
        return HandleEvent(handle=Opaque())

    first = open_handle("/tmp/a")
    second = open_handle("/tmp/a")
    assert isinstance(first.handle, Opaque) and isinstance(second.handle, Opaque)
    assert runs == ["/tmp/a", "/tmp/a"]  # not stored, so run again
    assert cache.stats().not_stored == 2


async def test_li_async_step_output_with_no_json_form_is_returned_not_stored() -> None:
    cache = _cache()

    @cache_step(name="aopen", cache=cache)
    async def open_handle(path: str) -> HandleEvent:
        return HandleEvent(handle=Opaque())

    assert isinstance((await open_handle("/tmp/a")).handle, Opaque)
    assert cache.stats().not_stored == 1


def test_li_step_entry_it_cannot_read_is_evicted_and_recomputed() -> None:
    cache = _cache()
    runs: list[str] = []

    @cache_step(name="split", cache=cache)
    def split(text: str) -> list[str]:
        runs.append(text)
        return text.split()

    key = canonical_json({"text": "a b"})
    cache.store(key, ["not", "a", "payload"], "step:split@", "steps", verbatim=True)
    assert split("a b") == ["a", "b"]
    assert split("a b") == ["a", "b"]
    assert runs == ["a b"]  # recomputed once, then served from the fresh entry
    assert cache.stats().counters["decode_errors"] == 1


# ---------------------------------------------------------------- LlamaIndex cache_tool
def lookup_price(sku: str) -> dict[str, Any]:
    """Price of an item."""
    return {"sku": sku, "total": 2.5}


def test_li_tool_entry_it_cannot_read_is_evicted_and_recomputed() -> None:
    cache = _cache()
    priced = cache_tool(FunctionTool.from_defaults(fn=lookup_price), cache=cache)
    key = canonical_json({"sku": "A1"})
    cache.store(key, "junk", "tool:lookup_price@", "tools", verbatim=True)
    out = priced.call(sku="A1")  # was an AttributeError from the adapter
    assert out.raw_output == {"sku": "A1", "total": 2.5}
    assert cache.stats().counters["decode_errors"] == 1
    hit = cache.lookup(key, "tool:lookup_price@", "tools", verbatim=True)
    assert hit is not None and hit.response["raw_output"] == {"sku": "A1", "total": 2.5}


async def test_li_tool_async_coalesced_callers_share_the_output() -> None:
    import asyncio

    cache = _cache()
    calls: list[str] = []

    async def slow_price(sku: str) -> dict[str, Any]:
        """Price of an item."""
        calls.append(sku)
        await asyncio.sleep(0.2)
        return {"sku": sku}

    priced = cache_tool(FunctionTool.from_defaults(async_fn=slow_price), cache=cache)
    outs = await asyncio.gather(*(priced.acall(sku="B2") for _ in range(3)))
    assert calls == ["B2"]
    assert all(o is outs[0] for o in outs)


# ---------------------------------------------------------------- LangChain
def test_lc_concurrent_misses_share_an_answer_that_is_not_stored() -> None:
    agent = AgentCache(_cache())
    calls: list[int] = []

    def compute() -> list[Generation]:
        calls.append(1)
        time.sleep(0.3)
        return [ChatGeneration(message=AIMessage(""))]  # empty: never stored

    results: list[Any] = []

    def call() -> None:
        results.append(agent.fetch_result("What is RAG?", "model-x", compute))

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1  # the followers used to call the model again each
    assert sum(r.computed for r in results) == 1
    followers = [r for r in results if not r.computed]
    assert all(
        r.generations[0].message.response_metadata["agent_cache"]["coalesced"] for r in followers
    )
    assert agent.layered.lookup("What is RAG?", "model-x") is None


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_lc_tool_entry_it_cannot_read_is_evicted_and_recomputed() -> None:
    cache = _cache()
    cached = lc_cache_tool(weather, cache=cache)
    key = canonical_json({"city": "Oslo"})
    cache.store(key, {"__agent_cache__": "mystery"}, "tool:weather@", "tools", verbatim=True)
    assert cached.invoke({"city": "Oslo"}) == "sunny in Oslo"
    assert cache.stats().counters["decode_errors"] == 1
    hit = cache.lookup(key, "tool:weather@", "tools", verbatim=True)
    assert hit is not None and hit.response == "sunny in Oslo"


# ---------------------------------------------------------------- LlamaIndex CachedLLM
def _rewrite_entry(cache: LayeredCache, key: str, response: Any) -> None:
    """Overwrite a stored entry's payload in place (another writer's format)."""
    import json

    kv = cache.kv_store
    raw = kv.get(key, time.time())
    assert raw is not None
    record = json.loads(raw)
    record["r"] = response
    kv.set(key, json.dumps(record), namespace="default", expires_at=None, now=time.time())


def test_li_llm_entry_it_cannot_read_is_evicted_and_recomputed() -> None:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.llms.agent_cache import CachedLLM

    from tests.unit.llama_index.test_li_llm import CountingLLM

    cache = _cache()
    inner = CountingLLM()
    llm = CachedLLM(llm=inner, cache=cache)
    question = [ChatMessage(role="user", content="How do I reset my password?")]
    llm.chat(question)
    hit = llm.chat(question)
    key = hit.additional_kwargs["agent_cache"]["key"]
    _rewrite_entry(cache, key, {"kind": "completion", "text": "not a chat answer"})
    fresh = llm.chat(question)  # evicted, the model called, the answer stored again
    assert fresh.additional_kwargs["agent_cache"]["hit"] is False
    assert cache.stats().counters["decode_errors"] == 1
    again = llm.chat(question)
    assert again.additional_kwargs["agent_cache"]["hit"] is True
    assert inner.calls == {"chat": 2}


def test_the_adapters_bypass_reasons_are_in_the_public_error_tree() -> None:
    """No private signal exceptions: what makes a call bypass the cache is a
    ``ConfigurationError`` (bad input for a key), what cannot be stored a
    ``SerializationError`` that the adapters turn into ``NOT_STORED``."""
    from langchain_agent_cache._codec import Uncacheable as LcUncacheable
    from llama_index.llms.agent_cache._codec import Unkeyable
    from llama_index.llms.agent_cache.question import Uncacheable

    from agent_cache import ConfigurationError, SerializationError

    assert issubclass(Unkeyable, ConfigurationError)
    assert issubclass(Uncacheable, ConfigurationError)
    assert issubclass(LcUncacheable, SerializationError)
