"""A streamed miss through either adapter: reported once, stored once, then served to
streamed and non-streamed requests alike."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langchain_agent_cache import CachedChatModel
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tracers.context import collect_runs
from llama_index.core.base.llms.types import (
    ChatMessage,
)
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.llms.agent_cache import CachedLLM
from llama_index.llms.agent_cache._apis import CHAT, COMPLETE
from llama_index.llms.agent_cache._path import SYNC, Request
from pydantic import PrivateAttr

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder
from tests.unit.llama_index.test_li_llm import CountingLLM

QUESTION = "How do I reset my password?"
WORDS = ["Open ", "the ", "account ", "page."]


# ---------------------------------------------------------------- LlamaIndex
def user(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="user", content=text)]


def li(counter: TokenCountingHandler | None = None) -> tuple[CachedLLM, CountingLLM]:
    inner = CountingLLM()
    kw: dict[str, Any] = {}
    if counter is not None:
        kw["callback_manager"] = CallbackManager([counter])
    cache = LayeredCache(path=None, embedder=HashEmbedder())
    return CachedLLM(llm=inner, cache=cache, **kw), inner


def test_li_streamed_chat_miss_counted_once_hit_as_zero() -> None:
    counter = TokenCountingHandler()
    llm, inner = li(counter)
    text = "".join(r.delta or "" for r in llm.stream_chat(user(QUESTION)))
    assert text and len(counter.llm_token_counts) == 1
    replay = "".join(r.delta or "" for r in llm.stream_chat(user(QUESTION)))
    assert replay == text and len(counter.llm_token_counts) == 1  # a hit costs nothing
    assert inner.total() == 1


def test_li_streamed_completion_miss_counted_once_hit_as_zero() -> None:
    counter = TokenCountingHandler()
    llm, inner = li(counter)
    text = "".join(r.delta or "" for r in llm.stream_complete(QUESTION))
    assert text and len(counter.llm_token_counts) == 1
    assert "".join(r.delta or "" for r in llm.stream_complete(QUESTION)) == text
    assert len(counter.llm_token_counts) == 1 and inner.total() == 1


def test_li_streamed_answer_is_stored_once_and_serves_both_kinds() -> None:
    llm, inner = li()
    streamed = list(llm.stream_chat(user(QUESTION)))
    assert streamed[-1].additional_kwargs["agent_cache"]["hit"] is False
    assert llm.cache.stats().stores == 1
    whole = llm.chat(user(QUESTION))
    assert whole.additional_kwargs["agent_cache"]["hit"] is True
    assert str(whole.message.content) == str(streamed[-1].message.content)
    again = list(llm.stream_chat(user(QUESTION)))
    assert again[-1].additional_kwargs["agent_cache"]["hit"] is True
    assert inner.calls == {"stream_chat": 1} and llm.cache.stats().stores == 1


def test_li_stream_honours_the_policy_kwarg() -> None:
    llm, inner = li()
    list(llm.stream_chat(user(QUESTION), agent_cache="no_store"))
    assert llm.cache.stats().stores == 0
    list(llm.stream_chat(user(QUESTION)))
    list(llm.stream_chat(user(QUESTION), agent_cache="use"))  # not part of the key: a hit
    assert inner.total() == 2
    list(llm.stream_chat(user(QUESTION), agent_cache="bypass"))
    list(llm.stream_complete(QUESTION, agent_cache="refresh"))
    assert inner.total() == 4


def test_li_async_stream_stored_once_and_served_to_achat() -> None:
    counter = TokenCountingHandler()
    llm, inner = li(counter)

    async def go() -> tuple[str, str, str]:
        first = "".join([r.delta or "" async for r in await llm.astream_chat(user(QUESTION))])
        whole = await llm.achat(user(QUESTION))
        again = "".join([r.delta or "" async for r in await llm.astream_chat(user(QUESTION))])
        return first, str(whole.message.content), again

    first, whole, again = asyncio.run(go())
    assert first == whole == again and inner.total() == 1
    assert llm.cache.stats().stores == 1 and len(counter.llm_token_counts) == 1


def _wait_for_readers(cache: LayeredCache, n: int) -> None:
    """Until ``n`` readers follow the one stream in flight (the model holds it)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        flights = list(cache._streams._flights.values())
        if flights and flights[0].drivers >= n:
            return
        time.sleep(0.005)
    raise AssertionError(f"{n} readers never joined one stream")


