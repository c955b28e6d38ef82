"""``cache_step``: reuse a workflow step's (or a plain function's) result for the same input.

Meant for pure, expensive sub-steps: planning, query rewriting or decomposition, a
chain-of-thought sub-question. A cached step is not run again, so side effects on the
workflow ``Context`` (``ctx.store.set``, ``ctx.send_event``) are not replayed: cache
only steps whose whole effect is their return value. A step that takes a ``Context`` is
therefore refused at decoration time unless ``allow_ctx=True`` says its context use is
safe to skip on a hit (reads only, or writes nothing later steps depend on).

Keys: for a workflow step, its input event(s) (class + fields as canonical JSON); the
``self`` / ``ctx`` / injected resources do not take part. For a plain function, all its
arguments (which must then be JSON-like). ``key=`` replaces either with your own.
QueryPipeline, for which this was once asked, was removed from LlamaIndex in 0.13; a
plain function used inside a workflow or a custom pipeline is decorated the same way.

Example:
    >>> from llama_index.core.workflow import Event, StartEvent, Workflow, step
    >>> class QueryEvent(Event):
    ...     query: str
    >>> class RAG(Workflow):
    ...     @step
    ...     @cache_step(name="rewrite", version="v2")
    ...     async def rewrite(self, ev: StartEvent) -> QueryEvent:
    ...         return QueryEvent(query=await llm.apredict(REWRITE, q=ev.query))
"""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from collections.abc import Callable
from typing import Any, TypeVar, cast

from llama_index.core.workflow import Context, Event
from llama_index.llms.agent_cache._cache import CacheArg, resolve_cache

from agent_cache import NOT_STORED, ConfigurationError, StepCache
from agent_cache.keys import canonical_json
from agent_cache.policy import is_cacheable

__all__ = ["cache_step"]

log = logging.getLogger("agent_cache.llama_index")
F = TypeVar("F", bound=Callable[..., Any])


def _event_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _event_json(event: Event) -> dict[str, Any]:
    """An event as JSON (class + fields).

    Raises:
        ConfigurationError: a field has no JSON form.
    """
    try:
        data = event.model_dump(mode="json")
        canonical_json(data)
    except Exception as exc:
        raise ConfigurationError(f"{type(event).__name__} has fields with no JSON form") from exc
    return {"event": _event_name(type(event)), "data": data}


def _is_context(annotation: Any) -> bool:
    if isinstance(annotation, str):  # an unresolved forward reference
        return annotation.rsplit(".", 1)[-1].startswith("Context")
    if isinstance(annotation, type):
        return issubclass(annotation, Context)
    return any(_is_context(arg) for arg in typing.get_args(annotation))


