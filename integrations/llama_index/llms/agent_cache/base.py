"""``CachedLLM``: any LlamaIndex LLM behind agent-cache's layered cache.

Eight entry points (``chat``/``complete`` x streamed or not x sync or async), one path
each way: a :class:`._path.Request`'s ``whole`` or ``streamed`` body, over the API's spec
(:mod:`._apis`), its steps run now (``drive``) or awaited (``adrive``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

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
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import LLM, ToolSelection
from llama_index.core.prompts.base import BasePromptTemplate, PromptTemplate
from llama_index.core.tools.types import BaseTool
from llama_index.core.types import Model
from llama_index.llms.agent_cache import _marker, _structured
from llama_index.llms.agent_cache._apis import CHAT, COMPLETE
from llama_index.llms.agent_cache._cache import CacheArg, load_llm, resolve_cache
from llama_index.llms.agent_cache._path import (
    ASYNC,
    HINT,
    SYNC,
    Request,
    adrive,
    dispatcher,
    drive,
)
from llama_index.llms.agent_cache.question import QuestionExtractor

from agent_cache import ConfigurationError, LayeredCache
from agent_cache._names import reject_unknown

__all__ = ["CachedLLM"]

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
     "question_extractor", "cache_path"}
)  # fmt: skip


F = TypeVar("F", bound=Callable[..., Any])


def _hinted(method: F) -> F:
    """``LLM``'s ``method`` (``predict``, ``astream``, ...), remembering which template
    argument is the question (the template's and the call's arguments)."""
    if inspect.iscoroutinefunction(method):

        async def arun(self: CachedLLM, prompt: BasePromptTemplate, **prompt_args: Any) -> Any:
            with self._hint(prompt, prompt_args):
                return await method(self, prompt, **prompt_args)

        return _named(arun, method)

    def run(self: CachedLLM, prompt: BasePromptTemplate, **prompt_args: Any) -> Any:
        with self._hint(prompt, prompt_args):
            return method(self, prompt, **prompt_args)

    return _named(run, method)


def _named(run: Callable[..., Any], method: F) -> F:
    run.__name__ = method.__name__
    run.__qualname__ = f"CachedLLM.{method.__name__}"
    run.__doc__ = f"``LLM.{method.__name__}``, remembering which template argument is the question."
    return cast(F, run)


class _Hint:
    """The question in a template call's arguments, as :data:`HINT` inside (``with``, or
    ``async with`` beside an async scope such as :func:`_structured.adeferring`)."""

    def __init__(self, extractor: QuestionExtractor, args: Mapping[str, Any]) -> None:
        self.extractor, self.args = extractor, args

    def __enter__(self) -> None:
        self.token = HINT.set(self.extractor.question_from_args(self.args))

    def __exit__(self, *exc: object) -> None:
        HINT.reset(self.token)

    async def __aenter__(self) -> None:
        self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()


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

    Per request, ``llm.chat(messages, agent_cache="bypass")`` (or ``"refresh"``,
    ``"no_store"``; see :func:`agent_cache.policy.request_policy`) sets the cache policy;
    it is never passed to the wrapped LLM. A hit fires no callback-manager LLM event
    (``TokenCountingHandler`` counts it as zero) but the dispatcher's start/end events
    and a ``CacheHitEvent``; a miss is counted once, by the wrapped call. The cache's
    directory (``cache_path``) survives pickling and ``to_dict``/``from_dict``.

    Example (needs an OpenAI-compatible server)::

        from llama_index.core import Settings
        from llama_index.llms.openai_like import OpenAILike
        Settings.llm = CachedLLM(
            llm=OpenAILike(api_base="http://127.0.0.1:8000/v1", model="m", is_chat_model=True),
            cache=".agent_cache",
        )
    """

    llm: SerializeAsAny[LLM] = Field(description="The wrapped LLM.")
    namespace: str = Field(default="default", description="Cache namespace.")
    ttl: float | None = Field(default=None, description="Seconds an answer stays valid.")
    tags: list[str] = Field(default_factory=list, description="Tags stored with answers.")
    llm_string: str | None = Field(default=None, description="Model identity override.")
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

    @property
    def metadata(self) -> LLMMetadata:
        """The wrapped LLM's metadata (context window, chat / function calling flags)."""
        return self.llm.metadata

    @classmethod
    def class_name(cls) -> str:
        return "CachedLLM"

    @property
    def cache(self) -> LayeredCache:
        """The :class:`agent_cache.LayeredCache` in use (``cache.stats()``, invalidation)."""
        return self._cache

    def _silent_inner(self) -> LLM:
        """The wrapped LLM, reporting to this wrapper's callback manager: a miss is
        counted once (by the wrapped call), a hit not at all (no model call)."""
        if self.llm.callback_manager is not self.callback_manager:
            self.llm.callback_manager = self.callback_manager
        return self.llm

    # ------------------------------------------------------------------ the entry points
    # One body each way (:class:`._path.Request`), run now or awaited. ``agent_cache=``
    # (``"bypass"``, ``"refresh"``, ``"no_store"``) sets a request's policy and is not
    # passed to the LLM; a completion's ``formatted`` is one of its keyed kwargs.
    @dispatcher.span
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Chat through the cache (``agent_cache=`` the request's policy)."""
        return drive(Request(self, CHAT, messages, kwargs, SYNC).whole())

    @dispatcher.span
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        """Async twin of :meth:`chat`."""
        return await adrive(Request(self, CHAT, messages, kwargs, ASYNC).whole())

    @dispatcher.span
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        """Stream a chat through the cache; a hit is replayed word by word."""
        stream: ChatResponseGen = drive(Request(self, CHAT, messages, kwargs, SYNC).streamed())
        return stream

    @dispatcher.span
    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        """Async twin of :meth:`stream_chat`."""
        request = Request(self, CHAT, messages, kwargs, ASYNC)
        stream: ChatResponseAsyncGen = await adrive(request.streamed())
        return stream

    @dispatcher.span
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Complete through the cache (``agent_cache=`` as in :meth:`chat`)."""
        kw = {"formatted": formatted, **kwargs}
        return drive(Request(self, COMPLETE, prompt, kw, SYNC).whole())

    @dispatcher.span
    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        """Async twin of :meth:`complete`."""
        kw = {"formatted": formatted, **kwargs}
        return await adrive(Request(self, COMPLETE, prompt, kw, ASYNC).whole())

    @dispatcher.span
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        """Stream a completion through the cache; as :meth:`stream_chat`."""
        kw = {"formatted": formatted, **kwargs}
        stream: CompletionResponseGen = drive(Request(self, COMPLETE, prompt, kw, SYNC).streamed())
        return stream

    @dispatcher.span
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        """Async twin of :meth:`stream_complete`."""
        request = Request(self, COMPLETE, prompt, {"formatted": formatted, **kwargs}, ASYNC)
        stream: CompletionResponseAsyncGen = await adrive(request.streamed())
        return stream

    # ------------------------------------------------------------------ template hints
    # ``LLM``'s predict/stream entry points, each remembering the question (:func:`_hinted`)
    def _hint(self, prompt: BasePromptTemplate, prompt_args: Mapping[str, Any]) -> _Hint:
        return _Hint(self._extractor, {**(getattr(prompt, "kwargs", None) or {}), **prompt_args})

    predict = _hinted(LLM.predict)
    apredict = _hinted(LLM.apredict)
    stream = _hinted(LLM.stream)
    astream = _hinted(LLM.astream)

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
            parsed = super().structured_predict(output_cls, prompt, llm_kwargs, **prompt_args)
            return cast(Model, parsed)

    async def astructured_predict(
        self,
        output_cls: type[Model],
        prompt: PromptTemplate,
        llm_kwargs: dict[str, Any] | None = None,
        **prompt_args: Any,
    ) -> Model:
        """Async twin of :meth:`structured_predict`."""
        async with _structured.adeferring(self._cache), self._hint(prompt, prompt_args):
            parsed = super().astructured_predict(output_cls, prompt, llm_kwargs, **prompt_args)
            return cast(Model, await parsed)

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