class HeldLLM(CountingLLM):
    """``CountingLLM`` whose streams hold after their first delta until released, so
    concurrent requests overlap with them."""

    _release: threading.Event = PrivateAttr(default_factory=threading.Event)

    def _held(self, stream: Iterator[Any]) -> Iterator[Any]:
        for i, response in enumerate(stream):
            if i == 1:
                assert self._release.wait(5)
            yield response

    async def _aheld(self, stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        i = 0
        async for response in stream:
            while i == 1 and not self._release.is_set():
                await asyncio.sleep(0.005)
            i += 1
            yield response

    def stream_chat(self, messages: Any, **kw: Any) -> Any:
        return self._held(super().stream_chat(messages, **kw))

    def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
        return self._held(super().stream_complete(prompt, formatted=formatted, **kw))

    async def astream_chat(self, messages: Any, **kw: Any) -> Any:
        return self._aheld(await super().astream_chat(messages, **kw))


@pytest.mark.parametrize("api", ["stream_chat", "stream_complete"])
def test_li_concurrent_identical_streamed_misses_make_one_call_and_one_write(api: str) -> None:
    counter = TokenCountingHandler()
    inner = HeldLLM()
    cache = LayeredCache(path=None, embedder=HashEmbedder())
    llm = CachedLLM(llm=inner, cache=cache, callback_manager=CallbackManager([counter]))
    n = 3
    texts = [""] * n
    marks: list[Any] = [None] * n

    def reader(k: int) -> None:
        if api == "stream_chat":
            out = list(llm.stream_chat(user(QUESTION)))
        else:
            out = list(llm.stream_complete(QUESTION))
        texts[k] = "".join(r.delta or "" for r in out)
        marks[k] = out[-1].additional_kwargs["agent_cache"]

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    _wait_for_readers(cache, n)
    inner._release.set()
    for t in threads:
        t.join(10)
    assert inner.total() == 1 and cache.stats().stores == 1
    assert texts[0] and texts == [texts[0]] * n
    assert len(counter.llm_token_counts) == 1  # the miss counted once, by its own call
    assert sorted(bool(m.get("coalesced")) for m in marks) == [False] + [True] * (n - 1)
    assert all(m["hit"] is False for m in marks)


def test_li_concurrent_identical_async_streamed_misses_make_one_call_and_one_write() -> None:
    inner = HeldLLM()
    cache = LayeredCache(path=None, embedder=HashEmbedder())
    llm = CachedLLM(llm=inner, cache=cache)

    async def reader() -> str:
        return "".join([r.delta or "" async for r in await llm.astream_chat(user(QUESTION))])

    async def main() -> list[str]:
        tasks = [asyncio.create_task(reader()) for _ in range(3)]
        await asyncio.sleep(0.1)
        inner._release.set()
        return list(await asyncio.gather(*tasks))

    texts = asyncio.run(main())
    assert texts[0] and texts == [texts[0]] * 3
    assert inner.total() == 1 and cache.stats().stores == 1


# ---------------------------------------------------------------- LangChain
class StreamingChat(BaseChatModel):
    """Streams ``WORDS`` with usage on the last chunk; counts model calls."""

    _calls: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "streaming-fake"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kw: Any) -> ChatResult:
        self._calls += 1
        usage = {"input_tokens": 7, "output_tokens": 4, "total_tokens": 11}
        msg = AIMessage(
            content="".join(WORDS),
            usage_metadata=usage,  # type: ignore[arg-type]
            response_metadata={"model_name": "streaming-fake"},
        )
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _chunks(self) -> list[ChatGenerationChunk]:
        self._calls += 1
        out = [ChatGenerationChunk(message=AIMessageChunk(content=w)) for w in WORDS]
        usage = {"input_tokens": 7, "output_tokens": 4, "total_tokens": 11}
        last = AIMessageChunk(
            content="",
            usage_metadata=usage,  # type: ignore[arg-type]
            response_metadata={"model_name": "streaming-fake"},  # where usage is keyed
        )
        out.append(ChatGenerationChunk(message=last))
        return out

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        yield from self._chunks()

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks():
            yield chunk


