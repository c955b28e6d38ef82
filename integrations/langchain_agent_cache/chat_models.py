"""``CachedChatModel``: any chat model, cached on every path (invoke, batch, stream).

LangChain's own ``.stream()`` never reads or writes the LLM cache, and a hit fires no
``on_llm_new_token`` (a known LangChain limitation). This wrapper implements
``_stream``/``_astream`` itself: a hit is replayed as chunks, so callbacks,
``astream_events`` and LangGraph's ``stream_mode="messages"`` still see tokens; a
streamed miss is stored once it completes, and concurrent identical streamed misses share
one model stream (the core's ``LayeredCache.fetch_stream``).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar, cast

from langchain_core.caches import BaseCache
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.load import dumps
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import (
    Runnable,
    RunnableBinding,
    RunnableConfig,
    RunnableParallel,
    RunnableSequence,
    RunnableWithFallbacks,
)
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, Field, model_validator

from agent_cache import CachePolicy, ConfigurationError, LayeredCache, default_cache
from agent_cache._names import reject_unknown
from agent_cache.policy import request_policy
from agent_cache.shared import DEFAULT_PATH
from langchain_agent_cache._chat import replay_chunks
from langchain_agent_cache.caches import AgentCache, FetchedResult

__all__ = ["CONFIG_KEY", "CachedChatModel", "request_policy"]

_RUN_ID_PREFIX = "lc_run-"
#: ``config={"configurable": {CONFIG_KEY: ...}}`` sets the cache policy of one request.
CONFIG_KEY = "agent_cache"


def _with_policy(config: RunnableConfig | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` carrying the request's policy to ``_generate``/``_stream`` (which pop
    it: it never reaches the wrapped model)."""
    given = kwargs.pop(CONFIG_KEY, None)
    if config and given is None:
        given = (config.get("configurable") or {}).get(CONFIG_KEY)
    if given is not None:
        kwargs[CONFIG_KEY] = request_policy(given)
    return kwargs


_M = TypeVar("_M", bound=Callable[..., Any])


