"""Structured prediction: an answer is kept only once its output class has parsed it.

Inside ``CachedLLM.structured_predict`` (and its async twin) the model calls read the
cache as usual but write nothing; the answers they paid for wait in a :class:`Deferred`
until the program has parsed them. A parse that succeeds stores them; one that fails
drops them and evicts any cached answer served during the call (reported to
``LayeredCache.feedback`` as wrong), so the next call goes to the model instead of
serving the bad answer again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from llama_index.llms.agent_cache import _codec
from llama_index.llms.agent_cache._apis import reported

from agent_cache import NOT_STORED, AgentCacheError, CacheHit, Fetched, LayeredCache

__all__ = ["Deferred", "adeferring", "current", "deferring"]

log = logging.getLogger("agent_cache.llama_index")


@dataclass
class Deferred:
    """What one structured call read (``served``) and would write (``stores``)."""

    served: list[CacheHit] = field(default_factory=list)
    stores: list[dict[str, Any]] = field(default_factory=list)

    def record(
        self, got: Fetched, policy: str, encode: Callable[[Any], Any], where: dict[str, Any]
    ) -> None:
        """One model call's outcome inside the structured call: a served hit (evicted if
        the parse fails), or a paid answer to store under ``where`` (the lookup
        arguments, ttl, tags) once it succeeds."""
        if got.hit is not None:
            self.served.append(got.hit)
            return
        if not got.computed or got.value is None or policy == "no_store":
            return
        payload = encode(got.value)
        if payload is NOT_STORED:
            return
        total, prompt_tokens, _cached = _codec.usage(got.value)
        self.stores.append({**where, "response": payload, "tokens": reported(total, prompt_tokens)})


_CURRENT: ContextVar[Deferred | None] = ContextVar("agent_cache_structured", default=None)


def current() -> Deferred | None:
    """The structured call in progress in this context, if any."""
    return _CURRENT.get()


class _Settling:
    """The scope of one structured call (sync and async): its :class:`Deferred` is the
    current one inside; on the way out, the stores are made if the block succeeded, the
    served hits reported wrong (evicted) if it raised (and nothing on a cancellation)."""

    def __init__(self, cache: LayeredCache) -> None:
        self.cache, self.pending = cache, Deferred()

    def __enter__(self) -> Deferred:
        self.token = _CURRENT.set(self.pending)
        return self.pending

    async def __aenter__(self) -> Deferred:
        return self.__enter__()

    def _calls(
        self, kind: type[BaseException] | None
    ) -> Iterator[tuple[str, tuple[Any, ...], dict[str, Any]]]:
        """The cache calls that settle the block (``kind``: how it ended), by method name."""
        _CURRENT.reset(self.token)
        if kind is None:
            yield from (("store", (), args) for args in self.pending.stores)
        elif issubclass(kind, Exception):
            yield from (("feedback", (hit,), {"correct": False}) for hit in self.pending.served)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        for name, args, kwargs in self._calls(kind):
            _guard(getattr(self.cache, name), *args, **kwargs)

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        for name, args, kwargs in self._calls(kind):
            await _aguard(getattr(self.cache, "a" + name), *args, **kwargs)


def deferring(cache: LayeredCache) -> contextlib.AbstractContextManager[Deferred]:
    """Defer the writes of the model calls inside; commit them if the block succeeds."""
    return _Settling(cache)


def adeferring(cache: LayeredCache) -> contextlib.AbstractAsyncContextManager[Deferred]:
    """Async twin of :func:`deferring`."""
    return _Settling(cache)


def _guard(method: Any, *args: Any, **kwargs: Any) -> None:
    with _logged(method):
        method(*args, **kwargs)


async def _aguard(method: Any, *args: Any, **kwargs: Any) -> None:
    with _logged(method):
        await method(*args, **kwargs)


@contextlib.contextmanager
def _logged(method: Any) -> Iterator[None]:
    try:
        yield
    except AgentCacheError as exc:
        log.warning("agent-cache structured %s skipped: %s", method.__name__, exc)