def lc() -> tuple[CachedChatModel, StreamingChat]:
    inner = StreamingChat()
    cache = LayeredCache(path=None, embedder=HashEmbedder())
    return CachedChatModel(llm=inner, cache=cache), inner


def test_lc_streamed_miss_counted_once_hit_as_zero() -> None:
    chat, inner = lc()
    with get_usage_metadata_callback() as cold, collect_runs() as runs:
        text = "".join(str(c.content) for c in chat.stream(QUESTION))
    assert text == "".join(WORDS)
    assert sum(u["total_tokens"] for u in cold.usage_metadata.values()) == 11
    assert len(runs.traced_runs) == 1  # one root run, not one per layer
    with get_usage_metadata_callback() as warm:
        replay = list(chat.stream(QUESTION))
    assert "".join(str(c.content) for c in replay) == text
    assert sum(u["total_tokens"] for u in warm.usage_metadata.values()) == 0
    assert any(c.response_metadata.get("agent_cache") for c in replay)
    assert inner._calls == 1


@pytest.mark.parametrize("then", ["invoke", "stream"])
def test_lc_streamed_answer_is_stored_once_and_serves_both_kinds(then: str) -> None:
    chat, inner = lc()
    list(chat.stream(QUESTION))
    layered = chat.agent_cache.layered  # type: ignore[union-attr]
    assert layered.stats().stores == 1
    if then == "invoke":
        got = chat.invoke(QUESTION)
        assert got.content == "".join(WORDS)
        assert got.response_metadata["agent_cache"]["layer"] == "exact"
    else:
        chunks = list(chat.stream(QUESTION))
        assert "".join(str(c.content) for c in chunks) == "".join(WORDS)
    assert inner._calls == 1 and layered.stats().stores == 1


def test_lc_async_stream_stored_once_then_ainvoke_hits() -> None:
    chat, inner = lc()

    async def go() -> str:
        first = "".join([str(c.content) async for c in chat.astream(QUESTION)])
        got = await chat.ainvoke(QUESTION)
        assert got.response_metadata["agent_cache"]["layer"] == "exact"
        return first

    assert asyncio.run(go()) == "".join(WORDS)
    assert inner._calls == 1
    assert chat.agent_cache.layered.stats().stores == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("way", ["stream", "astream"])
def test_lc_stream_over_an_unreadable_entry_asks_the_model_once_and_overwrites_it(
    way: str,
) -> None:
    chat, inner = lc()
    layered = chat.agent_cache.layered  # type: ignore[union-attr]
    seen: dict[str, Any] = {}
    spied = {"stream": layered.fetch_stream, "astream": layered.afetch_stream}[way]

    def spy(**kw: Any) -> Any:
        seen.update(kw)
        return spied(**kw)

    setattr(layered, {"stream": "fetch_stream", "astream": "afetch_stream"}[way], spy)

    def text() -> str:
        if way == "stream":
            return "".join(str(c.content) for c in chat.stream(QUESTION))

        async def go() -> str:
            return "".join([str(c.content) async for c in chat.astream(QUESTION)])

        return asyncio.run(go())

    assert text() == "".join(WORDS) and inner._calls == 1
    where = {k: seen[k] for k in ("prompt", "llm_string", "namespace", "context")}
    layered.store(**where, response={"not": "an LLM entry"})
    assert text() == "".join(WORDS) and inner._calls == 2  # the model, once
    hit = layered.lookup(**where)
    assert hit is not None and hit.response.get("generations")  # the entry replaced
    assert layered.stats().counters["decode_errors"] == 1
    assert text() == "".join(WORDS) and inner._calls == 2  # and served from now on


class HeldStreamingChat(StreamingChat):
    """``StreamingChat`` whose stream holds after its first chunk until released, so
    concurrent requests overlap with it."""

    _release: threading.Event = PrivateAttr(default_factory=threading.Event)

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        chunks = self._chunks()
        yield chunks[0]
        assert self._release.wait(5)
        yield from chunks[1:]

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        chunks = self._chunks()
        yield chunks[0]
        while not self._release.is_set():
            await asyncio.sleep(0.005)
        for chunk in chunks[1:]:
            yield chunk


