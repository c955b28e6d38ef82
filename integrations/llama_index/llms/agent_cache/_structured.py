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
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from agent_cache import AgentCacheError, CacheHit, LayeredCache

__all__ = ["Deferred", "adeferring", "current", "deferring"]

log = logging.getLogger("agent_cache.llama_index")


@dataclass
class Deferred:
    """What one structured call read (``served``) and would write (``stores``)."""

    served: list[CacheHit] = field(default_factory=list)
    stores: list[dict[str, Any]] = field(default_factory=list)


_CURRENT: ContextVar[Deferred | None] = ContextVar("agent_cache_structured", default=None)


def current() -> Deferred | None:
    """The structured call in progress in this context, if any."""
    return _CURRENT.get()


@contextlib.contextmanager
def deferring(cache: LayeredCache) -> Iterator[Deferred]:
    """Defer the writes of the model calls inside; commit them if the block succeeds."""
    pending = Deferred()
    token = _CURRENT.set(pending)
    try:
        yield pending
    except Exception:
        _CURRENT.reset(token)
        for hit in pending.served:
            _guard(cache.feedback, hit, correct=False)
        raise
    _CURRENT.reset(token)
    for args in pending.stores:
        _guard(cache.store, **args)


@contextlib.asynccontextmanager
async def adeferring(cache: LayeredCache) -> AsyncIterator[Deferred]:
    """Async twin of :func:`deferring`."""
    pending = Deferred()
    token = _CURRENT.set(pending)
    try:
        yield pending
    except Exception:
        _CURRENT.reset(token)
        for hit in pending.served:
            await _aguard(cache.afeedback, hit, correct=False)
        raise
    _CURRENT.reset(token)
    for args in pending.stores:
        await _aguard(cache.astore, **args)


def _guard(method: Any, *args: Any, **kwargs: Any) -> None:
    try:
        method(*args, **kwargs)
    except AgentCacheError as exc:
        log.warning("agent-cache structured %s skipped: %s", method.__name__, exc)


async def _aguard(method: Any, *args: Any, **kwargs: Any) -> None:
    try:
        await method(*args, **kwargs)
    except AgentCacheError as exc:
        log.warning("agent-cache structured %s skipped: %s", method.__name__, exc)
