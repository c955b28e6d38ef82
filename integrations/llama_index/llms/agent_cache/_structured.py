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
from collections.abc import AsyncIterator, Callable, Iterator
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
