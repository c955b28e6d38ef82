"""LlamaIndex adapters against the real local model (SmolLM2 on llama.cpp) and real MiniLM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools import FunctionTool
from llama_index.embeddings.huggingface import HuggingFaceEmbedding
from llama_index.llms.agent_cache import CachedLLM, CacheHitEvent, query_cache_info
from llama_index.llms.openai_like import OpenAILike
from llama_index.postprocessor.agent_cache import StablePrefixPostprocessor
from llama_index.tools.agent_cache import cache_tool

from agent_cache import LayeredCache
from agent_cache.embedders import DEFAULT_EMBEDDER, resolve_model_path

pytestmark = pytest.mark.integration

FAQ = {
    "faq-password": "To reset your password, open Settings > Account and click 'Reset password'.",
    "faq-cancel": "Orders can be cancelled from the Orders page within 24 hours of purchase.",
    "faq-shipping": "Standard shipping takes 3 to 5 business days.",
}
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}


class Hits(BaseEventHandler):
    events: list[CacheHitEvent] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Hits"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, CacheHitEvent):
            self.events.append(event)


@pytest.fixture
def hits() -> Iterator[Hits]:
    handler = Hits()
    get_dispatcher().add_event_handler(handler)
    yield handler
    get_dispatcher().event_handlers.remove(handler)


@pytest.fixture(scope="module")
def model(llm_server: str) -> OpenAILike:
    model_id = httpx.get(f"{llm_server}/models", timeout=10).json()["data"][0]["id"]
    return OpenAILike(
        api_base=llm_server,
        api_key="x",
        model=model_id,
        is_chat_model=True,
        is_function_calling_model=True,
        context_window=2048,
        max_tokens=32,
        temperature=0.0,
    )


@pytest.fixture
def cache(tmp_path: Path, minilm: Any) -> Iterator[LayeredCache]:
    with LayeredCache(path=tmp_path / "cache", embedder=minilm) as c:
        yield c


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    embed = HuggingFaceEmbedding(model_name=resolve_model_path(DEFAULT_EMBEDDER))
    nodes = [TextNode(id_=k, text=v) for k, v in FAQ.items()]
    return VectorStoreIndex(nodes, embed_model=embed)


class OrderedRetriever(BaseRetriever):
    """The index's retriever, with its results put in a chosen (worst-case) order."""

    def __init__(self, index: VectorStoreIndex, order: str) -> None:
        super().__init__()
        self._inner = index.as_retriever(similarity_top_k=3)
        self._order = order

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        nodes = self._inner.retrieve(query_bundle)
        if self._order == "reversed":
            return nodes[::-1]
        return sorted(nodes, key=lambda n: n.node.node_id, reverse=True)  # "id-desc"


def test_query_engine_serves_paraphrase_and_stable_order(
    model: OpenAILike, cache: LayeredCache, index: VectorStoreIndex, hits: Hits
) -> None:
    llm = CachedLLM(llm=model, cache=cache)
    post = [StablePrefixPostprocessor()]

    stable = index.as_query_engine(llm=llm, similarity_top_k=3, node_postprocessors=post)
    first = stable.query("How do I reset my password?")
    assert cache.stats().misses == 1 and str(first).strip()

    # the same question, retrieval in another order: the postprocessor restores the context
    reordered = RetrieverQueryEngine.from_args(
        OrderedRetriever(index, "reversed"), llm=llm, node_postprocessors=post
    )
    assert str(reordered.query("How do I reset my password?")) == str(first)
    assert hits.events[-1].layer == "exact"

    # a paraphrase: the question is what the semantic layer matched
    paraphrase = stable.query("How can I reset my password?")
    assert str(paraphrase) == str(first)
    assert hits.events[-1].layer == "semantic"
    assert hits.events[-1].matched_prompt == "How do I reset my password?"
    assert cache.stats().misses == 1  # one real model call so far

    # without the postprocessor another order is another context: a real call
    unordered = RetrieverQueryEngine.from_args(OrderedRetriever(index, "id-desc"), llm=llm)
    unordered.query("How do I reset my password?")
    assert cache.stats().misses == 2


def test_concurrent_identical_streams_make_one_request(
    model: OpenAILike, cache: LayeredCache
) -> None:
    import asyncio

    llm = CachedLLM(llm=model, cache=cache)
    ask = [ChatMessage(role="user", content="Name a large animal.")]

    async def one() -> str:
        return "".join([r.delta or "" async for r in await llm.astream_chat(ask)])

    async def run() -> list[str]:
        return list(await asyncio.gather(one(), one(), one()))

    texts = asyncio.run(run())
    assert texts[0].strip() and texts == [texts[0]] * 3
    stats = cache.stats()
    assert stats.stores == 1 and stats.coalesced == 2