def _takes_context(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` has a ``Context`` parameter (by annotation, else named ``ctx``)."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to the raw annotations
        hints = {}
    for name, param in inspect.signature(fn).parameters.items():
        annotation = hints.get(name, param.annotation)
        if annotation is inspect.Parameter.empty:
            if name == "ctx":
                return True
        elif _is_context(annotation):
            return True
    return False


def _event_types(annotation: Any) -> set[type]:
    """Event classes named in a return annotation (unions and optionals included)."""
    if isinstance(annotation, type):
        return {annotation} if issubclass(annotation, Event) else set()
    found: set[type] = set()
    for arg in typing.get_args(annotation):
        found |= _event_types(arg)
    return found


class _Codec:
    """Encodes a step's input and output as JSON; decodes outputs into known events."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.signature = inspect.signature(fn)
        try:
            returns = typing.get_type_hints(fn).get("return")
        except Exception:  # unresolvable forward references: learn classes at run time
            returns = None
        self.events = {_event_name(c): c for c in _event_types(returns)}

    def key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The JSON value a call is keyed on.

        Raises:
            ConfigurationError: the input has no JSON form (the call then runs uncached,
                as ``cache_tool`` does).
        """
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = {
            name: value
            for name, value in bound.arguments.items()
            if name not in ("self", "cls") and not isinstance(value, Context)
        }
        events = {n: v for n, v in values.items() if isinstance(v, Event)}
        if events:  # a workflow step: keyed by its input event(s)
            return {name: _event_json(ev) for name, ev in sorted(events.items())}
        try:
            canonical_json(values)
        except ConfigurationError as exc:
            raise ConfigurationError(f"arguments have no JSON form ({exc})") from exc
        return values

    def encode(self, value: Any) -> Any:
        """The stored form of a step's output; ``NOT_STORED`` for ``None``, errors and
        values with no JSON form (returned, not stored)."""
        if isinstance(value, Event):
            self.events.setdefault(_event_name(type(value)), type(value))
            try:
                return _event_json(value)
            except ConfigurationError:
                return NOT_STORED
        if not is_cacheable(value):
            return NOT_STORED
        try:
            canonical_json(value)
        except ConfigurationError:
            return NOT_STORED
        return {"value": value}

    def decode(self, payload: Any) -> Any:
        """The output a payload stands for.

        Raises:
            ValueError: not a payload of this step (the core evicts it and runs the step).
        """
        if not isinstance(payload, dict):
            raise ValueError(f"not a stored step output: {type(payload).__name__}")
        if "value" in payload:
            return payload["value"]
        cls = self.events.get(str(payload.get("event")))
        if cls is None:  # an event class this step does not return: never import by name
            raise ValueError(f"stored event {payload.get('event')!r} is not one this step returns")
        data = dict(payload.get("data") or {})
        extra = data.pop("_data", None) or {}
        return cls(**data, **extra)


def cache_step(
    fn: F | None = None,
    *,
    name: str | None = None,
    cache: CacheArg = None,
    ttl: float | None = None,
    version: str = "",
    semantic: bool = False,
    key: Callable[..., Any] | None = None,
    allow_ctx: bool = False,
) -> Any:
    """Decorate a workflow step (under ``@step``) or a plain function to cache its result.

    Args:
        fn: the function (sync or async); the decorator also works without parentheses.
        name: the step's name in the cache (default: the function's qualified name).
        cache: a :class:`agent_cache.LayeredCache`, a directory, or ``None`` for the
            shared default ``.agent_cache``.
        ttl: seconds a result stays valid (``None``: the cache's TTL policy).
        version: bump when the step's logic or prompt changes.
        semantic: reuse results for paraphrased inputs (needs ``key=`` returning a str,
            e.g. the question to rewrite).
        key: ``key(*args, **kwargs)`` -> the JSON value (or str) to key on.
        allow_ctx: cache a step that takes a workflow ``Context``. On a hit the step does
            not run, so its ``ctx.store`` writes and ``ctx.send_event`` calls do not
            happen: opt in only when that is fine (the step reads ``ctx`` or writes
            nothing later steps need).

    Returns:
        The decorated function, with the same signature (so ``@step`` still sees the
        event types). ``None`` results, errors and non-JSON results are not stored; an
        input with no JSON form (a ``StartEvent`` field holding an object, a non-JSON
        argument) runs the step uncached, with a logged warning, as ``cache_tool`` does.

    Raises:
        ConfigurationError: the step takes a ``Context`` and ``allow_ctx`` is not set.

    The module's docstring has an example.
    """

    def decorate(func: F) -> F:
        step_name = name or func.__qualname__
        if not allow_ctx and _takes_context(func):
            raise ConfigurationError(
                f"cache_step({step_name!r}): the step takes a workflow Context, and its "
                "ctx.store writes / ctx.send_event calls are not replayed on a cache hit; "
                "pass allow_ctx=True if the step's whole effect is its return value"
            )
        steps = StepCache(resolve_cache(cache), ttl=ttl)
        step = _Step(func, step_name, steps, key, version=version, semantic=semantic)
        return cast(F, step.wrapper())

    return decorate(fn) if fn is not None else decorate


class _Step:
    """One decorated step (``func`` under ``name`` in ``steps``); :meth:`wrapper` is the
    function ``cache_step`` returns, async when ``func`` is."""

    def __init__(
        self, func: Callable[..., Any], name: str, steps: StepCache,
        key: Callable[..., Any] | None, **options: Any,
    ) -> None:  # fmt: skip
        self.func, self.name, self.steps, self.key = func, name, steps, key
        self.codec = _Codec(func)
        self.options = {**options, "encode": self.codec.encode, "decode": self.codec.decode}

    def wrapper(self) -> Callable[..., Any]:
        func = self.func
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                return await self._through(self.steps.arun, args, kwargs)

            return awrapper

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return self._through(self.steps.run, args, kwargs)

        return wrapper

    def _through(
        self, run: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """One call through the step cache (``run``: ``StepCache.run`` or ``arun``); the
        step's own call, uncached, when its input has no key."""
        keyed, value = self._value_of(args, kwargs)
        if not keyed:
            return self.func(*args, **kwargs)
        return run(self.name, value, lambda _value: self.func(*args, **kwargs), **self.options)

    def _value_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
        """(True, the value to key on), or (False, None): no key, run uncached."""
        if self.key is not None:
            return True, self.key(*args, **kwargs)
        try:
            return True, self.codec.key(args, kwargs)
        except ConfigurationError as exc:
            log.warning(
                "agent-cache: step %s not cached for this call: %s (pass key= to cache it)",
                self.name,
                exc,
            )
            return False, None
