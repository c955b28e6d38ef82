"""Agents on CachedLLM + cache_tool: tool calls survive the cache, repeated calls are reused.

SmolLM2 (the integration tests' real model) does not choose tools by itself, so the agent
loops are driven here by scripted fakes; the integration tests produce a real tool call
with a named ``tool_choice``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.tools import FunctionTool
from llama_index.llms.agent_cache import CachedLLM
from llama_index.tools.agent_cache import cache_tool

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder


class ScriptedToolLLM(FunctionCallingLLM):
    """Calls ``get_weather(city="Oslo")`` first, then answers from the tool's result."""

    _calls: list[str] = PrivateAttr(default_factory=list)

    @property
    def calls(self) -> list[str]:
        return self._calls

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True, is_function_calling_model=True, model_name="s")

    def _reply(self, method: str, messages: Sequence[ChatMessage]) -> ChatMessage:
        self._calls.append(method)
        if messages[-1].role == MessageRole.TOOL:
            return ChatMessage(role="assistant", content=f"It is {messages[-1].content}.")
        call = ToolCallBlock(
            tool_call_id=f"call_{uuid.uuid4().hex}",
            tool_name="get_weather",
            tool_kwargs=json.dumps({"city": "Oslo"}),
        )
        return ChatMessage(role="assistant", blocks=[call])

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kw: Any) -> ChatResponse:
        return ChatResponse(message=self._reply("chat", messages))

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kw: Any) -> ChatResponse:
        return ChatResponse(message=self._reply("achat", messages))

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kw: Any) -> ChatResponseGen:
        message = self._reply("stream_chat", messages)

        def gen() -> Iterator[ChatResponse]:
            yield ChatResponse(message=message, delta=message.content or "")

        return gen()

    @llm_chat_callback()
    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kw: Any
    ) -> ChatResponseAsyncGen:
        message = self._reply("astream_chat", messages)

        async def gen() -> AsyncIterator[ChatResponse]:
            yield ChatResponse(message=message, delta=message.content or "")

        return gen()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
        raise AssertionError("not used")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
        raise AssertionError("not used")

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
        raise AssertionError("not used")

    @llm_completion_callback()
    async def astream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
        raise AssertionError("not used")

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(
                ChatMessage(role="user", content=user_msg)
                if isinstance(user_msg, str)
                else user_msg
            )
        specs = [t.metadata.to_openai_tool() for t in tools]
        return {"messages": messages, "tools": specs, **kwargs}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        return [
            ToolSelection(
                tool_id=b.tool_call_id or "",
                tool_name=b.tool_name,
                tool_kwargs=json.loads(b.tool_kwargs)
                if isinstance(b.tool_kwargs, str)
                else b.tool_kwargs,
            )
            for b in response.message.blocks
            if isinstance(b, ToolCallBlock)
        ]


RAN: list[str] = []


def get_weather(city: str) -> str:
    """Get today's weather for a city."""
    RAN.append(city)
    return f"sunny in {city}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAN.clear()


@pytest.fixture
def cache() -> LayeredCache:
    return LayeredCache(path=None, embedder=HashEmbedder(dim=256))


@pytest.mark.parametrize("streaming", [True, False])
async def test_function_agent_replays_tool_calls_and_reuses_tool_results(
    cache: LayeredCache, streaming: bool
) -> None:
    inner = ScriptedToolLLM()
    llm = CachedLLM(llm=inner, cache=cache)
    assert llm.metadata.is_function_calling_model
    tool = cache_tool(FunctionTool.from_defaults(get_weather), cache=cache, ttl=600)

    def agent(model: Any) -> FunctionAgent:
        return FunctionAgent(tools=[tool], llm=model, streaming=streaming)

    first = await agent(llm).run(user_msg="What's the weather in Oslo?")
    assert str(first) == "It is sunny in Oslo." and RAN == ["Oslo"]
    assert len(inner.calls) == 2  # the tool call, then the answer

    second = await agent(llm).run(user_msg="What's the weather in Oslo?")
    assert str(second) == str(first)
    assert len(inner.calls) == 2 and RAN == ["Oslo"]  # both LLM turns and the tool: cached
    ids = [c.tool_id for c in second.tool_calls] + [c.tool_id for c in first.tool_calls]
    assert len(set(ids)) == 2  # a replayed tool call gets a fresh id

    # another LLM scope (namespace): the model runs again, the tool result is reused
    other = CachedLLM(llm=inner, cache=cache, namespace="other")
    third = await agent(other).run(user_msg="What's the weather in Oslo?")
    assert str(third) == str(first)
    assert len(inner.calls) == 4 and RAN == ["Oslo"]


def test_predict_and_call_uses_the_cached_tool_call(cache: LayeredCache) -> None:
    inner = ScriptedToolLLM()
    llm = CachedLLM(llm=inner, cache=cache)
    tool = cache_tool(get_weather, cache=cache)
    first = llm.predict_and_call([tool], user_msg="Weather in Oslo?")
    second = llm.predict_and_call([tool], user_msg="Weather in Oslo?")
    assert str(first) == str(second) == "sunny in Oslo"
    assert inner.calls == ["chat"] and RAN == ["Oslo"]


class ScriptedReAct(CustomLLM):
    """A ReAct-format text model: one action, then an answer."""

    _calls: list[str] = PrivateAttr(default_factory=list)

    @property
    def calls(self) -> list[str]:
        return self._calls

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True, model_name="react")

    def _text(self, messages: Sequence[ChatMessage]) -> str:
        self._calls.append("call")
        if any((m.content or "").startswith("Observation") for m in messages):
            return "Thought: I can answer without using any more tools.\nAnswer: It is sunny."
        return (
            "Thought: I need to use a tool to help me answer the question.\n"
            'Action: get_weather\nAction Input: {"city": "Oslo"}'
        )

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kw: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role="assistant", content=self._text(messages)))

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kw: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role="assistant", content=self._text(messages)))

    @llm_chat_callback()
    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kw: Any
    ) -> ChatResponseAsyncGen:
        text = self._text(messages)

        async def gen() -> AsyncIterator[ChatResponse]:
            so_far = ""
            for word in text.split(" "):
                so_far += ("" if not so_far else " ") + word
                yield ChatResponse(
                    message=ChatMessage(role="assistant", content=so_far),
                    delta=word if so_far == word else " " + word,
                )

        return gen()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
        raise AssertionError("not used")

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kw: Any
    ) -> CompletionResponseGen:
        raise AssertionError("not used")


@pytest.mark.parametrize("streaming", [True, False])
async def test_react_agent_runs_from_the_cache(cache: LayeredCache, streaming: bool) -> None:
    inner = ScriptedReAct()
    llm = CachedLLM(llm=inner, cache=cache)
    tool = cache_tool(get_weather, cache=cache)
    first = await ReActAgent(tools=[tool], llm=llm, streaming=streaming).run(
        user_msg="Weather in Oslo?"
    )
    second = await ReActAgent(tools=[tool], llm=llm, streaming=streaming).run(
        user_msg="Weather in Oslo?"
    )
    assert "sunny" in str(first) and str(second) == str(first)
    assert len(inner.calls) == 2 and RAN == ["Oslo"]
