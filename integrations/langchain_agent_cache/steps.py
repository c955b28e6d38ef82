"""``cache_step`` and ``@cached_step``: reuse an intermediate step's output across runs.

A planner, a query-decomposition chain or a reasoning sub-step often gets the same input
again (or, with ``semantic=True``, a paraphrase of it). The wrapped step's output is
kept in the core's ``StepCache``; inputs are canonicalized first (dicts by key, messages
by role and content, documents by content and metadata), outputs stored as JSON.
"""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.load import dumps
from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSerializable
from langchain_core.runnables.config import ensure_config, patch_config
from pydantic import BaseModel, ConfigDict, Field

from agent_cache import NOT_STORED, ConfigurationError, LayeredCache, StepCache
from agent_cache.keys import canonical_json
from langchain_agent_cache._chat import split_prompt
from langchain_agent_cache._codec import Uncacheable, decode_value, encode_value, jsonable
from langchain_agent_cache._resolve import layered_from

__all__ = ["CachedStep", "cache_step", "cached_step"]

log = logging.getLogger("agent_cache.langchain")

F = TypeVar("F", bound=Callable[..., Any])
_QUESTION_KEYS = ("question", "input", "query")


def _model_types(output_type: Any) -> tuple[type[BaseModel], ...]:
    if isinstance(output_type, type) and issubclass(output_type, BaseModel):
        return (output_type,)
    return ()


def _is_messages(value: Any) -> bool:
    return isinstance(value, PromptValue) or (
        isinstance(value, list) and bool(value) and all(isinstance(m, BaseMessage) for m in value)
    )


def semantic_split(value: Any, key: str | None = None) -> tuple[str, Any]:
    """The text a semantic step embeds, and the rest of its input (an exact scope).

    A string is all text. A dict gives ``value[key]`` (or its ``question``/``input``/
    ``query`` entry, or its only string entry); a message list gives its last human
    message, with the other messages as the scope.

    Raises:
        ConfigurationError: no text to embed can be found.

    Example:
        >>> semantic_split({"question": "Why?", "level": 2})
        ('Why?', {'level': 2})
    """
    if isinstance(value, str):
        return value, None
    if _is_messages(value):
        messages = value.to_messages() if isinstance(value, PromptValue) else value
        split = split_prompt(dumps(convert_to_messages(messages)))
        return split.question, split.context
    if isinstance(value, Mapping):
        if key is None:
            key = next((k for k in _QUESTION_KEYS if isinstance(value.get(k), str)), None)
        if key is None:
            texts = [k for k, v in value.items() if isinstance(v, str)]
            key = texts[0] if len(texts) == 1 else None
        if key is not None and isinstance(value.get(key), str):
            rest = {k: v for k, v in value.items() if k != key}
            return value[key], (jsonable(rest) if rest else None)
    raise ConfigurationError(
        "a semantic step needs a str, a message list, or a dict with one text entry "
        f"(or semantic_key=); got {type(value).__name__}"
    )