def _taking_policy(method: _M) -> _M:
    """``BaseChatModel``'s ``method`` (``invoke``, ``astream``, ...) taking the request's
    policy from ``config={"configurable": {"agent_cache": ...}}`` (or ``agent_cache=``)."""
    if inspect.iscoroutinefunction(method):

        async def arun(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
            return await method(self, input, config, **_with_policy(config, kwargs))

        return _named(arun, method)

    def run(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return method(self, input, config, **_with_policy(config, kwargs))

    return _named(run, method)


def _named(run: Callable[..., Any], method: _M) -> _M:
    """``run`` under ``method``'s name and signature (``inspect.signature`` shows it)."""
    run.__name__, run.__qualname__ = method.__name__, f"CachedChatModel.{method.__name__}"
    run.__doc__ = f"``{method.__name__}``, with the per-request cache policy (``agent_cache``)."
    run.__wrapped__ = method  # type: ignore[attr-defined]
    return cast(_M, run)


@dataclass(frozen=True)
class _Call:
    prompt: str
    llm_string: str
    stop: list[str] | None
    kwargs: dict[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        """What :class:`AgentCache` keys the call on: ``(prompt, llm_string)``."""
        return self.prompt, self.llm_string


class _Paid:
    """One request's answer through the cache: ``model()`` (the wrapped model's call, or
    its awaitable) is the fetch's compute, and the answer keeps the last paid result's
    ``llm_output`` when it was computed here."""

    def __init__(self, model: Callable[[], Any]) -> None:
        self.model = model
        self.results: list[ChatResult] = []

    def fetched(self, cache: AgentCache, call: _Call, policy: CachePolicy) -> ChatResult:
        return self._result(cache.fetch_result(*call.key, self._paid, policy=policy))

    async def afetched(self, cache: AgentCache, call: _Call, policy: CachePolicy) -> ChatResult:
        return self._result(await cache.afetch_result(*call.key, self._apaid, policy=policy))

    def _paid(self) -> list[ChatGeneration]:
        return self._kept(self.model())

    async def _apaid(self) -> list[ChatGeneration]:
        return self._kept(await self.model())

    def _kept(self, result: ChatResult) -> list[ChatGeneration]:
        self.results.append(result)
        return result.generations

    def _result(self, got: FetchedResult) -> ChatResult:
        llm_output = self.results[-1].llm_output if got.computed and self.results else None
        return ChatResult(generations=got.generations, llm_output=llm_output)  # type: ignore[arg-type]


def _fresh(generations: Sequence[ChatGeneration]) -> list[ChatGeneration]:
    """Drop the wrapped run's ids so the wrapper's run id is used."""
    out = []
    for gen in generations:
        msg_id = gen.message.id
        if isinstance(msg_id, str) and msg_id.startswith(_RUN_ID_PREFIX):
            gen = gen.model_copy(update={"message": gen.message.model_copy(update={"id": None})})
        out.append(gen)
    return out


def _swap(runnable: Any, old: Runnable[Any, Any], new: Runnable[Any, Any]) -> tuple[Any, int]:
    """``runnable`` with every reference to ``old`` replaced by ``new`` (and how many)."""
    if runnable is old:
        return new, 1
    if isinstance(runnable, RunnableBinding):
        bound, n = _swap(runnable.bound, old, new)
        return (runnable.model_copy(update={"bound": bound}), n) if n else (runnable, 0)
    if isinstance(runnable, RunnableSequence):
        swapped = [_swap(step, old, new) for step in runnable.steps]
        n = sum(k for _, k in swapped)
        if not n:
            return runnable, 0
        steps = [s for s, _ in swapped]
        return runnable.model_copy(
            update={"first": steps[0], "middle": steps[1:-1], "last": steps[-1]}
        ), n
    if isinstance(runnable, RunnableParallel):
        pairs = {k: _swap(v, old, new) for k, v in runnable.steps__.items()}
        n = sum(k for _, k in pairs.values())
        if not n:
            return runnable, 0
        return runnable.model_copy(update={"steps__": {k: s for k, (s, _) in pairs.items()}}), n
    if isinstance(runnable, RunnableWithFallbacks):
        main, n = _swap(runnable.runnable, old, new)
        fallbacks = [_swap(f, old, new) for f in runnable.fallbacks]
        n += sum(k for _, k in fallbacks)
        if not n:
            return runnable, 0
        return runnable.model_copy(
            update={"runnable": main, "fallbacks": [f for f, _ in fallbacks]}
        ), n
    return runnable, 0


class CachedChatModel(BaseChatModel):
    """Wraps a chat model (e.g. ``ChatOpenAI`` pointed at vLLM) with the layered cache.

    ``invoke``/``ainvoke``/``batch``/``stream``/``astream`` all read and write the cache.
    Every answer is marked in ``response_metadata["agent_cache"]`` (the schema of
    :mod:`agent_cache.markers`: ``hit``, ``layer``, ``score``, ...); a hit is replayed as
    chunks when streamed and reports zero ``usage_metadata``; ``bind_tools`` and
    ``with_structured_output`` delegate to the wrapped model and keep the result cached.
    Keys are the wrapped model's own ``llm_string`` (model, bound tools, temperature,
    stop) and the messages, exactly as ``set_llm_cache`` would key them (plus any
    forwarded ``temperature``/``max_tokens``), so both share entries.

    The wrapped model is called without a run of its own (its ``_generate``/``_stream``):
    the wrapper's run is the one callbacks, tracers and ``get_usage_metadata_callback``
    see, so a miss is counted once and a hit as zero tokens. Concurrent identical
    requests (``batch([q, q, q])``) make one model call (the core's single-flight).

    Per request, ``config={"configurable": {"agent_cache": "bypass"}}`` (or
    ``"refresh"``, ``"no_store"``; see :func:`request_policy`) sets the cache policy;
    it is never passed to the wrapped model. LangChain's own ``cache`` field is turned off
    on the wrapper (``cache=`` is taken as the agent cache instead).

    Args:
        llm: the chat model to wrap, or ``"provider:model"`` for LangChain's
            ``init_chat_model`` (reads the provider's key from the environment).
        cache: an :class:`AgentCache`, a ``LayeredCache`` or a directory (the process's
            shared cache there, as ``AgentCache(path)``); ``None``/``True``: the shared
            embedded cache (``agent_cache.default_cache()``, ``.agent_cache``); ``False``:
            off (the wrapped model is called every time, nothing is opened or written).
        embedder: the semantic layer's embedding model for a cache of its own at
            ``.agent_cache`` (not the shared default): a LangChain ``Embeddings``, a
            LlamaIndex ``BaseEmbedding``, a model name or a core embedder (see
            :func:`agent_cache.embedders.embedder_from`). With ``cache=``, pass it to that
            cache instead.
        temperature, max_tokens, stop: passed to the wrapped model on every call when
            set (they are part of the key, like any call argument).
        streaming: route ``invoke`` through the streaming path (tokens reach callbacks).

    Example (needs an OpenAI-compatible server at ``URL``)::

        chat = CachedChatModel(llm=ChatOpenAI(base_url=URL, api_key="x"))
        chat.invoke("What is RAG?").response_metadata.get("agent_cache")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: BaseChatModel
    agent_cache: AgentCache | None = Field(default=None, exclude=True)
    # LangChain's own cache path, always off on the wrapper (``cache=`` feeds agent_cache)
    cache: BaseCache | bool | None = Field(default=False, exclude=True)
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    streaming: bool = False

    @model_validator(mode="before")
    @classmethod
    def _take_cache(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        fields = {alias for f in cls.model_fields.values() if (alias := f.alias)}
        reject_unknown(
            "CachedChatModel",
            data,
            {*cls.model_fields, *fields, "cache", "embedder"},
            elsewhere="the AgentCache / LayeredCache given as cache=",
        )
        if isinstance(data.get("llm"), str):
            data["llm"] = _init_chat_model(data["llm"])
        off = "cache" in data and data["cache"] is False
        given = data.pop("cache", None)
        if isinstance(given, str | os.PathLike):  # CachedChatModel(cache=".agent_cache")
            given = AgentCache(given)
        if given is not None and not isinstance(given, bool):
            if not isinstance(given, AgentCache | LayeredCache):
                raise ConfigurationError(
                    "CachedChatModel(cache=...) takes an AgentCache, a LayeredCache, a "
                    f"directory, True (the shared default) or False (off), not {given!r}"
                )
            data["agent_cache"] = given
        if isinstance(data.get("agent_cache"), LayeredCache):
            data["agent_cache"] = AgentCache(data["agent_cache"])
        embedder = data.pop("embedder", None)
        if embedder is not None:
            if off or data.get("agent_cache") is not None:
                raise ConfigurationError(
                    "CachedChatModel(embedder=...) builds its own cache: pass the embedder to "
                    "the LayeredCache / AgentCache given as cache= instead"
                )
            where = Path(DEFAULT_PATH).resolve()
            data["agent_cache"] = AgentCache(path=where, embedder=embedder)
        if off:
            data["agent_cache"] = None
        elif data.get("agent_cache") is None:
            data["agent_cache"] = AgentCache(default_cache())
        data["cache"] = False  # LangChain's cache path stays off; we cache ourselves
        return data

    # ------------------------------------------------------------------ per-request policy
    # ``config={"configurable": {"agent_cache": "bypass"}}`` (or ``"refresh"``,
    # ``"no_store"``) sets the request's cache policy on each path (:func:`_taking_policy`)
    invoke = _taking_policy(BaseChatModel.invoke)
    ainvoke = _taking_policy(BaseChatModel.ainvoke)
    stream = _taking_policy(BaseChatModel.stream)
    astream = _taking_policy(BaseChatModel.astream)

    # ------------------------------------------------------------------ identity
    @classmethod
    def is_lc_serializable(cls) -> bool:
        """Serializable (``dumpd``/``load``) with the wrapped model; the cache is not
        part of it (a loaded model uses the default cache unless given one)."""
        return True

    @classmethod
    def get_lc_namespace(cls) -> list[str]:
        return ["langchain_agent_cache", "chat_models"]

    @property
    def model_name(self) -> str:
        """The wrapped model's name (``model_name`` or ``model``), else its class name."""
        name = getattr(self.llm, "model_name", None) or getattr(self.llm, "model", None)
        return str(name) if name else type(self.llm).__name__

    @property
    def _llm_type(self) -> str:
        return f"agent-cache:{self.llm._llm_type}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"llm": self.llm._identifying_params, "cache": repr(self.agent_cache)}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = self.llm._get_ls_params(stop=stop or self.stop, **self._forwarded(kwargs))
        model = kwargs.get("model")
        if isinstance(model, str):
            params["ls_model_name"] = model
        elif not params.get("ls_model_name"):
            params["ls_model_name"] = self.model_name
        params["ls_model_type"] = "chat"
        if self.temperature is not None:
            params["ls_temperature"] = self.temperature
        if self.max_tokens is not None:
            params["ls_max_tokens"] = self.max_tokens
        return params

    def _forwarded(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        out.update(kwargs)
        return out

    def _call(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: Any) -> _Call:
        stop = stop if stop is not None else self.stop
        forwarded = self._forwarded(dict(kwargs))
        llm_string = self.llm._get_llm_string(stop=stop, **forwarded)
        plain = [m.model_copy(update={"id": None}) if m.id is not None else m for m in messages]
        return _Call(dumps(plain), llm_string, stop, forwarded)

    # ------------------------------------------------------------------ the wrapped model
    def _model(self, messages: list[BaseMessage], call: _Call) -> ChatResult:
        """One call of the wrapped model, with no run of its own (counted once)."""
        result = self.llm._generate(messages, stop=call.stop, **call.kwargs)
        return ChatResult(generations=_fresh(result.generations), llm_output=result.llm_output)

    async def _amodel(self, messages: list[BaseMessage], call: _Call) -> ChatResult:
        result = await self.llm._agenerate(messages, stop=call.stop, **call.kwargs)
        return ChatResult(generations=_fresh(result.generations), llm_output=result.llm_output)

    def _model_stream(
        self, messages: list[BaseMessage], call: _Call
    ) -> Iterator[ChatGenerationChunk]:
        for item in self._stream_items(messages, call):
            yield from _parts(item)

    async def _amodel_stream(
        self, messages: list[BaseMessage], call: _Call
    ) -> AsyncIterator[ChatGenerationChunk]:
        async for item in self._astream_items(messages, call):
            for part in _parts(item):
                yield part

    def _stream_items(self, messages: list[BaseMessage], call: _Call) -> Iterable[_Item]:
        """What the wrapped model streams (:func:`_parts` makes the wrapper's chunks of
        each): its ``_stream``'s chunks, or the whole answer of a model that cannot."""
        if type(self.llm)._stream is BaseChatModel._stream:
            return [self._model(messages, call)]
        return self.llm._stream(messages, stop=call.stop, **call.kwargs)

    def _astream_items(self, messages: list[BaseMessage], call: _Call) -> AsyncIterator[_Item]:
        """:meth:`_stream_items` of the async path: ``_astream`` (LangChain's default runs
        ``_stream`` in a thread), the whole answer when neither is implemented."""
        kind = type(self.llm)
        if kind._astream is BaseChatModel._astream and kind._stream is BaseChatModel._stream:
            return _once(self._amodel(messages, call))
        return self.llm._astream(messages, stop=call.stop, **call.kwargs)

    # ------------------------------------------------------------------ generate
    def _request(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> tuple[_Call, AgentCache | None, CachePolicy]:
        """The request's key, the cache (``None``: the wrapped model directly, the cache
        being off or bypassed) and its policy (popped: it never reaches the model)."""
        policy = request_policy(kwargs.pop(CONFIG_KEY, None))
        call = self._call(messages, stop, kwargs)
        return call, None if policy == "bypass" else self.agent_cache, policy

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call, cache, policy = self._request(messages, stop, kwargs)
        model = functools.partial(self._model, messages, call)
        return model() if cache is None else _Paid(model).fetched(cache, call, policy)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call, cache, policy = self._request(messages, stop, kwargs)
        model = functools.partial(self._amodel, messages, call)
        return await (model() if cache is None else _Paid(model).afetched(cache, call, policy))

    # ------------------------------------------------------------------ stream
    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from self._streaming(messages, stop, kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        async for chunk in self._astreaming(messages, stop, kwargs):
            yield chunk

    def _streaming(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> Iterator[ChatGenerationChunk]:
        """A streamed request's chunks, not started yet: the wrapped model's own stream
        (the cache off or bypassed), or the cache's (:meth:`AgentCache.stream_result`)."""
        call, cache, policy = self._request(messages, stop, kwargs)
        model = functools.partial(self._model_stream, messages, call)
        return model() if cache is None else cache.stream_result(*call.key, model, policy=policy)

    def _astreaming(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> AsyncIterator[ChatGenerationChunk]:
        call, cache, policy = self._request(messages, stop, kwargs)
        model = functools.partial(self._amodel_stream, messages, call)
        return model() if cache is None else cache.astream_result(*call.key, model, policy=policy)

    # ------------------------------------------------------------------ tools, structure
    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools the way the wrapped model does; calls stay cached.

        The bound tools travel as call arguments, so they are part of the key.
        """
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        bound = self.llm.bind_tools(tools, **kwargs)
        swapped, n = _swap(bound, self.llm, self)
        if not n:
            raise ConfigurationError(
                f"{type(self.llm).__name__}.bind_tools returned a runnable that does not "
                "call the model; cannot keep it cached"
            )
        return swapped  # type: ignore[no-any-return]

    def with_structured_output(
        self, schema: dict[str, Any] | type, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, dict[str, Any] | Any]:
        """The wrapped model's structured output (any ``method=``), with calls cached."""
        inner = self.llm.with_structured_output(schema, include_raw=include_raw, **kwargs)
        swapped, n = _swap(inner, self.llm, self)
        if not n:
            raise ConfigurationError(
                f"{type(self.llm).__name__}.with_structured_output returned a runnable that "
                "does not call the model; cannot keep it cached"
            )
        return swapped  # type: ignore[no-any-return]


def _init_chat_model(spec: str) -> BaseChatModel:
    """``"provider:model"`` through LangChain's ``init_chat_model`` (package ``langchain``)."""
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ConfigurationError(
            f"CachedChatModel(llm={spec!r}) needs the `langchain` package (pip install "
            "langchain); or pass a chat model object"
        ) from exc
    return init_chat_model(spec)


#: One item of the wrapped model's stream: a chunk, or a model's whole answer.
_Item: TypeAlias = ChatGenerationChunk | ChatResult


def _parts(item: _Item) -> Iterator[ChatGenerationChunk]:
    """The wrapper's chunks of one item the wrapped model streamed: a streamed chunk's
    (:func:`_as_chunks`), or the first generation of a whole answer split."""
    if isinstance(item, ChatResult):
        return itertools.chain.from_iterable(_as_chunks(g.message) for g in item.generations[:1])
    return _as_chunks(item.message)


async def _once(answer: Awaitable[ChatResult]) -> AsyncIterator[ChatResult]:
    """A whole answer, awaited, as a stream of one item."""
    yield await answer


def _as_chunks(message: BaseMessage) -> Iterator[ChatGenerationChunk]:
    """What the wrapped model streamed, as chunks without its run id (the wrapper sets
    its own). A model that cannot stream yields one whole message: it is split."""
    msg_id = message.id
    if isinstance(msg_id, str) and msg_id.startswith(_RUN_ID_PREFIX):
        message = message.model_copy(update={"id": None})
    if isinstance(message, AIMessageChunk):
        yield ChatGenerationChunk(message=message)
    elif isinstance(message, AIMessage):
        yield from replay_chunks(ChatGeneration(message=message))
    else:
        yield ChatGenerationChunk(message=AIMessageChunk(content=message.content))
