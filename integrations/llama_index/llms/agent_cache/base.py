"""``CachedLLM``: any LlamaIndex LLM behind agent-cache's layered cache.

Eight entry points (``chat``/``complete`` x streamed or not x sync or async), one path
each way: :meth:`CachedLLM._run` / ``_arun`` for a whole answer, ``_stream`` /
``_astream`` for a stream, over the API's spec table (:mod:`._apis`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Generator, Iterator, Mapping, Sequence
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
from llama_index.llms.agent_cache._apis import (
    CHAT,
    COMPLETE,
    Api,
    afollowed,
    amissed_marks,
    followed,
    missed_marks,
    reported,
)
from llama_index.llms.agent_cache._cache import CacheArg, load_llm, resolve_cache
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
#: The wrapped LLM's call for one request (a response, a stream, or an awaitable of one).
_Ask = Callable[[LLM], Any]


@dataclass(frozen=True)
class _Call:
    scope: Scope
    llm_string: str


@contextlib.contextmanager
def _skipped() -> Iterator[None]:
    """A request the cache refuses (e.g. a prompt over ``max_prompt_bytes``) goes to the
    wrapped LLM: logged, never raised."""
    try:
        yield
    except AgentCacheError as exc:
        log.warning("agent-cache skipped: %s", exc)


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
            llm = load_llm(llm)
        # a pickled or serialized CachedLLM names its cache by cache_path
        resolved = resolve_cache(cache_path if cache is None else cache, embedder)
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
    def _begin(self, api: Api, args: Any, kwargs: dict[str, Any]) -> tuple[str, _Call | None]:
        """The request's policy (popped from ``kwargs``: never passed on) and its lookup
        arguments (``args``: the messages or the prompt), ``None`` when the call bypasses
        the cache."""
        policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        if policy == "bypass":
            return policy, None
        try:
            identity = _codec.llm_string(api.name, self.llm, self.llm_string, kwargs)
            hint = _HINT.get()
            if api is CHAT:
                scope = self._extractor.scope_messages(args, hint)
            else:
                scope = self._extractor.scope_prompt(args or "", hint)
        except ConfigurationError as exc:  # Unkeyable kwargs, no text to key on, bad input
            log.debug("agent-cache: %s call bypasses the cache: %s", api.name, exc)
            return policy, None
        return policy, _Call(scope, identity)

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
        return reported(total, prompt_tokens)

    def _write_args(self, call: _Call, policy: str, tokens: Callable[[Any], Any]) -> dict[str, Any]:
        return {
            **self._lookup_args(call),
            "ttl": self.ttl,
            "tags": self.tags,
            "policy": policy,
            "tokens": tokens,
        }

    def _fetch_args(self, call: _Call, policy: str, api: Api, ask: _Ask) -> dict[str, Any]:
        """``fetch``'s arguments (``ask(llm)``: the wrapped LLM's call); inside a
        structured call the write waits for the parse (the policy the core gets is then
        :data:`_DEFERRED`'s)."""
        core = policy if _structured.current() is None else _DEFERRED[policy]
        args = self._write_args(call, core, self._paid_tokens)
        codec = {"encode": api.encode, "decode": api.decode}
        return {**args, **codec, "compute": lambda: ask(self._silent_inner())}

    def _defer(self, call: _Call, got: Fetched, policy: str, api: Api) -> Fetched:
        """Inside a structured call: remember what was served (evicted if the parse
        fails) and what to store (once it succeeds)."""
        pending = _structured.current()
        if pending is not None:
            where = {**self._lookup_args(call), "ttl": self.ttl, "tags": self.tags}
            pending.record(got, policy, api.encode, where)
        return got

    def _silent_inner(self) -> LLM:
        """The wrapped LLM, reporting to this wrapper's callback manager: a miss is
        counted once (by the wrapped call), a hit not at all (no model call)."""
        if self.llm.callback_manager is not self.callback_manager:
            self.llm.callback_manager = self.callback_manager
        return self.llm

    def _announce_hit(self, api: Api, args: Any, response: Any) -> None:
        """The start/end events a wrapped call would have sent, for a served hit (no
        callback-manager event: token counters count a hit as zero)."""
        payload = self.to_payload() if hasattr(self, "to_payload") else {}
        if api is CHAT:
            dispatcher.event(
                LLMChatStartEvent(model_dict=payload, messages=list(args), additional_kwargs={})
            )
            dispatcher.event(LLMChatEndEvent(messages=list(args), response=response))
        else:
            dispatcher.event(
                LLMCompletionStartEvent(model_dict=payload, prompt=args, additional_kwargs={})
            )
            dispatcher.event(LLMCompletionEndEvent(prompt=args, response=response))

    def _outcome(self, call: _Call, got: Fetched | None, policy: str, api: Api, args: Any) -> Any:
        """The response (an ``api.kind``) for a core outcome; ``None``: call the wrapped
        LLM here."""
        if got is None:
            return None
        self._defer(call, got, policy, api)
        if not isinstance(got.value, api.kind):
            return None
        response = got.value
        if got.computed:
            self._missed(call)
            response.additional_kwargs["agent_cache"] = hit_info()
            return response
        if got.hit is not None:  # a fresh object, decoded from the entry
            served = api.rebuild(response, self._served(call, got.hit), False)
            self._announce_hit(api, args, served)
            return served
        # the concurrent caller's answer: a copy of its own
        return api.rebuild(response, {"agent_cache": hit_info(coalesced=True)}, True)

    def _run(self, api: Api, args: Any, kwargs: dict[str, Any], ask: _Ask) -> Any:
        """One whole answer: ``ask(llm)`` is the wrapped LLM's call, made on a miss (or
        when the cache refuses the request)."""
        policy, call = self._begin(api, args, kwargs)
        if call is None:
            return ask(self._silent_inner())
        got = None
        with _skipped():
            got = self._cache.fetch(**self._fetch_args(call, policy, api, ask))
        found = self._outcome(call, got, policy, api, args)
        return found if found is not None else ask(self._silent_inner())

    async def _arun(self, api: Api, args: Any, kwargs: dict[str, Any], ask: _Ask) -> Any:
        """Async twin of :meth:`_run` (``ask(llm)`` returns an awaitable)."""
        policy, call = self._begin(api, args, kwargs)
        if call is None:
            return await ask(self._silent_inner())
        got = None
        with _skipped():
            got = await self._cache.afetch(**self._fetch_args(call, policy, api, ask))
        found = self._outcome(call, got, policy, api, args)
        return found if found is not None else await ask(self._silent_inner())

    # ------------------------------------------------------------------ streams
    # The wrapped LLM streams through the wrapper's callback manager (a miss is counted
    # once, by its own decorator); a replayed hit fires no callback event (zero tokens),
    # only the dispatcher's start/end events once the replay has run. Concurrent
    # identical streamed misses share one model stream (``LayeredCache.fetch_stream``),
    # stored once it has run to its end.
    def _stream_args(self, call: _Call, policy: str, start: Callable[[], Any], api: Api) -> Any:
        """``fetch_stream``'s arguments: the finished stream's payload (``api.final``;
        none: not stored), a stored one it cannot replay a miss (``decode`` raises: the
        core asks the model again), its last response's usage as the tokens (and the
        KV-layer numbers)."""
        paid: list[Any] = []

        def join(chunks: list[Any]) -> Any:
            if not chunks:
                return None
            paid.append(chunks[-1])
            return api.final(chunks)

        def readable(payload: Any) -> Any:
            if api.read(payload) is None:
                raise SerializationError(f"not a stored {api.name} answer")
            return payload

        def tokens(_payload: Any) -> Any:  # the stream's usage rides on its last response
            return self._paid_tokens(paid[0]) if paid else None

        codec = {"encode": lambda p: NOT_STORED if p is None else p, "decode": readable}
        return {
            **self._write_args(call, policy, tokens),
            **codec,
            "start_stream": start,
            "join": join,
        }

    def _replay(self, call: _Call, got: Any, api: Api) -> Iterator[Any] | None:
        """The replay of a served stream outcome (a hit the core found readable, or a
        concurrent request's answer); ``None`` (a miss announced) when the model's
        stream is to be read."""
        if not got.served:
            self._missed(call)
            return None
        hit, item = got.hit, api.read(got.value)
        if hit is None:
            return api.replay(item, {"agent_cache": hit_info(coalesced=True)})
        return api.replay(item, self._served(call, hit))

    def _stream(self, api: Api, args: Any, kwargs: dict[str, Any], open_: _Ask) -> Any:
        """A streamed request: a replay, or the model's stream (``open_(llm)``) read with
        the other identical requests; the wrapped LLM's own stream when the cache refuses
        the request."""
        policy, call = self._begin(api, args, kwargs)
        inner = self._silent_inner()
        if call is None:
            return open_(inner)
        fetch = self._stream_args(call, policy, lambda: missed_marks(open_(inner)), api)
        got = None
        with _skipped():
            got = self._cache.fetch_stream(**fetch)
        if got is None:
            return open_(inner)
        replay = self._replay(call, got, api)
        if replay is not None:
            return self._announced(api, args, replay)
        return followed(got)

    async def _astream(self, api: Api, args: Any, kwargs: dict[str, Any], open_: _Ask) -> Any:
        """Async twin of :meth:`_stream` (``open_(llm)`` returns an awaitable stream)."""
        policy, call = self._begin(api, args, kwargs)
        inner = self._silent_inner()
        if call is None:
            return await open_(inner)

        async def start() -> Any:
            return amissed_marks(await open_(inner))

        fetch = self._stream_args(call, policy, start, api)
        got = None
        with _skipped():
            got = await self._cache.afetch_stream(**fetch)
        if got is None:
            return await open_(inner)
        replay = self._replay(call, got, api)
        if replay is not None:
            return self._aannounced(api, args, replay)
        return afollowed(got)

    def _announced(self, api: Api, args: Any, replay: Iterator[Any]) -> Generator[Any, None, None]:
        last = None
        for last in replay:
            yield last
        if last is not None:
            self._announce_hit(api, args, last)

    async def _aannounced(
        self, api: Api, args: Any, replay: Iterator[Any]
    ) -> AsyncGenerator[Any, None]:
        last = None
        for last in replay:
            yield last
        if last is not None:
            self._announce_hit(api, args, last)

    # ------------------------------------------------------------------ the entry points
    # ``agent_cache="bypass"`` (``"refresh"``, ``"no_store"``) sets a request's policy and
    # is not passed to the LLM.
    @dispatcher.span
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Chat through the cache (``agent_cache=`` the request's policy)."""
        answer: ChatResponse = self._run(
            CHAT, messages, kwargs, lambda llm: llm.chat(messages, **kwargs)
        )
        return answer

    @dispatcher.span
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Async twin of :meth:`chat`."""
        answer: ChatResponse = await self._arun(
            CHAT, messages, kwargs, lambda llm: llm.achat(messages, **kwargs)
        )
        return answer

    @dispatcher.span
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """Stream a chat through the cache; a hit is replayed word by word."""
        stream: ChatResponseGen = self._stream(
            CHAT, messages, kwargs, lambda llm: llm.stream_chat(messages, **kwargs)
        )
        return stream

    @dispatcher.span
    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        """Async twin of :meth:`stream_chat`."""
        stream: ChatResponseAsyncGen = await self._astream(
            CHAT, messages, kwargs, lambda llm: llm.astream_chat(messages, **kwargs)
        )
        return stream

    # A completion's ``formatted`` is one of its keyed kwargs.
    @dispatcher.span
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Complete through the cache (``agent_cache=`` as in :meth:`chat`)."""
        kw = {"formatted": formatted, **kwargs}
        answer: CompletionResponse = self._run(
            COMPLETE, prompt, kw, lambda llm: llm.complete(prompt, **kw)
        )
        return answer

    @dispatcher.span
    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        """Async twin of :meth:`complete`."""
        kw = {"formatted": formatted, **kwargs}
        answer: CompletionResponse = await self._arun(
            COMPLETE, prompt, kw, lambda llm: llm.acomplete(prompt, **kw)
        )
        return answer

    @dispatcher.span
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        """Stream a completion through the cache; as :meth:`stream_chat`."""
        kw = {"formatted": formatted, **kwargs}
        stream: CompletionResponseGen = self._stream(
            COMPLETE, prompt, kw, lambda llm: llm.stream_complete(prompt, **kw)
        )
        return stream

    @dispatcher.span
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        """Async twin of :meth:`stream_complete`."""
        kw = {"formatted": formatted, **kwargs}
        stream: CompletionResponseAsyncGen = await self._astream(
            COMPLETE, prompt, kw, lambda llm: llm.astream_complete(prompt, **kw)
        )
        return stream

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