def test_stream_replay_and_async_paths(model: OpenAILike, cache: LayeredCache) -> None:
    import asyncio

    llm = CachedLLM(llm=model, cache=cache)
    ask = [ChatMessage(role="user", content="Name a planet of the solar system.")]
    live = list(llm.stream_chat(ask))
    replay = list(llm.stream_chat(ask))
    text = live[-1].message.content or ""
    assert len(live) > 1 and text.strip()
    assert "".join(r.delta or "" for r in replay) == text
    assert len(replay) > 1 and replay[-1].additional_kwargs["agent_cache"]["layer"] == "exact"

    async def run() -> tuple[str, str, str]:
        prompt = "Write one word that rhymes with cat."
        a = await llm.acomplete(prompt)
        b = await llm.acomplete(prompt)
        assert b.additional_kwargs["agent_cache"]["hit"] is True
        c = [r async for r in await llm.astream_chat(ask)]
        return a.text, b.text, "".join(r.delta or "" for r in c)

    a, b, streamed = asyncio.run(run())
    assert a == b and streamed == text
    assert cache.stats().misses == 2  # one stream, one async completion


def test_real_tool_call_cached_with_its_tool_result(model: OpenAILike, cache: LayeredCache) -> None:
    runs: list[str] = []

    def get_weather(city: str) -> str:
        """Get today's weather for a city."""
        runs.append(city)
        return f"Sunny in {city}."

    llm = CachedLLM(llm=model, cache=cache)
    tool = cache_tool(FunctionTool.from_defaults(get_weather), ttl=600, cache=cache)
    question = "What is the weather in Oslo?"

    first = llm.chat_with_tools([tool], user_msg=question, tool_choice=FORCE_WEATHER)
    second = llm.chat_with_tools([tool], user_msg=question, tool_choice=FORCE_WEATHER)
    assert cache.stats().misses == 1
    assert second.additional_kwargs["agent_cache"]["hit"] is True
    assert any(isinstance(b, ToolCallBlock) for b in second.message.blocks)
    calls = [llm.get_tool_calls_from_response(r) for r in (first, second)]
    assert [(c.tool_name, c.tool_kwargs) for c in calls[0]] == [
        (c.tool_name, c.tool_kwargs) for c in calls[1]
    ]
    assert calls[0][0].tool_name == "get_weather"

    answers = [
        str(llm.predict_and_call([tool], user_msg=question, tool_choice=FORCE_WEATHER))
        for _ in range(2)
    ]
    assert answers[0] == answers[1] and answers[0].startswith("Sunny in")
    assert len(runs) == 1  # the repeated tool call came from the tool cache
    assert cache.stats().misses == 2  # the LLM: one miss; the tool: one miss


def test_settings_embed_model_as_embedder_and_the_response_marker(
    model: OpenAILike, index: VectorStoreIndex, tmp_path: Path
) -> None:
    from llama_index.core.callbacks import CallbackManager, TokenCountingHandler

    counter = TokenCountingHandler()
    llm = CachedLLM(
        llm=model,
        cache=str(tmp_path / "own"),
        embedder=index._embed_model,  # what Settings.embed_model holds: a BaseEmbedding
    )
    post = [StablePrefixPostprocessor()]
    engine = index.as_query_engine(llm=llm, similarity_top_k=3, node_postprocessors=post)
    first = engine.query("How do I reset my password?")
    again = engine.query("How can I reset my password?")
    first_info, again_info = query_cache_info(first), query_cache_info(again)
    assert first_info is not None and first_info["hit"] is False
    assert again_info is not None and again_info["layers"] == ["semantic"]
    assert "agent_cache" not in (again.metadata or {})  # node ids only
    assert str(again) == str(first)

    # the query engine installs its own callback manager on the LLM: count direct calls
    llm.callback_manager = CallbackManager([counter])
    ask = [ChatMessage(role="user", content="Name a colour of the rainbow.")]
    live = "".join(r.delta or "" for r in llm.stream_chat(ask))
    whole = llm.chat(ask)
    replay = "".join(r.delta or "" for r in llm.stream_chat(ask))
    assert whole.additional_kwargs["agent_cache"]["hit"] is True
    assert str(whole.message.content) == live == replay
    assert llm.cache.stats().stores == 2  # the query's answer and the stream, once each
    assert len(counter.llm_token_counts) == 1  # the streamed miss, once; hits cost nothing
