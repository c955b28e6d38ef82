"""Fakes for the LangChain adapter tests: a counting chat model and a fast core cache."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from agent_cache import LayeredCache, TtlPolicy
from agent_cache.testing import FakeClock, HashEmbedder


def make_layered(**kw: Any) -> LayeredCache:
    """An in-memory core cache with a deterministic embedder and a fake clock."""
    kw.setdefault("embedder", HashEmbedder(dim=256))
    kw.setdefault("clock", FakeClock())
    kw.setdefault("threshold", 0.75)
    kw.setdefault("ttl_policy", TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()))
    return LayeredCache(path=None, **kw)


class CountingChat(GenericFakeChatModel):
    """``GenericFakeChatModel`` that counts model calls, records call kwargs, binds tools.

    Counters are private attributes so that they never enter the ``llm_string``.
    """

    temperature: float | None = None
    _calls: int = PrivateAttr(default=0)
    _kwargs: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def calls(self) -> int:
        return self._calls

    @property
    def seen_kwargs(self) -> list[dict[str, Any]]:
        return self._kwargs

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._calls += 1
        self._kwargs.append(dict(kwargs, stop=stop))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # the parent streams by calling _generate once (counted there); no callbacks
        # here: the framework's stream() reports each chunk itself
        yield from super()._stream(messages, stop=stop, run_manager=None, **kwargs)

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)


def chat(*replies: AIMessage | str, **kw: Any) -> CountingChat:
    """A counting fake that answers ``replies`` in order."""
    return CountingChat(messages=iter(list(replies)), **kw)


class TokenRecorder(BaseCallbackHandler):
    """Records ``on_llm_new_token`` per run."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.runs: set[Any] = set()

    def on_llm_new_token(self, token: str, *, run_id: Any = None, **kwargs: Any) -> None:
        self.tokens.append(token)
        self.runs.add(run_id)


class CountingTool:
    """A function to wrap with ``@tool`` that counts its calls."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.fn(*args, **kwargs)


def tool_names(tools: Sequence[BaseTool]) -> list[str]:
    return [t.name for t in tools]
