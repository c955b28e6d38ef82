"""CachedLLM (LlamaIndex): hits, stream replay, async paths, scope, events, single-flight."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.prompts.chat_prompts import CHAT_TEXT_QA_PROMPT
from llama_index.core.schema import TextNode
from llama_index.llms.agent_cache import CachedLLM, CacheHitEvent, CacheMissEvent
from llama_index.llms.agent_cache._codec import identity, split_text
from llama_index.llms.openai_like import OpenAILike
from llama_index.postprocessor.agent_cache import StablePrefixPostprocessor

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder

WORDS = "Reset it from the account page, then sign in again."
MISS = {
    "hit": False,
    "layer": None,
    "score": None,
    "matched_prompt": None,
    "key": None,
    "saved_usage": None,
    "coalesced": False,
}


class CountingLLM(CustomLLM):
    """A chat model that counts calls per method and numbers its answers."""

    text: str = WORDS
    temperature: float = 0.0
    # state, not configuration: private, so not part of the model identity
    _calls: dict[str, int] = PrivateAttr(default_factory=dict)
    _delay: float = PrivateAttr(default=0.0)
    _fail: bool = PrivateAttr(default=False)

    @property
    def calls(self) -> dict[str, int]:
        return self._calls

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True, model_name="counting")

    def _answer(self, method: str) -> str:
        self._calls[method] = self._calls.get(method, 0) + 1
        if self._fail:
            raise RuntimeError("model down")
        return f"{self.text} #{sum(self.calls.values())}" if self.text.strip() else self.text

    def total(self) -> int:
        return sum(self.calls.values())

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
        return CompletionResponse(
            text=self._answer("complete"), additional_kwargs={"total_tokens": 9}
        )

    @llm_completion_callback()
    async def acomplete(
        self, prompt: str, formatted: bool = False, **kw: Any
    ) -> CompletionResponse:
        await asyncio.sleep(self._delay)
        return CompletionResponse(text=self._answer("acomplete"))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kw: Any
    ) -> CompletionResponseGen:
        text = self._answer("stream_complete")

        def gen() -> Iterator[CompletionResponse]:
            so_far = ""
            for piece in split_text(text):
                so_far += piece
                yield CompletionResponse(text=so_far, delta=piece)

        return gen()

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kw: Any
    ) -> CompletionResponseAsyncGen:
        text = self._answer("astream_complete")

        async def gen() -> AsyncIterator[CompletionResponse]:
            so_far = ""
            for piece in split_text(text):
                so_far += piece
                yield CompletionResponse(text=so_far, delta=piece)

        return gen()

    @llm_chat_callback()
    def chat(self, messages: Any, **kw: Any) -> ChatResponse:
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=self._answer("chat")),
            additional_kwargs={"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
        )

    @llm_chat_callback()
    async def achat(self, messages: Any, **kw: Any) -> ChatResponse:
        await asyncio.sleep(self._delay)
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=self._answer("achat"))
        )

    @llm_chat_callback()
    def stream_chat(self, messages: Any, **kw: Any) -> ChatResponseGen:
        text = self._answer("stream_chat")

        def gen() -> Iterator[ChatResponse]:
            so_far = ""
            for piece in split_text(text):
                so_far += piece
                yield ChatResponse(
                    message=ChatMessage(role="assistant", content=so_far), delta=piece
                )

        return gen()

    @llm_chat_callback()
    async def astream_chat(self, messages: Any, **kw: Any) -> ChatResponseAsyncGen:
        text = self._answer("astream_chat")

        async def gen() -> AsyncIterator[ChatResponse]:
            so_far = ""
            for piece in split_text(text):
                so_far += piece
                yield ChatResponse(
                    message=ChatMessage(role="assistant", content=so_far), delta=piece
                )

        return gen()


class Recorder(BaseEventHandler):
    events: list[Any] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Recorder"

    def handle(self, event: Any, **kwargs: Any) -> None:
        self.events.append(event)

    def of(self, cls: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, cls)]


@pytest.fixture
def cache() -> LayeredCache:
    return LayeredCache(path=None, embedder=HashEmbedder(dim=256), threshold=0.8)


@pytest.fixture
def inner() -> CountingLLM:
    return CountingLLM()


@pytest.fixture
def llm(inner: CountingLLM, cache: LayeredCache) -> CachedLLM:
    return CachedLLM(llm=inner, cache=cache)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    root = get_dispatcher()
    rec = Recorder()
    root.add_event_handler(rec)
    yield rec
    root.event_handlers.remove(rec)


def user(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="user", content=text)]


def info(response: ChatResponse | CompletionResponse) -> dict[str, Any]:
    return response.additional_kwargs["agent_cache"]


# ---------------------------------------------------------------- basics
def test_metadata_and_settings_pass_through(inner: CountingLLM, llm: CachedLLM) -> None:
    assert llm.metadata == inner.metadata
    assert llm.metadata.is_chat_model is True
    Settings.llm = llm
    try:
        assert Settings.llm is llm
    finally:
        Settings.llm = MockLLM()


def test_inherits_system_prompt_of_wrapped_llm(cache: LayeredCache) -> None:
    wrapped = CachedLLM(llm=MockLLM(system_prompt="Be brief."), cache=cache)
    assert wrapped.system_prompt == "Be brief."


def test_chat_exact_hit_skips_model(inner: CountingLLM, llm: CachedLLM) -> None:
    first = llm.chat(user("How do I reset my password?"))
    second = llm.chat(user("how do i  reset my password?"))
    assert inner.total() == 1
    assert info(first) == MISS
    assert info(second)["hit"] is True and info(second)["layer"] == "exact"
    assert info(second)["score"] is None
    assert second.message.content == first.message.content
    assert llm.cache.stats().tokens_saved >= 25  # the model's reported usage


def test_chat_semantic_hit_reports_score(inner: CountingLLM, llm: CachedLLM) -> None:
    llm.chat(user("How do I reset my password?"))
    hit = llm.chat(user("How can I reset my password?"))
    miss = llm.chat(user("How do I cancel my order?"))
    assert info(hit)["layer"] == "semantic" and info(hit)["score"] >= 0.8
    assert info(hit)["matched_prompt"] == "How do I reset my password?"
    assert info(miss)["hit"] is False
    assert inner.total() == 2


def test_scope_system_prompt_and_kwargs_and_model_settings(
    inner: CountingLLM, llm: CachedLLM, cache: LayeredCache
) -> None:
    llm.chat(user("What is RAG?"))
    system = [ChatMessage(role="system", content="Answer in French."), *user("What is RAG?")]
    assert info(llm.chat(system))["hit"] is False
    assert info(llm.chat(user("What is RAG?"), max_tokens=5))["hit"] is False
    hotter = CachedLLM(llm=CountingLLM(temperature=0.9), cache=cache)
    assert info(hotter.chat(user("What is RAG?")))["hit"] is False
    assert info(llm.chat(user("What is RAG?")))["hit"] is True


def test_complete_and_chat_do_not_share_entries(inner: CountingLLM, llm: CachedLLM) -> None:
    llm.complete("What is RAG?")
    assert info(llm.chat(user("What is RAG?")))["hit"] is False
    assert info(llm.complete("What is RAG?"))["layer"] == "exact"
    assert inner.calls == {"complete": 1, "chat": 1}


def test_errors_and_empty_answers_are_not_cached(inner: CountingLLM, llm: CachedLLM) -> None:
    inner._fail = True
    with pytest.raises(RuntimeError):
        llm.chat(user("What is RAG?"))
    inner._fail = False
    inner.text = "   "
    llm.chat(user("What is RAG?"))
    llm.chat(user("What is RAG?"))
    assert inner.calls["chat"] == 3
    assert llm.cache.stats().stores == 0


def test_uncacheable_kwargs_bypass(inner: CountingLLM, llm: CachedLLM) -> None:
    marker = object()
    llm.chat(user("What is RAG?"), opaque=marker)
    llm.chat(user("What is RAG?"), opaque=marker)
    assert inner.calls["chat"] == 2


def test_identity_excludes_credentials_and_transport() -> None:
    a = OpenAILike(model="m", api_base="http://a:1/v1", api_key="secret-a", temperature=0.1)
    b = OpenAILike(model="m", api_base="http://b:2/v1", api_key="secret-b", temperature=0.1)
    c = OpenAILike(model="m", api_base="http://a:1/v1", api_key="secret-a", temperature=0.7)
    assert identity(a) == identity(b)
    assert identity(a) != identity(c)
    assert "secret-a" not in repr(identity(a))


def test_llm_string_override_shares_entries_across_wrappers(cache: LayeredCache) -> None:
    one, two = CountingLLM(), CountingLLM(temperature=0.5)
    CachedLLM(llm=one, cache=cache, llm_string="model@v1").chat(user("What is RAG?"))
    hit = CachedLLM(llm=two, cache=cache, llm_string="model@v1").chat(user("What is RAG?"))
    assert info(hit)["hit"] is True and two.total() == 0


# ---------------------------------------------------------------- streams
def test_stream_chat_replays_deltas(inner: CountingLLM, llm: CachedLLM) -> None:
    first = list(llm.stream_chat(user("What is RAG?")))
    replay = list(llm.stream_chat(user("What is RAG?")))
    assert inner.calls == {"stream_chat": 1}
    assert len(replay) == len(split_text(first[-1].message.content or "")) > 3
    assert "".join(r.delta or "" for r in replay) == first[-1].message.content
    assert [r.message.content for r in replay] == [r.message.content for r in first]
    assert all(info(r)["hit"] is True for r in replay)
    # a non-streaming call is served by what the stream stored
    assert llm.chat(user("What is RAG?")).message.content == first[-1].message.content


def test_stream_stopped_early_is_not_stored(inner: CountingLLM, llm: CachedLLM) -> None:
    stream = llm.stream_chat(user("What is RAG?"))
    next(stream)
    stream.close()
    list(llm.stream_chat(user("What is RAG?")))
    assert inner.calls["stream_chat"] == 2


def test_stream_complete_replays(inner: CountingLLM, llm: CachedLLM) -> None:
    first = list(llm.stream_complete("What is RAG?"))
    replay = list(llm.stream_complete("What is RAG?"))
    assert inner.calls == {"stream_complete": 1}
    assert "".join(r.delta or "" for r in replay) == first[-1].text == replay[-1].text
    assert info(replay[-1])["layer"] == "exact"


# ---------------------------------------------------------------- async
async def test_async_twins_use_the_wrapped_async_methods(
    inner: CountingLLM, llm: CachedLLM
) -> None:
    a = await llm.achat(user("What is RAG?"))
    b = await llm.achat(user("What is RAG?"))
    c = await llm.acomplete("What is RAG?")
    d = await llm.acomplete("What is RAG?")
    first = [r async for r in await llm.astream_chat(user("What is HNSW?"))]
    again = [r async for r in await llm.astream_chat(user("What is HNSW?"))]
    e = [r async for r in await llm.astream_complete("What is HNSW?")]
    f = [r async for r in await llm.astream_complete("What is HNSW?")]
    assert inner.calls == {"achat": 1, "acomplete": 1, "astream_chat": 1, "astream_complete": 1}
    assert info(b)["hit"] and b.message.content == a.message.content
    assert info(d)["hit"] and d.text == c.text
    assert "".join(r.delta or "" for r in again) == first[-1].message.content
    assert len(again) > 1 and info(again[-1])["hit"]
    assert f[-1].text == e[-1].text and len(f) > 1


async def test_concurrent_identical_misses_make_one_call(
    inner: CountingLLM, llm: CachedLLM
) -> None:
    inner._delay = 0.05
    results = await asyncio.gather(*(llm.achat(user("What is RAG?")) for _ in range(5)))
    assert inner.calls == {"achat": 1}
    assert len({r.message.content for r in results}) == 1
    assert sum(1 for r in results if info(r).get("coalesced")) == 4


# ---------------------------------------------------------------- instrumentation
def test_hit_is_visible_in_instrumentation(llm: CachedLLM, recorder: Recorder) -> None:
    llm.chat(user("How do I reset my password?"))
    llm.chat(user("How can I reset my password?"))
    misses, hits = recorder.of(CacheMissEvent), recorder.of(CacheHitEvent)
    assert [m.question for m in misses] == ["How do I reset my password?"]
    assert len(hits) == 1 and hits[0].layer == "semantic" and hits[0].score >= 0.8
    assert hits[0].question == "How can I reset my password?"
    ends = [e for e in recorder.of(LLMChatEndEvent) if e.response is not None]
    served = [e for e in ends if e.response.additional_kwargs.get("agent_cache", {}).get("hit")]
    assert len(served) == 1 and served[0].span_id == hits[0].span_id


# ---------------------------------------------------------------- RAG: the question, scoped
def _index(texts: list[str]) -> VectorStoreIndex:
    nodes = [TextNode(id_=f"n{i}", text=t) for i, t in enumerate(texts)]
    return VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))


DOCS = [
    "To reset your password open Settings, Account, Reset password.",
    "Orders can be cancelled within 24 hours from the Orders page.",
    "Shipping takes 3 to 5 business days.",
]


def test_query_engine_serves_paraphrase_by_question(
    inner: CountingLLM, llm: CachedLLM, recorder: Recorder
) -> None:
    engine = _index(DOCS).as_query_engine(
        llm=llm, similarity_top_k=3, node_postprocessors=[StablePrefixPostprocessor()]
    )
    first = engine.query("How do I reset my password?")
    second = engine.query("How can I reset my password?")
    assert inner.total() == 1
    assert str(second) == str(first)
    hit = recorder.of(CacheHitEvent)[-1]
    # the semantic layer matched the question, not the rendered RAG prompt
    assert hit.layer == "semantic"
    assert hit.matched_prompt == "How do I reset my password?"


async def test_query_engine_async_and_streaming(inner: CountingLLM, llm: CachedLLM) -> None:
    index = _index(DOCS)
    engine = index.as_query_engine(llm=llm, similarity_top_k=3)
    first = await engine.aquery("How do I reset my password?")
    second = await engine.aquery("How do I reset my password?")
    assert str(first) == str(second) and inner.calls == {"achat": 1}
    streaming = index.as_query_engine(llm=llm, similarity_top_k=3, streaming=True)
    one = "".join(streaming.query("Where is my parcel?").response_gen)
    two = "".join(streaming.query("Where is my parcel?").response_gen)
    assert one == two and inner.calls["stream_chat"] == 1


def test_other_retrieved_context_is_another_scope(inner: CountingLLM, llm: CachedLLM) -> None:
    _index(DOCS).as_query_engine(llm=llm, similarity_top_k=3).query("How do I reset my password?")
    other = _index(["Passwords are reset by the administrator only."])
    other.as_query_engine(llm=llm).query("How do I reset my password?")
    assert inner.total() == 2


def test_rendered_default_template_is_recognized_without_predict(
    inner: CountingLLM, llm: CachedLLM
) -> None:
    def rendered(question: str) -> list[ChatMessage]:
        return CHAT_TEXT_QA_PROMPT.format_messages(context_str=DOCS[0], query_str=question)

    llm.chat(rendered("How do I reset my password?"))
    hit = llm.chat(rendered("How can I reset my password?"))
    assert info(hit)["layer"] == "semantic"
    assert info(hit)["matched_prompt"] == "How do I reset my password?"
    assert inner.total() == 1


def test_chat_engines(inner: CountingLLM, llm: CachedLLM) -> None:
    index = _index(DOCS)
    first = index.as_chat_engine(chat_mode="context", llm=llm).chat("How do I reset my password?")
    again = index.as_chat_engine(chat_mode="context", llm=llm).chat("How can I reset my password?")
    assert str(again) == str(first) and inner.total() == 1
    simple = SimpleChatEngine.from_defaults(llm=llm)
    simple.chat("What is RAG?")
    assert str(SimpleChatEngine.from_defaults(llm=llm).chat("What is RAG?")) == str(
        simple.chat_history[-1].content
    )
    assert inner.total() == 2
