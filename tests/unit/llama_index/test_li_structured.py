"""CachedLLM.structured_predict: an answer its output class cannot parse is not served again."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import BaseModel, PrivateAttr
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.prompts import PromptTemplate
from llama_index.llms.agent_cache import CachedLLM

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder

PROMPT = PromptTemplate("Name a city in {country}. Answer as JSON with a 'name' field.")


class City(BaseModel):
    name: str


class JsonLLM(CustomLLM):
    """Answers with the queued texts in order (the last one repeats); counts calls."""

    chat_model: bool = True
    _answers: list[str] = PrivateAttr(default_factory=list)
    _calls: int = PrivateAttr(default=0)
    _seen: list[Any] = PrivateAttr(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=self.chat_model, model_name="json-fake")

    def _next(self) -> str:
        self._calls += 1
        return self._answers[min(self._calls, len(self._answers)) - 1]

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
        return CompletionResponse(text=self._next())

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kw: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError("not used here")

    @llm_chat_callback()
    def chat(self, messages: Any, **kw: Any) -> ChatResponse:
        self._seen.append(list(messages))
        return ChatResponse(message=ChatMessage(role="assistant", content=self._next()))

    @llm_chat_callback()
    async def achat(self, messages: Any, **kw: Any) -> ChatResponse:
        return self.chat(messages, **kw)


def make(*answers: str, chat: bool = True) -> tuple[CachedLLM, JsonLLM]:
    inner = JsonLLM(chat_model=chat)
    inner._answers = list(answers)
    cache = LayeredCache(path=None, embedder=HashEmbedder())
    return CachedLLM(llm=inner, cache=cache), inner


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "complete"])
def test_an_unparseable_answer_is_not_served_again(chat: bool) -> None:
    llm, inner = make("not json at all", '{"name": "Lyon"}', chat=chat)
    with pytest.raises(ValueError):
        llm.structured_predict(City, PROMPT, country="France")
    assert inner._calls == 1
    city = llm.structured_predict(City, PROMPT, country="France")
    assert city.name == "Lyon" and inner._calls == 2  # the model, not the bad answer
    again = llm.structured_predict(City, PROMPT, country="France")
    assert again.name == "Lyon" and inner._calls == 2  # the good answer is cached


def test_async_twin_drops_the_unparseable_answer() -> None:
    llm, inner = make("{oops", '{"name": "Porto"}')

    async def go() -> list[str]:
        with pytest.raises(ValueError):
            await llm.astructured_predict(City, PROMPT, country="Portugal")
        first = await llm.astructured_predict(City, PROMPT, country="Portugal")
        second = await llm.astructured_predict(City, PROMPT, country="Portugal")
        return [first.name, second.name]

    assert asyncio.run(go()) == ["Porto", "Porto"]
    assert inner._calls == 2


def test_a_cached_answer_that_fails_the_parse_is_evicted() -> None:
    llm, inner = make('{"name": "Bergen"}', "plain prose, no JSON", '{"name": "Oslo"}')
    bypass = {"agent_cache": "bypass"}  # learn the program's messages, store nothing
    assert llm.structured_predict(City, PROMPT, llm_kwargs=bypass, country="Norway").name
    llm.chat(inner._seen[0])  # a plain call with the same messages caches the prose
    assert inner._calls == 2
    with pytest.raises(ValueError):  # served from the cache, fails the parse
        llm.structured_predict(City, PROMPT, country="Norway")
    assert inner._calls == 2
    assert llm.structured_predict(City, PROMPT, country="Norway").name == "Oslo"
    assert inner._calls == 3
    assert llm.cache.stats().evicted == 1


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "complete"])
def test_refresh_inside_structured_prediction_goes_through_the_core(chat: bool) -> None:
    llm, inner = make('{"name": "Bergen"}', '{"name": "Oslo"}', chat=chat)
    assert llm.structured_predict(City, PROMPT, country="Norway").name == "Bergen"
    before = llm.cache.stats()
    refresh = {"agent_cache": "refresh"}
    assert llm.structured_predict(City, PROMPT, llm_kwargs=refresh, country="Norway").name == (
        "Oslo"
    )
    after = llm.cache.stats()
    assert inner._calls == 2
    # a request the core saw (counted, through its model gate), not a bare model call
    assert (after.lookups, after.bypassed) == (before.lookups + 1, before.bypassed + 1)
    assert llm.structured_predict(City, PROMPT, country="Norway").name == "Oslo"  # kept
    assert inner._calls == 2


def test_async_refresh_inside_structured_prediction_goes_through_the_core() -> None:
    llm, inner = make('{"name": "Porto"}', '{"name": "Braga"}')
    refresh = {"agent_cache": "refresh"}

    async def go() -> list[str]:
        first = await llm.astructured_predict(City, PROMPT, country="Portugal")
        again = await llm.astructured_predict(City, PROMPT, llm_kwargs=refresh, country="Portugal")
        kept = await llm.astructured_predict(City, PROMPT, country="Portugal")
        return [first.name, again.name, kept.name]

    assert asyncio.run(go()) == ["Porto", "Braga", "Braga"]
    assert inner._calls == 2 and llm.cache.stats().bypassed == 1


class _Recorder:
    """A cache stand-in recording the settling calls of a structured block."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def store(self, **_: Any) -> None:
        self.calls.append("store")

    def feedback(self, *_: Any, **__: Any) -> None:
        self.calls.append("feedback")

    async def astore(self, **_: Any) -> None:
        self.calls.append("astore")

    async def afeedback(self, *_: Any, **__: Any) -> None:
        self.calls.append("afeedback")


def _fill(pending: Any, raised: type[BaseException] | None) -> None:
    pending.stores.append({})
    pending.served.append(object())
    if raised is not None:
        raise raised


async def _ablock(cache: Any, raised: type[BaseException] | None) -> None:
    from llama_index.llms.agent_cache import _structured

    async with _structured.adeferring(cache) as pending:
        _fill(pending, raised)


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize(
    ("raised", "expected"),
    [(None, ["store"]), (ValueError, ["feedback"]), (KeyboardInterrupt, [])],
)
def test_a_structured_block_settles_by_how_it_ended(
    raised: type[BaseException] | None, expected: list[str], asynchronous: bool
) -> None:
    """Success stores, a failed parse reports what was served, an interrupt does neither;
    the async twin makes the same calls through the async methods."""
    from llama_index.llms.agent_cache import _structured

    cache = _Recorder()
    with pytest.raises(raised) if raised else contextlib.nullcontext():
        if asynchronous:
            asyncio.run(_ablock(cache, raised))
        else:
            with _structured.deferring(cache) as pending:  # type: ignore[arg-type]
                _fill(pending, raised)
    prefix = "a" if asynchronous else ""
    assert cache.calls == [prefix + call for call in expected]
    assert _structured.current() is None
