"""``CachedLLM``: any LlamaIndex LLM behind agent-cache's layered cache."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr, SerializeAsAny
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import LLM, ToolSelection
from llama_index.core.prompts.base import BasePromptTemplate, PromptTemplate
from llama_index.core.tools.types import BaseTool
from llama_index.core.types import Model, TokenAsyncGen, TokenGen
from llama_index.llms.agent_cache import _codec, _marker, _structured
from llama_index.llms.agent_cache._cache import CacheArg, cache_dir, resolve_cache
from llama_index.llms.agent_cache.events import CacheHitEvent, CacheMissEvent
from llama_index.llms.agent_cache.question import QuestionExtractor, Scope

from agent_cache import (
    NOT_STORED,
    AgentCacheError,
    CacheHit,
    ConfigurationError,
    Fetched,
    LayeredCache,
    SerializationError,
)
from agent_cache._names import reject_unknown
from agent_cache.markers import hit_info
from agent_cache.policy import request_policy

__all__ = ["CachedLLM"]

log = logging.getLogger("agent_cache.llama_index")
dispatcher = instrument.get_dispatcher(__name__)  # type: ignore[attr-defined]

# The question found in the template arguments of the enclosing predict/stream call.
_HINT: ContextVar[str | None] = ContextVar("agent_cache_question_hint", default=None)
# Settings of the wrapped LLM that CachedLLM's own predict/stream paths must reuse.
_INHERITED = (
    "callback_manager",
    "system_prompt",
    "messages_to_prompt",
    "completion_to_prompt",
    "output_parser",
    "pydantic_program_mode",
    "query_wrapper_prompt",
)
# CachedLLM's own constructor arguments (beside LlamaIndex's LLM fields).
_OWN_ARGS = frozenset(
    {"llm", "cache", "namespace", "ttl", "tags", "llm_string", "embedder",
     "question_extractor", "singleflight_timeout", "cache_path"}
)  # fmt: skip
#: ``llm.chat(messages, agent_cache="bypass")``: the request's cache policy (never passed on).
_POLICY_KWARG = "agent_cache"
#: The core policy of a request inside a structured call, whose write waits for the parse
#: (``refresh``: the core's ``bypass``, a model call that neither reads nor writes).
_DEFERRED = {"use": "no_store", "no_store": "no_store", "refresh": "bypass", "bypass": "bypass"}


@dataclass(frozen=True)
class _Call:
    scope: Scope
    llm_string: str


def _stored(payload: Any) -> Any:
    """A payload as the codec's ``encode`` returns it (``None``: ``NOT_STORED``)."""
    return NOT_STORED if payload is None else payload


def _encode_chat(response: ChatResponse) -> Any:
    """The stored form of a chat answer (``NOT_STORED``: empty, or no JSON form)."""
    return _stored(_codec.chat_payload(response.message))


def _decode_chat(payload: Any) -> ChatResponse:
    message = _codec.message_from_payload(payload)
    if message is None:
        raise SerializationError("not a stored chat answer")
    return ChatResponse(message=message)


def _encode_completion(response: CompletionResponse) -> Any:
    """The stored form of a completion (``NOT_STORED``: an empty one)."""
    return _stored(_codec.completion_payload(response))


def _decode_completion(payload: Any) -> CompletionResponse:
    text = _codec.completion_text(payload)
    if text is None:
        raise SerializationError("not a stored completion")
    return CompletionResponse(text=text)


_CHAT = (_encode_chat, _decode_chat)
_COMPLETION = (_encode_completion, _decode_completion)
_Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]
_Rebuild = Callable[[Any, dict[str, Any], bool], Any]