def _held_lc() -> tuple[CachedChatModel, HeldStreamingChat]:
    inner = HeldStreamingChat()
    cache = LayeredCache(path=None, embedder=HashEmbedder())
    return CachedChatModel(llm=inner, cache=cache), inner


def test_lc_concurrent_identical_streamed_misses_make_one_call_and_one_write() -> None:
    chat, inner = _held_lc()
    layered = chat.agent_cache.layered  # type: ignore[union-attr]
    n = 3
    texts: list[str] = [""] * n
    usage: list[int] = [0] * n
    marks: list[Any] = [None] * n

    def reader(k: int) -> None:
        with get_usage_metadata_callback() as cb:
            chunks = list(chat.stream(QUESTION))
        texts[k] = "".join(str(c.content) for c in chunks)
        usage[k] = sum(u["total_tokens"] for u in cb.usage_metadata.values())
        marks[k] = [c.response_metadata.get("agent_cache") for c in chunks if c.response_metadata]

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    _wait_for_readers(layered, n)
    inner._release.set()
    for t in threads:
        t.join(10)
    assert inner._calls == 1 and layered.stats().stores == 1
    assert texts == ["".join(WORDS)] * n
    assert sorted(usage) == [0] * (n - 1) + [11]  # the miss counted once, followers as zero
    coalesced = [m for m in marks if any(x and x.get("coalesced") for x in m)]
    assert len(coalesced) == n - 1


def test_lc_concurrent_identical_async_streamed_misses_make_one_call_and_one_write() -> None:
    chat, inner = _held_lc()
    layered = chat.agent_cache.layered  # type: ignore[union-attr]

    async def reader() -> str:
        return "".join([str(c.content) async for c in chat.astream(QUESTION)])

    async def main() -> list[str]:
        tasks = [asyncio.create_task(reader()) for _ in range(3)]
        await asyncio.sleep(0.1)
        inner._release.set()
        return list(await asyncio.gather(*tasks))

    assert asyncio.run(main()) == ["".join(WORDS)] * 3
    assert inner._calls == 1 and layered.stats().stores == 1


def _li_stream_text(llm: CachedLLM, api: str, question: str, **kw: Any) -> str:
    """The text of one streamed LlamaIndex call (``api``: the sync or async method)."""
    if api == "stream_chat":
        return "".join(r.delta or "" for r in llm.stream_chat(user(question), **kw))
    if api == "stream_complete":
        return "".join(r.delta or "" for r in llm.stream_complete(question, **kw))

    async def go() -> str:
        if api == "astream_chat":
            stream: Any = await llm.astream_chat(user(question), **kw)
        else:
            stream = await llm.astream_complete(question, **kw)
        return "".join([r.delta or "" async for r in stream])

    return asyncio.run(go())


LI_STREAMS = ["stream_chat", "astream_chat", "stream_complete", "astream_complete"]


@pytest.mark.parametrize("api", LI_STREAMS)
def test_li_stream_the_cache_refuses_streams_from_the_model(api: str) -> None:
    inner = CountingLLM()
    cache = LayeredCache(path=None, embedder=HashEmbedder(), max_prompt_bytes=64)
    llm = CachedLLM(llm=inner, cache=cache)
    long_question = "How do I reset the password of my account " + "x" * 100 + "?"
    assert _li_stream_text(llm, api, long_question).endswith("#1")  # the model, at once
    assert _li_stream_text(llm, api, long_question)
    assert inner.total() == 2 and cache.stats().stores == 0  # never cached, never lost


@pytest.mark.parametrize("api", LI_STREAMS)
def test_li_stream_over_an_unreadable_entry_asks_the_model_and_overwrites_it(api: str) -> None:
    llm, inner = li()
    first = _li_stream_text(llm, api, QUESTION)
    request = (
        Request(llm, CHAT, user(QUESTION), {}, SYNC)
        if api.endswith("chat")
        else Request(llm, COMPLETE, QUESTION, {"formatted": False}, SYNC)
    )
    assert request.call is not None
    llm.cache.store(**request._lookup_args(request.call), response={"not": "an answer"})
    again = _li_stream_text(llm, api, QUESTION)
    assert inner.total() == 2 and again != first  # the model answered anew (numbered)
    assert _li_stream_text(llm, api, QUESTION) == again  # and its answer replaced the entry
    assert inner.total() == 2