class _Step:
    """The shared logic of :class:`CachedStep` and :func:`cached_step` (no framework)."""

    def __init__(
        self,
        steps: StepCache,
        name: str,
        *,
        version: str,
        semantic: bool,
        ttl: float | None,
        semantic_key: str | None,
        models: Collection[type[BaseModel]],
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError("a cached step needs a non-empty name")
        self.steps = steps
        self.name = name
        self.version = version
        self.semantic = semantic
        self.ttl = ttl
        self.semantic_key = semantic_key
        self.models = tuple(models)

    def key(self, value: Any) -> tuple[Any, str]:
        """(what StepCache keys on, the version string carrying any exact scope)."""
        if self.semantic:
            text, rest = semantic_split(value, self.semantic_key)
            if rest is None:
                return text, self.version
            return text, canonical_json([self.version, rest])
        return jsonable(value), self.version

    def encode(self, out: Any) -> Any:
        """An output's stored form; ``NOT_STORED`` when it has no faithful JSON form."""
        try:
            return encode_value(out, self.models)
        except Uncacheable as exc:
            log.info("agent-cache: output of step %r not cached: %s", self.name, exc)
            return NOT_STORED

    def decode(self, stored: Any) -> Any:
        """Inverse of :meth:`encode` (raises on a payload it cannot read: the core then
        evicts the entry and runs the step)."""
        return decode_value(stored, self.models)

    def run(self, value: Any, compute: Callable[[], Any]) -> Any:
        return self._step(self.steps.run, value, compute)()

    async def arun(self, value: Any, compute: Callable[[], Any]) -> Any:
        return await self._step(self.steps.arun, value, compute)()

    def _step(
        self, cached: Callable[..., Any], value: Any, compute: Callable[[], Any]
    ) -> Callable[[], Any]:
        """The one call of a run: ``cached`` (``StepCache.run``, or ``arun``) for ``value``
        around ``compute`` (the step's call, or its awaitable)."""
        prompt, version = self.key(value)
        return functools.partial(
            cached, self.name, prompt, lambda _: compute(),
            version=version, semantic=self.semantic, ttl=self.ttl,
            encode=self.encode, decode=self.decode,
        )  # fmt: skip


class CachedStep(RunnableSerializable[Any, Any]):
    """A Runnable that reuses ``runnable``'s output for a repeated input; see
    :func:`cache_step`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    runnable: Runnable[Any, Any] = Field(exclude=True)
    step: Any = Field(exclude=True)  # _Step

    @property
    def InputType(self) -> Any:
        return self.runnable.InputType

    @property
    def OutputType(self) -> Any:
        return self.runnable.OutputType

    def _invoke(
        self, value: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> Any:
        child = patch_config(config, callbacks=run_manager.get_child())
        return self.step.run(value, lambda: self.runnable.invoke(value, child))

    async def _ainvoke(
        self, value: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> Any:
        child = patch_config(config, callbacks=run_manager.get_child())
        return await self.step.arun(value, lambda: self.runnable.ainvoke(value, child))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the step, or serve its stored output for this input."""
        return self._call_with_config(self._invoke, input, ensure_config(config))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Async twin of :meth:`invoke`."""
        return await self._acall_with_config(self._ainvoke, input, ensure_config(config))


def cache_step(
    runnable: Runnable[Any, Any],
    *,
    name: str,
    ttl: float | None = None,
    semantic: bool = False,
    cache: Any = None,
    version: str = "",
    semantic_key: str | None = None,
    models: Sequence[type[BaseModel]] = (),
    namespace: str = "steps",
) -> CachedStep:
    """Wrap a Runnable (a planner, a decomposition chain, a reasoning step) so that its
    output is reused when the same input comes again.

    Args:
        runnable: the step.
        name: the step's name; part of the key (two steps never share outputs).
        ttl: seconds an output stays valid (``None``: the cache's TTL policy).
        semantic: also reuse the output for a paraphrased input (the question text is
            embedded; the rest of the input is an exact scope).
        cache: an ``AgentCache`` or ``LayeredCache``; default: the shared embedded cache.
        version: bump it when the step's prompt or logic changes.
        semantic_key: which entry of a dict input is the text to embed.
        models: pydantic classes the output may be (the runnable's own output type is
            allowed automatically); other objects are served but not stored.
        namespace: the core namespace (semantic steps use ``f"{namespace}-semantic"``).

    Example (``llm`` a chat model)::

        plan = cache_step(planner_prompt | llm | parser, name="plan")
        plan.invoke({"question": "Compare RAG and fine-tuning"})
    """
    if not isinstance(runnable, Runnable):
        raise ConfigurationError(f"cache_step needs a Runnable, not {type(runnable).__name__}")
    layered: LayeredCache = layered_from(cache)
    step = _Step(
        StepCache(layered, ttl=ttl, namespace=namespace), name, version=version,
        semantic=semantic, ttl=ttl, semantic_key=semantic_key,
        models=(*_model_types(runnable.OutputType), *models),
    )  # fmt: skip
    return CachedStep(runnable=runnable, step=step, name=name)


def cached_step(
    *,
    name: str,
    ttl: float | None = None,
    semantic: bool = False,
    cache: Any = None,
    version: str = "",
    models: Sequence[type[BaseModel]] = (),
    namespace: str = "steps",
) -> Callable[[F], F]:
    """Decorator: :func:`cache_step` for a plain function or coroutine function.

    The key is the canonical JSON of all arguments; with ``semantic=True`` the function
    takes one text argument (or a dict / message list, as :func:`semantic_split` reads).

    Example:
        >>> @cached_step(name="decompose")
        ... def decompose(question: str) -> list[str]:
        ...     return [q.strip() for q in question.split(" and ")]
    """

    def deco(fn: F) -> F:
        try:
            hints = typing.get_type_hints(fn).get("return")
        except Exception:  # unresolvable annotations: no model output type
            hints = None
        step = _Step(
            StepCache(layered_from(cache), ttl=ttl, namespace=namespace), name,
            version=version, semantic=semantic, ttl=ttl, semantic_key=None,
            models=(*_model_types(hints), *models),
        )  # fmt: skip

        def value_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if semantic:
                if len(args) != 1 or kwargs:
                    raise ConfigurationError("a semantic cached_step takes one argument")
                return args[0]
            return {"args": list(args), "kwargs": kwargs}

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                return await step.arun(value_of(args, kwargs), lambda: fn(*args, **kwargs))

            return awrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return step.run(value_of(args, kwargs), lambda: fn(*args, **kwargs))

        return wrapper  # type: ignore[return-value]

    return deco