async def _aiter(items: Iterable[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


class CachedLLM(FunctionCallingLLM):
    """Wraps any LlamaIndex LLM; answers repeated and paraphrased requests from the cache.

    ``complete``, ``chat``, their streaming variants and all async twins look the request
    up first (exact, then semantic) and call the wrapped LLM only on a miss; concurrent
    identical misses make one call. A hit is returned with
    ``additional_kwargs["agent_cache"] = {"hit": True, "layer": ..., "score": ..., ...}``
    and a :class:`~llama_index.llms.agent_cache.CacheHitEvent` on LlamaIndex's
    dispatcher; a streamed hit is replayed word by word. Tool calls are stored with the
    answer, so function-calling agents (``FunctionAgent``, ``ReActAgent``) keep working.

    What is looked up: the question (see
    :class:`~llama_index.llms.agent_cache.QuestionExtractor`) within a scope made of
    the model identity (class, model name, sampling settings, never credentials), the
    call's kwargs (bound tools, ``tool_choice``) and the rest of the prompt (system
    prompt, template, retrieved context, earlier turns).

    Args:
        llm: the LLM to wrap, e.g. ``OpenAILike(api_base="http://gpu-1:8000/v1", ...)``.
        cache: a :class:`agent_cache.LayeredCache`, a directory for the embedded default,
            or ``None`` for ``.agent_cache`` (shared by every adapter in the process).
        namespace: the cache namespace (thresholds, versions and invalidation are per
            namespace).
        ttl: seconds an answer stays valid; ``None``: the cache's TTL policy.
        tags: tags stored with every answer, for ``cache.invalidate(tags=[...])``.
        llm_string: replaces the model identity derived from ``llm`` (e.g. ``"qwen@v3"``).
        question_extractor: how the question is found in rendered prompts; pass
            ``QuestionExtractor(templates=[...])`` to recognize your own templates.
        embedder: the semantic layer's embedding model, e.g. ``Settings.embed_model``
            (a LlamaIndex ``BaseEmbedding``), a LangChain ``Embeddings``, a model name or a
            core embedder; ``cache`` is then a directory (default ``.agent_cache``) and
            this LLM gets a ``LayeredCache`` of its own over it, not the shared default.
            It survives pickling (when the model pickles); ``to_dict`` leaves it out: pass
            it to ``from_dict`` again. With a ``LayeredCache`` as ``cache``, give the
            embedder to that cache instead.
        singleflight_timeout: kept for compatibility, unused: concurrent identical
            misses coalesce in the core (``LayeredCache(singleflight_timeout=...)``).

    Per request, ``llm.chat(messages, agent_cache="bypass")`` (or ``"refresh"``,
    ``"no_store"``; see :func:`agent_cache.policy.request_policy`) sets the cache policy;
    it is never passed to the wrapped LLM. A hit fires no callback-manager LLM event
    (``TokenCountingHandler`` counts it as zero) but the dispatcher's start/end events
    and a ``CacheHitEvent``; a miss is counted once, by the wrapped call. The cache's
    directory (``cache_path``) survives pickling and ``to_dict``/``from_dict``.

    Example:
        >>> from llama_index.core import Settings
        >>> from llama_index.llms.openai_like import OpenAILike
        >>> Settings.llm = CachedLLM(
        ...     llm=OpenAILike(api_base="http://127.0.0.1:8000/v1", model="m", is_chat_model=True),
        ...     cache=".agent_cache",
        ... )  # doctest: +SKIP
    """

    llm: SerializeAsAny[LLM] = Field(description="The wrapped LLM.")
    namespace: str = Field(default="default", description="Cache namespace.")
    ttl: float | None = Field(default=None, description="Seconds an answer stays valid.")
    tags: list[str] = Field(default_factory=list, description="Tags stored with answers.")
    llm_string: str | None = Field(default=None, description="Model identity override.")
    singleflight_timeout: float = Field(default=60.0, gt=0)
    cache_path: str | None = Field(
        default=None,
        description="Directory of the cache in use (kept through pickling and to_dict).",
    )
    embedder: Any = Field(
        default=None,
        exclude=True,
        description="Embedding model of this LLM's own cache (kept through pickling).",
    )

    _cache: LayeredCache = PrivateAttr()
    _extractor: QuestionExtractor = PrivateAttr()

    def __init__(
        self,
        llm: LLM,
        cache: CacheArg = None,
        *,
        namespace: str = "default",
        ttl: float | None = None,
        tags: Sequence[str] = (),
        llm_string: str | None = None,
        embedder: Any = None,
        question_extractor: QuestionExtractor | None = None,
        singleflight_timeout: float = 60.0,
        cache_path: str | None = None,
        **llm_fields: Any,
    ) -> None:
        """``llm_fields``: LlamaIndex's own ``LLM`` fields (``system_prompt``,
        ``callback_manager``, ...; by default the wrapped LLM's); any other name is refused
        with the names meant (``embed_model=`` is ``embedder=``)."""
        reject_unknown(
            "CachedLLM", llm_fields, {*LLM.model_fields, *_OWN_ARGS},
            elsewhere="the LayeredCache given as cache=",
        )  # fmt: skip
        kwargs: dict[str, Any] = {
            **llm_fields,
            "namespace": namespace,
            "ttl": ttl,
            "tags": list(tags),
            "llm_string": llm_string,
            "embedder": embedder,
            "singleflight_timeout": singleflight_timeout,
        }
        for name in _INHERITED:
            value = getattr(llm, name, None)
            if value is not None:
                kwargs.setdefault(name, value)
        if isinstance(llm, Mapping):  # from_dict / a pickled state: rebuild the wrapped LLM
            llm = _load_llm(llm)
        if cache is None:
            cache = cache_path  # a pickled or serialized CachedLLM
        if embedder is None:
            resolved = resolve_cache(cache)
        elif isinstance(cache, LayeredCache):
            raise ConfigurationError(
                "CachedLLM(embedder=...) builds its own cache: pass the embedder to the "
                "LayeredCache given as cache= instead"
            )
        else:
            resolved = LayeredCache(path=cache_dir(cache), embedder=embedder)
        kwargs["cache_path"] = None if resolved.path is None else str(resolved.path)
        super().__init__(llm=llm, **kwargs)
        if not self.namespace:
            raise ConfigurationError("namespace must be a non-empty str")
        self._cache = resolved
        self._extractor = question_extractor or QuestionExtractor()
        _marker.install()  # response.agent_cache on query engines (query_cache_info)

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> CachedLLM:
        """The inverse of ``to_dict()``: the wrapped LLM is rebuilt from its class name,
        the cache from ``cache_path``."""
        data = {**data, **kwargs}
        data.pop("class_name", None)
        return cls(**data)

    @classmethod
    def class_name(cls) -> str:
        return "CachedLLM"

    @property
    def metadata(self) -> LLMMetadata:
        """The wrapped LLM's metadata (context window, chat / function calling flags)."""
        return self.llm.metadata

    @property
    def cache(self) -> LayeredCache:
        """The :class:`agent_cache.LayeredCache` in use (``cache.stats()``, invalidation)."""
        return self._cache

    # ------------------------------------------------------------------ request keys
    def _prepare(
        self,
        api: str,
        kwargs: Mapping[str, Any],
        *,
        messages: Sequence[ChatMessage] | None = None,
        prompt: str | None = None,
    ) -> _Call | None:
        """The lookup arguments, or ``None`` when the call must bypass the cache."""
        try:
            identity = _codec.llm_string(api, self.llm, self.llm_string, kwargs)
            hint = _HINT.get()
            if messages is not None:
                scope = self._extractor.scope_messages(messages, hint)
            else:
                scope = self._extractor.scope_prompt(prompt or "", hint)
        except ConfigurationError as exc:  # Unkeyable kwargs, no text to key on, bad input
            log.debug("agent-cache: %s call bypasses the cache: %s", api, exc)
            return None
        return _Call(scope, identity)

    def _lookup_args(self, call: _Call) -> dict[str, Any]:
        return {
            "prompt": call.scope.question,
            "llm_string": call.llm_string,
            "namespace": self.namespace,
            "context": call.scope.context,
        }

    def _served(self, call: _Call, hit: CacheHit) -> dict[str, Any]:
        """Announce a served hit; returns what goes in ``additional_kwargs``."""
        dispatcher.event(
            CacheHitEvent(
                layer=hit.layer,
                score=hit.score,
                key=hit.key,
                question=call.scope.question,
                matched_prompt=hit.matched_prompt,
                namespace=self.namespace,
            )
        )
        return {"agent_cache": hit_info(hit)}

    def _missed(self, call: _Call) -> None:
        dispatcher.event(CacheMissEvent(question=call.scope.question, namespace=self.namespace))

    # ------------------------------------------------------------------ one request path
    def _paid_tokens(self, response: Any) -> Any:
        """What the model reported for one paid response (and the KV-layer numbers)."""
        total, prompt_tokens, cached = _codec.usage(response)
        if prompt_tokens is not None:
            self._cache.record_model_usage(prompt_tokens, cached)
        return _reported(total, prompt_tokens)

    def _write_args(self, call: _Call, policy: str, tokens: Callable[[Any], Any]) -> dict[str, Any]:
        return {
            **self._lookup_args(call),
            "ttl": self.ttl,
            "tags": self.tags,
            "policy": policy,
            "tokens": tokens,
        }

    def _fetch_args(self, call: _Call, policy: str, codec: _Codec) -> dict[str, Any]:
        return {
            **self._write_args(call, policy, self._paid_tokens),
            "encode": codec[0],
            "decode": codec[1],
        }

    def _fetch(
        self, call: _Call, compute: Callable[[], Any], policy: str, codec: _Codec
    ) -> Fetched:
        """``LayeredCache.fetch``; inside a structured call the write waits for the parse."""
        pending = _structured.current()
        core = policy if pending is None else _DEFERRED[policy]
        got = self._cache.fetch(compute=compute, **self._fetch_args(call, core, codec))
        if pending is not None:
            self._defer(pending, call, got, policy, codec)
        return got

    async def _afetch(
        self, call: _Call, compute: Callable[[], Awaitable[Any]], policy: str, codec: _Codec
    ) -> Fetched:
        """Async twin of :meth:`_fetch`."""
        pending = _structured.current()
        core = policy if pending is None else _DEFERRED[policy]
        got = await self._cache.afetch(compute=compute, **self._fetch_args(call, core, codec))
        if pending is not None:
            self._defer(pending, call, got, policy, codec)
        return got

    def _defer(
        self,
        pending: _structured.Deferred,
        call: _Call,
        got: Fetched,
        policy: str,
        codec: _Codec,
    ) -> None:
        if got.hit is not None:
            pending.served.append(got.hit)
            return
        if not got.computed or got.value is None or policy == "no_store":
            return
        payload = codec[0](got.value)
        if payload is NOT_STORED:
            return
        total, prompt_tokens, _cached = _codec.usage(got.value)
        pending.stores.append(
            {
                **self._lookup_args(call),
                "response": payload,
                "ttl": self.ttl,
                "tags": self.tags,
                "tokens": _reported(total, prompt_tokens),
            }
        )

    def _silent_inner(self) -> LLM:
        """The wrapped LLM, reporting to this wrapper's callback manager: a miss is
        counted once (by the wrapped call), a hit not at all (no model call)."""
        if self.llm.callback_manager is not self.callback_manager:
            self.llm.callback_manager = self.callback_manager
        return self.llm

    def _announce_hit(self, api: str, args: Any, response: Any) -> None:
        """The start/end events a wrapped call would have sent, for a served hit (no
        callback-manager event: token counters count a hit as zero)."""
        payload = self.to_payload() if hasattr(self, "to_payload") else {}
        if api == "chat":
            dispatcher.event(
                LLMChatStartEvent(model_dict=payload, messages=list(args), additional_kwargs={})
            )
            dispatcher.event(LLMChatEndEvent(messages=list(args), response=response))
        else:
            dispatcher.event(
                LLMCompletionStartEvent(model_dict=payload, prompt=args, additional_kwargs={})
            )
            dispatcher.event(LLMCompletionEndEvent(prompt=args, response=response))

    # ------------------------------------------------------------------ chat
    def _outcome(
        self,
        call: _Call,
        got: Fetched | None,
        api: str,
        args: Any,
        kind: type[Any],
        rebuild: _Rebuild,
    ) -> Any:
        """The response (a ``kind``) for a core outcome of a chat or completion call
        (``rebuild``: a response of its own with new ``additional_kwargs``); ``None``:
        call the wrapped LLM here."""
        if got is None or not isinstance(got.value, kind):
            return None
        response = got.value
        if got.computed:
            self._missed(call)
            response.additional_kwargs["agent_cache"] = hit_info()
            return response
        if got.hit is not None:  # a fresh object, decoded from the entry
            served = rebuild(response, self._served(call, got.hit), False)
            self._announce_hit(api, args, served)
            return served
        # the concurrent caller's answer: a copy of its own
        return rebuild(response, {"agent_cache": hit_info(coalesced=True)}, True)

    def _chat_outcome(
        self, call: _Call, got: Fetched | None, messages: Sequence[ChatMessage]
    ) -> ChatResponse | None:
        """The response for a core outcome; ``None``: call the wrapped LLM here."""
        found: ChatResponse | None = self._outcome(
            call, got, "chat", messages, ChatResponse, _rebuild_chat
        )
        return found

    @dispatcher.span
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Chat through the cache; ``agent_cache="bypass"`` (``"refresh"``,
        ``"no_store"``) sets this request's policy and is not passed to the LLM."""
        policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        call = None if policy == "bypass" else self._prepare("chat", kwargs, messages=messages)
        if call is None:
            return self._silent_inner().chat(messages, **kwargs)
        try:
            got = self._fetch(
                call, lambda: self._silent_inner().chat(messages, **kwargs), policy, _CHAT
            )
        except AgentCacheError as exc:  # e.g. a prompt over max_prompt_bytes
            log.warning("agent-cache skipped: %s", exc)
            got = None
        found = self._chat_outcome(call, got, messages)
        return found if found is not None else self._silent_inner().chat(messages, **kwargs)

    @dispatcher.span
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Async twin of :meth:`chat`."""
        policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        call = None if policy == "bypass" else self._prepare("chat", kwargs, messages=messages)
        if call is None:
            return await self._silent_inner().achat(messages, **kwargs)
        try:
            got = await self._afetch(
                call, lambda: self._silent_inner().achat(messages, **kwargs), policy, _CHAT
            )
        except AgentCacheError as exc:
            log.warning("agent-cache skipped: %s", exc)
            got = None
        found = self._chat_outcome(call, got, messages)
        return found if found is not None else await self._silent_inner().achat(messages, **kwargs)

    def _chat_replay(self, call: _Call, hit: CacheHit | None) -> Iterator[ChatResponse] | None:
        message = _codec.message_from_payload(hit.response) if hit is not None else None
        if hit is None or message is None:
            self._missed(call)
            return None
        return _codec.replay_chat(message, self._served(call, hit))

    # Streams: the wrapped LLM streams through the wrapper's callback manager (a miss is
    # counted once, by its own decorator); a replayed hit fires no callback event (zero
    # tokens), only the dispatcher's start/end events once the replay has run.
    @dispatcher.span
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """Stream through the cache; ``agent_cache=`` as in :meth:`chat`. Concurrent
        identical streamed misses share one model stream (the core's
        ``LayeredCache.fetch_stream``); it is stored once it has run to its end."""
        policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        call = None if policy == "bypass" else self._prepare("chat", kwargs, messages=messages)
        inner = self._silent_inner()
        if call is None:
            return inner.stream_chat(messages, **kwargs)
        args = self._stream_args(
            call, policy, lambda: _missed_marks(inner.stream_chat(messages, **kwargs)), _chat_final
        )
        stream: ChatResponseGen = self._streamed(
            call, args, self._chat_served, ("chat", messages),
            lambda: inner.stream_chat(messages, **kwargs),
        )  # fmt: skip
        return stream

    def _streamed(
        self,
        call: _Call,
        args: dict[str, Any],
        served: Callable[[_Call, Any], Iterator[Any] | None],
        announce: tuple[str, Any],
        direct: Callable[[], Any],
    ) -> Any:
        """The stream of a chat or completion call through ``fetch_stream``: a replay
        (announced as ``announce``, the API and its arguments, once run), or the model's
        stream read with the other identical requests; ``direct()`` (the wrapped LLM's
        own stream) when the cache refuses the request."""
        try:
            got = self._cache.fetch_stream(**args)
        except AgentCacheError as exc:  # e.g. a prompt over max_prompt_bytes
            log.warning("agent-cache skipped: %s", exc)
            return direct()
        replay = served(call, got)
        if replay is not None:
            return self._announced(*announce, replay)
        if got.served:  # an entry it cannot read: ask the model again, and overwrite it
            got = self._cache.fetch_stream(**{**args, "policy": _again(args["policy"])})
        return _followed(got)

    async def _astreamed(
        self,
        call: _Call,
        args: dict[str, Any],
        served: Callable[[_Call, Any], Iterator[Any] | None],
        announce: tuple[str, Any],
        direct: Callable[[], Awaitable[Any]],
    ) -> Any:
        """Async twin of :meth:`_streamed`."""
        try:
            got = await self._cache.afetch_stream(**args)
        except AgentCacheError as exc:
            log.warning("agent-cache skipped: %s", exc)
            return await direct()
        replay = served(call, got)
        if replay is not None:
            return self._aannounced(*announce, replay)
        if got.served:
            got = await self._cache.afetch_stream(**{**args, "policy": _again(args["policy"])})
        return _afollowed(got)

    def _announced(self, api: str, args: Any, replay: Iterator[Any]) -> Generator[Any, None, None]:
        last = None
        for last in replay:
            yield last
        if last is not None:
            self._announce_hit(api, args, last)

    async def _aannounced(
        self, api: str, args: Any, replay: Iterator[Any]
    ) -> AsyncGenerator[Any, None]:
        last = None
        for last in replay:
            yield last
        if last is not None:
            self._announce_hit(api, args, last)

    @dispatcher.span
    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        """Async twin of :meth:`stream_chat`."""
        policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        call = None if policy == "bypass" else self._prepare("chat", kwargs, messages=messages)
        inner = self._silent_inner()
        if call is None:
            return await inner.astream_chat(messages, **kwargs)

        async def start() -> ChatResponseAsyncGen:
            return _amissed_marks(await inner.astream_chat(messages, **kwargs))

        args = self._stream_args(call, policy, start, _chat_final)
        astream: ChatResponseAsyncGen = await self._astreamed(
            call, args, self._chat_served, ("chat", messages),
            lambda: inner.astream_chat(messages, **kwargs),
        )  # fmt: skip
        return astream

    # ------------------------------------------------------------------ streams
    def _stream_args(
        self,
        call: _Call,
        policy: str,
        start: Callable[[], Any],
        final: Callable[[list[Any]], Any],
    ) -> dict[str, Any]:
        """``fetch_stream``'s arguments: the finished stream's payload (``final``), its
        last response's usage as the tokens (and the KV-layer numbers)."""
        paid: list[Any] = []

        def join(chunks: list[Any]) -> Any:
            if not chunks:
                return None
            paid.append(chunks[-1])
            return final(chunks)

        def tokens(_payload: Any) -> Any:  # the stream's usage rides on its last response
            return self._paid_tokens(paid[0]) if paid else None

        return {
            **self._write_args(call, policy, tokens),
            "start_stream": start,
            "join": join,
        }

    def _chat_served(self, call: _Call, got: Any) -> Iterator[ChatResponse] | None:
        """The replay of a served stream outcome; ``None`` (a miss announced) when
        the model's stream is to be read."""
        if got.hit is not None:
            return self._chat_replay(call, got.hit)
        message = _codec.message_from_payload(got.value) if got.served else None
        if message is None:
            self._missed(call)
            return None
        return _codec.replay_chat(message, {"agent_cache": hit_info(coalesced=True)})

    def _completion_served(self, call: _Call, got: Any) -> Iterator[CompletionResponse] | None:
        """:meth:`_chat_served` for completions."""
        if got.hit is not None:
            served = self._completion_text(call, got.hit)
            return None if served is None else _codec.replay_completion(*served)
        text = _codec.completion_text(got.value) if got.served else None
        if text is None:
            self._missed(call)
            return None
        return _codec.replay_completion(text, {"agent_cache": hit_info(coalesced=True)})

    # ------------------------------------------------------------------ completion
    def _completion_text(
        self, call: _Call, hit: CacheHit | None
    ) -> tuple[str, dict[str, Any]] | None:
        text = _codec.completion_text(hit.response) if hit is not None else None
        if hit is None or text is None:
            self._missed(call)
            return None
        return text, self._served(call, hit)

    def _completion_outcome(
        self, call: _Call, got: Fetched | None, prompt: str
    ) -> CompletionResponse | None:
        """:meth:`_chat_outcome` for completions."""
        found: CompletionResponse | None = self._outcome(
            call, got, "complete", prompt, CompletionResponse, _rebuild_completion
        )
        return found

    @dispatcher.span
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Complete through the cache; ``agent_cache=`` as in :meth:`chat`."""
        policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        call = (
            None
            if policy == "bypass"
            else self._prepare("complete", {"formatted": formatted, **kwargs}, prompt=prompt)
        )
        if call is None:
            return self._silent_inner().complete(prompt, formatted=formatted, **kwargs)

        def compute() -> Any:
            return self._silent_inner().complete(prompt, formatted=formatted, **kwargs)

        try:
            got = self._fetch(call, compute, policy, _COMPLETION)
        except AgentCacheError as exc:
            log.warning("agent-cache skipped: %s", exc)
            got = None
        found = self._completion_outcome(call, got, prompt)
        if found is not None:
            return found
        return self._silent_inner().complete(prompt, formatted=formatted, **kwargs)

    @dispatcher.span
    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        """Async twin of :meth:`complete`."""
        policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        call = (
            None
            if policy == "bypass"
            else self._prepare("complete", {"formatted": formatted, **kwargs}, prompt=prompt)
        )
        inner = self._silent_inner()
        if call is None:
            return await inner.acomplete(prompt, formatted=formatted, **kwargs)
        try:
            got = await self._afetch(
                call,
                lambda: inner.acomplete(prompt, formatted=formatted, **kwargs),
                policy,
                _COMPLETION,
            )
        except AgentCacheError as exc:
            log.warning("agent-cache skipped: %s", exc)
            got = None
        found = self._completion_outcome(call, got, prompt)
        if found is not None:
            return found
        return await inner.acomplete(prompt, formatted=formatted, **kwargs)

    @dispatcher.span
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        """Stream a completion through the cache; as :meth:`stream_chat`."""
        policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        call = (
            None
            if policy == "bypass"
            else self._prepare("complete", {"formatted": formatted, **kwargs}, prompt=prompt)
        )
        inner = self._silent_inner()
        if call is None:
            return inner.stream_complete(prompt, formatted=formatted, **kwargs)
        args = self._stream_args(
            call,
            policy,
            lambda: _missed_marks(inner.stream_complete(prompt, formatted=formatted, **kwargs)),
            _completion_final,
        )
        stream: CompletionResponseGen = self._streamed(
            call, args, self._completion_served, ("complete", prompt),
            lambda: inner.stream_complete(prompt, formatted=formatted, **kwargs),
        )  # fmt: skip
        return stream

    @dispatcher.span
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        """Async twin of :meth:`stream_complete`."""
        policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        call = (
            None
            if policy == "bypass"
            else self._prepare("complete", {"formatted": formatted, **kwargs}, prompt=prompt)
        )
        inner = self._silent_inner()
        if call is None:
            return await inner.astream_complete(prompt, formatted=formatted, **kwargs)

        async def start() -> CompletionResponseAsyncGen:
            stream = await inner.astream_complete(prompt, formatted=formatted, **kwargs)
            return _amissed_marks(stream)

        args = self._stream_args(call, policy, start, _completion_final)
        astream: CompletionResponseAsyncGen = await self._astreamed(
            call, args, self._completion_served, ("complete", prompt),
            lambda: inner.astream_complete(prompt, formatted=formatted, **kwargs),
        )  # fmt: skip
        return astream

    # ------------------------------------------------------------------ template hints
    @contextlib.contextmanager
    def _hint(self, prompt: BasePromptTemplate, prompt_args: Mapping[str, Any]) -> Iterator[None]:
        args = {**(getattr(prompt, "kwargs", None) or {}), **prompt_args}
        token = _HINT.set(self._extractor.question_from_args(args))
        try:
            yield
        finally:
            _HINT.reset(token)

    def predict(self, prompt: BasePromptTemplate, **prompt_args: Any) -> str:
        """``LLM.predict``, remembering which template argument is the question."""
        with self._hint(prompt, prompt_args):
            return super().predict(prompt, **prompt_args)

    async def apredict(self, prompt: BasePromptTemplate, **prompt_args: Any) -> str:
        """``LLM.apredict``, remembering which template argument is the question."""
        with self._hint(prompt, prompt_args):
            return await super().apredict(prompt, **prompt_args)

    def stream(self, prompt: BasePromptTemplate, **prompt_args: Any) -> TokenGen:
        """``LLM.stream``, remembering which template argument is the question."""
        with self._hint(prompt, prompt_args):
            return super().stream(prompt, **prompt_args)

    async def astream(self, prompt: BasePromptTemplate, **prompt_args: Any) -> TokenAsyncGen:
        """``LLM.astream``, remembering which template argument is the question."""
        with self._hint(prompt, prompt_args):
            return await super().astream(prompt, **prompt_args)

    # ------------------------------------------------------------------ structured output
    def structured_predict(
        self,
        output_cls: type[Model],
        prompt: PromptTemplate,
        llm_kwargs: dict[str, Any] | None = None,
        **prompt_args: Any,
    ) -> Model:
        """``LLM.structured_predict``; an answer is stored only once ``output_cls`` has
        parsed it, and a cached answer that fails the parse is evicted (reported to
        ``cache.feedback`` as wrong), so the next call asks the model again."""
        with _structured.deferring(self._cache), self._hint(prompt, prompt_args):
            parsed: Model = super().structured_predict(
                output_cls, prompt, llm_kwargs, **prompt_args
            )
        return parsed

    async def astructured_predict(
        self,
        output_cls: type[Model],
        prompt: PromptTemplate,
        llm_kwargs: dict[str, Any] | None = None,
        **prompt_args: Any,
    ) -> Model:
        """Async twin of :meth:`structured_predict`."""
        async with _structured.adeferring(self._cache):
            with self._hint(prompt, prompt_args):
                parsed: Model = await super().astructured_predict(
                    output_cls, prompt, llm_kwargs, **prompt_args
                )
        return parsed

    # ------------------------------------------------------------------ function calling
    def _function_llm(self) -> FunctionCallingLLM:
        if not isinstance(self.llm, FunctionCallingLLM):
            raise ConfigurationError(
                f"the wrapped {type(self.llm).__name__} does not support function calling"
            )
        return self.llm

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[BaseTool],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The wrapped LLM's own preparation (tool specs, ``tool_choice``)."""
        return self._function_llm()._prepare_chat_with_tools_compat(
            tools,
            user_msg=user_msg,
            chat_history=chat_history,
            verbose=verbose,
            allow_parallel_tool_calls=allow_parallel_tool_calls,
            tool_required=tool_required,
            **kwargs,
        )

    def _validate_chat_with_tools_response(
        self,
        response: ChatResponse,
        tools: Sequence[BaseTool],
        allow_parallel_tool_calls: bool = False,
        **kwargs: Any,
    ) -> ChatResponse:
        if isinstance(self.llm, FunctionCallingLLM):
            return self.llm._validate_chat_with_tools_response(
                response, tools, allow_parallel_tool_calls=allow_parallel_tool_calls, **kwargs
            )
        return response

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        """The wrapped LLM's parsing of tool calls (cached answers keep theirs)."""
        return self._function_llm().get_tool_calls_from_response(
            response, error_on_no_tool_call=error_on_no_tool_call, **kwargs
        )


def _load_llm(data: Mapping[str, Any]) -> LLM:
    """An LLM from its ``to_dict()`` (found by ``class_name`` among the loaded LLM classes)."""
    name = data.get("class_name")
    stack: list[type[Any]] = [LLM]
    while stack:
        kind = stack.pop()
        stack.extend(kind.__subclasses__())
        try:
            found = kind.class_name() == name and not getattr(kind, "__abstractmethods__", None)
        except Exception:  # a subclass whose class_name needs an instance
            found = False
        if found:
            return kind.from_dict(dict(data))  # type: ignore[no-any-return]
    raise ConfigurationError(f"cannot rebuild the wrapped LLM: no loaded class named {name!r}")


def _missed_marks(stream: Iterable[Any]) -> Generator[Any, None, None]:
    """The model's responses marked as a miss, before any reader sees them."""
    for response in stream:
        response.additional_kwargs.setdefault("agent_cache", hit_info())
        yield response


async def _amissed_marks(stream: AsyncIterator[Any]) -> AsyncGenerator[Any, None]:
    async for response in stream:
        response.additional_kwargs.setdefault("agent_cache", hit_info())
        yield response


def _as_follower(response: Any) -> Any:
    """A follower's copy of a recorded response: marked coalesced (it cost nothing)."""
    kwargs = {**response.additional_kwargs, "agent_cache": hit_info(coalesced=True)}
    return response.model_copy(update={"additional_kwargs": kwargs})


def _followed(got: Any) -> Generator[Any, None, None]:
    """This reader's responses (a consumer that stops early leaves the stream to the
    others, or closes it when it was the last)."""
    try:
        for response in got:
            yield response if got.computed else _as_follower(response)
    finally:
        got.close()


async def _afollowed(got: Any) -> AsyncGenerator[Any, None]:
    try:
        async for response in got:
            yield response if got.computed else _as_follower(response)
    finally:
        await got.aclose()


def _rebuild_chat(response: Any, kwargs: dict[str, Any], coalesced: bool) -> ChatResponse:
    """A chat response of its own (a coalesced one copies the message too)."""
    message = response.message.model_copy(deep=True) if coalesced else response.message
    return ChatResponse(message=message, additional_kwargs=kwargs)


def _rebuild_completion(
    response: Any, kwargs: dict[str, Any], _coalesced: bool
) -> CompletionResponse:
    return CompletionResponse(text=response.text, additional_kwargs=kwargs)


def _again(policy: str) -> str:
    """The policy of a second try after an entry that could not be read."""
    return "no_store" if policy == "no_store" else "refresh"


def _chat_final(chunks: list[ChatResponse]) -> Any:
    message = _codec.final_message(chunks[-1], [r.delta or "" for r in chunks])
    return _codec.chat_payload(message)


def _completion_final(chunks: list[CompletionResponse]) -> Any:
    final = _final_completion(chunks[-1], [r.delta or "" for r in chunks])
    return _codec.completion_payload(final)


def _final_completion(last: CompletionResponse, deltas: Sequence[str]) -> CompletionResponse:
    joined = "".join(deltas)
    if len(joined) <= len(last.text):
        return last
    return CompletionResponse(text=joined)


def _reported(total: int | None, prompt: int | None) -> dict[str, int] | int | None:
    """The usage the model reported, split into prompt / completion when it can be
    (nothing reported: ``None``, and the core counts its own estimate apart)."""
    if total is not None and prompt is not None and total >= prompt:
        return {"prompt_tokens": prompt, "completion_tokens": total - prompt}
    return total
