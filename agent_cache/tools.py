"""Tool-result and sub-step caches (core; the framework adapters build on these).

``ToolCache`` keys a tool call by tool name + tool version + the canonical JSON of its
arguments (key order, JSON whitespace and ``1`` vs ``1.0`` don't matter), exact layer
only. Arguments are data: the canonical JSON is the key *verbatim*, never case-folded or
whitespace-collapsed (``read_file("/data/Report.txt")`` is not ``/data/report.txt``);
pass ``normalize_args=True`` to opt in to the prompt normalization instead.
A call whose key cannot be built (arguments nested too deep for the store, over
``max_prompt_bytes``, text that is not valid Unicode, a value JSON has no form for) runs
the tool uncached: counted in ``stats().counters["uncached_calls"]``, logged once per tool
or step; the cache never makes the call fail.
``StepCache`` reuses an intermediate step's output (a plan, a query decomposition) for the
same input, or with ``semantic=True`` for a paraphrased one.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from agent_cache import _request as rq
from agent_cache.cache import LayeredCache
from agent_cache.errors import ConfigurationError
from agent_cache.keys import canonical_json

__all__ = ["StepCache", "ToolCache"]

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("agent_cache")


def _check_args(args: Any) -> Mapping[str, Any]:
    if not isinstance(args, Mapping):
        raise ConfigurationError("tool arguments must be a mapping of name to value")
    return args


class _Keys:
    """Builds a call's prompt (its key text); ``None`` when it cannot be built: the call
    then runs uncached, counted and logged once per tool or step."""

    def __init__(self, cache: LayeredCache, namespace: str) -> None:
        self.cache = cache
        self.namespace = rq.check_name(namespace)
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def prompt(
        self, build: Callable[[], str], llm_string: str, namespace: str, verbatim: bool
    ) -> str | None:
        try:
            prompt = build()
            # the checks get_or_compute makes (size, Unicode), so none fails there
            self.cache._prepare(prompt, llm_string, namespace, None, "", verbatim)
        except Exception as exc:
            self._uncached(llm_string, namespace, exc)
            return None
        return prompt

    def _uncached(self, llm_string: str, namespace: str, exc: Exception) -> None:
        self.cache.recorder.incr("uncached_calls", namespace=namespace)
        with self._lock:
            first = llm_string not in self._warned
            self._warned.add(llm_string)
        (log.warning if first else log.debug)(
            "agent-cache: no key for a call of %s (run uncached): %s: %.200s",
            llm_string,
            type(exc).__name__,
            exc,
        )


class ToolCache:
    """Caches tool results by canonical arguments.

    Args:
        cache: the :class:`LayeredCache` to keep results in.
        ttl: default seconds a result stays valid (``None``: the cache's policy).
        namespace: where tool results live (exact-only by default in ``LayeredCache``).

    Example:
        >>> from agent_cache.testing import HashEmbedder
        >>> tools = ToolCache(LayeredCache(path=None, embedder=HashEmbedder()), ttl=600)
        >>> def fetch(city: str) -> str:  # the real tool would call a weather API
        ...     return f"{city}: 4 C, rain"
        >>> tools.call("get_weather", {"city": "Oslo"}, lambda city: fetch(city))
        'Oslo: 4 C, rain'
        >>> tools.call("get_weather", {"city": "Oslo"}, lambda city: "not called: a hit")
        'Oslo: 4 C, rain'
    """

    def __init__(
        self,
        cache: LayeredCache,
        *,
        ttl: float | None = None,
        namespace: str = "tools",
        normalize_args: bool = False,
    ) -> None:
        self.cache = cache
        self.ttl = ttl
        self.namespace = namespace
        self.normalize_args = normalize_args
        self._keys = _Keys(cache, namespace)

    def _ids(self, tool: str, version: str) -> str:
        if not isinstance(tool, str) or not tool:
            raise ConfigurationError("tool name must be a non-empty str")
        return f"tool:{tool}@{version}"

    def _plan(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[..., Any],
        version: str,
        ttl: float | None,
        tags: tuple[str, ...],
        encode: Callable[[Any], Any] | None,
        decode: Callable[[Any], Any] | None,
    ) -> tuple[Callable[[], Any], str | None, dict[str, Any]]:
        """What :meth:`call` and :meth:`acall` share: ``fn`` bound to the checked
        arguments, the call's prompt (``None``: no key, the tool runs uncached) and the
        rest of what ``get_or_compute`` takes."""
        llm_string = self._ids(tool, version)
        args = _check_args(args)
        verbatim = not self.normalize_args
        prompt = self._keys.prompt(
            lambda: canonical_json(dict(args)), llm_string, self.namespace, verbatim
        )
        options = {
            "llm_string": llm_string,
            "namespace": self.namespace,
            "ttl": ttl if ttl is not None else self.ttl,
            "tags": tags,
            "verbatim": verbatim,
            "encode": encode,
            "decode": decode,
        }
        return (lambda: fn(**args)), prompt, options

    def call(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[..., Any],
        *,
        version: str = "",
        ttl: float | None = None,
        tags: tuple[str, ...] = (),
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Return ``fn(**args)``, cached. Exceptions propagate and are never cached;
        ``encode``/``decode`` as in :meth:`LayeredCache.get_or_compute` (the tool's
        output object to its stored JSON, or ``NOT_STORED``, and back)."""
        run, prompt, kw = self._plan(tool, args, fn, version, ttl, tags, encode, decode)
        return run() if prompt is None else self.cache.get_or_compute(prompt, run, **kw)

    async def acall(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[..., Awaitable[Any]],
        *,
        version: str = "",
        ttl: float | None = None,
        tags: tuple[str, ...] = (),
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Async twin of :meth:`call`."""
        run, prompt, kw = self._plan(tool, args, fn, version, ttl, tags, encode, decode)
        return await (run() if prompt is None else self.cache.aget_or_compute(prompt, run, **kw))


class StepCache:
    """Reuses a named intermediate step's output for the same (or a paraphrased) input.

    Example:
        >>> from agent_cache.testing import HashEmbedder
        >>> steps = StepCache(LayeredCache(path=None, embedder=HashEmbedder()))
        >>> @steps.cached(name="plan")
        ... def plan(question: str) -> list[str]:
        ...     print("planning")
        ...     return ["retrieve", "answer"]
        >>> plan("What is RAG?")
        planning
        ['retrieve', 'answer']
        >>> plan("What is RAG?")  # the stored plan: no "planning"
        ['retrieve', 'answer']
    """

    def __init__(
        self, cache: LayeredCache, *, ttl: float | None = None, namespace: str = "steps"
    ) -> None:
        self.cache = cache
        self.ttl = ttl
        self.namespace = namespace
        self._keys = _Keys(cache, namespace)

    # ``namespace`` is exact-only in LayeredCache's defaults; semantic steps use
    # ``f"{namespace}-semantic"`` so that canonical JSON inputs are never embedded.

    def _prompt(self, value: Any, semantic: bool) -> str:
        if semantic:
            if not isinstance(value, str):
                raise ConfigurationError("a semantic step needs a str input")
            return value
        return value if isinstance(value, str) else canonical_json(value)

    def _plan(
        self,
        name: str,
        value: Any,
        fn: Callable[[Any], Any],
        version: str,
        semantic: bool,
        ttl: float | None,
        encode: Callable[[Any], Any] | None,
        decode: Callable[[Any], Any] | None,
    ) -> tuple[Callable[[], Any], str | None, dict[str, Any]]:
        """What :meth:`run` and :meth:`arun` share: ``fn`` bound to ``value``, the step
        call's prompt (``None`` when no key can be built: the call then runs uncached)
        and the rest of what ``get_or_compute`` takes."""
        llm_string = f"step:{name}@{version}"
        namespace = f"{self.namespace}-semantic" if semantic else self.namespace
        if semantic and not isinstance(value, str):
            raise ConfigurationError("a semantic step needs a str input")
        prompt = self._keys.prompt(
            lambda: self._prompt(value, semantic), llm_string, namespace, not semantic
        )
        options = {
            "llm_string": llm_string,
            "namespace": namespace,
            "ttl": ttl if ttl is not None else self.ttl,
            "verbatim": not semantic,
            "encode": encode,
            "decode": decode,
        }
        return (lambda: fn(value)), prompt, options

    def run(
        self,
        name: str,
        value: Any,
        fn: Callable[[Any], Any],
        *,
        version: str = "",
        semantic: bool = False,
        ttl: float | None = None,
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Return ``fn(value)``, reusing the stored output of step ``name`` for ``value``;
        ``encode``/``decode`` as in :meth:`LayeredCache.get_or_compute`."""
        run, prompt, kw = self._plan(name, value, fn, version, semantic, ttl, encode, decode)
        return run() if prompt is None else self.cache.get_or_compute(prompt, run, **kw)

    async def arun(
        self,
        name: str,
        value: Any,
        fn: Callable[[Any], Awaitable[Any]],
        *,
        version: str = "",
        semantic: bool = False,
        ttl: float | None = None,
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Async twin of :meth:`run`."""
        run, prompt, kw = self._plan(name, value, fn, version, semantic, ttl, encode, decode)
        return await (run() if prompt is None else self.cache.aget_or_compute(prompt, run, **kw))

    def cached(self, *, name: str, version: str = "", semantic: bool = False) -> Callable[[F], F]:
        """Decorator for a one-argument function (or coroutine function)."""
        import inspect

        def deco(fn: F) -> F:
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def awrapper(value: Any) -> Any:
                    return await self.arun(name, value, fn, version=version, semantic=semantic)

                return awrapper  # type: ignore[return-value]

            @functools.wraps(fn)
            def wrapper(value: Any) -> Any:
                return self.run(name, value, fn, version=version, semantic=semantic)

            return wrapper  # type: ignore[return-value]

        return deco
