"""Every I/O step a flow (:mod:`agent_cache._flow`) takes, as one typed helper per verb.

A flow writes ``raw = yield from kv_get(kv, key, now)`` and gets a ``str | None``: each
helper yields one :class:`~agent_cache._flow.Op` carrying the function to call and, when
there is one, its async twin (a backend's ``a``-prefixed coroutine method, looked up here
and nowhere else), and returns what the driver hands back. The helpers that start or
wait on other flows (:func:`single_flight`, :func:`spawn`) give the two drivers two
functions, so a nested flow runs under the driver of the public method called.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from agent_cache._flow import Flow, Op, run_async, run_sync
from agent_cache.protocols import KVStore, MetaValue, VectorMatch, VectorStore

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from agent_cache._lease import Lease
    from agent_cache.protocols import Embedder, Reranker
    from agent_cache.singleflight import SingleFlight

    Vectors = npt.NDArray[np.float32]

__all__ = [
    "call",
    "call_twin",
    "compute",
    "embed",
    "judge_ask",
    "kv_clear",
    "kv_delete",
    "kv_evict_over",
    "kv_get",
    "kv_get_counter",
    "kv_get_guessed",
    "kv_housekeep",
    "kv_incr",
    "kv_keys_for_tag",
    "kv_set",
    "kv_set_guessed",
    "lease_acquire",
    "lease_release",
    "rerank",
    "single_flight",
    "sleep",
    "spawn",
    "twin",
    "vector_add",
    "vector_clear",
    "vector_delete",
    "vector_housekeep",
    "vector_query",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


# ---------------------------------------------------------------------- the two forms
def twin(obj: object, name: str) -> Callable[..., Awaitable[Any]] | None:
    """``obj``'s async twin ``name`` (``"aget"``), if it has one that is a coroutine."""
    fn = getattr(obj, name, None)
    return fn if fn is not None and asyncio.iscoroutinefunction(fn) else None


def call(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> Flow[R]:
    """``fn(*args, **kwargs)`` (in a worker thread under the async driver)."""
    return cast(R, (yield Op(fn, args, kwargs)))


def call_twin(
    fn: Callable[P, R],
    afn: Callable[P, Awaitable[R]] | None,
    *args: P.args,
    **kwargs: P.kwargs,
) -> Flow[R]:
    """``fn(*args, **kwargs)``, or ``await afn(*args, **kwargs)`` under the async driver."""
    return cast(R, (yield Op(fn, args, kwargs, afn)))


# ---------------------------------------------------------------------- the exact layer
def kv_get(kv: KVStore, key: str, now: float) -> Flow[str | None]:
    return call_twin(kv.get, twin(kv, "aget"), key, now)


def kv_get_counter(kv: KVStore, counter: str) -> Flow[int]:
    return call_twin(kv.get_counter, twin(kv, "aget_counter"), counter)


def kv_get_guessed(
    kv: KVStore, counter: str, guess: int, key: str, now: float
) -> Flow[tuple[int, str | None]]:
    """The counter's value and, if it equals ``guess``, the value under ``key`` (the key
    at that version): one round trip on a store with ``get_versioned`` (Redis reads both
    in one pipeline), else ``get_counter`` then ``get`` only when the guess was right."""
    if callable(getattr(kv, "get_versioned", None)):
        version, raw = yield from call_twin(
            kv.get_versioned,  # type: ignore[attr-defined]
            twin(kv, "aget_versioned"),
            counter,
            key,
            now,
        )
        return version, raw if version == guess else None
    version = yield from kv_get_counter(kv, counter)
    if version != guess:
        return version, None
    raw = yield from kv_get(kv, key, now)
    return version, raw


def kv_incr(kv: KVStore, counter: str) -> Flow[int]:
    return call_twin(kv.incr, twin(kv, "aincr"), counter)


def kv_set(kv: KVStore, key: str, record: str, write: Mapping[str, Any]) -> Flow[None]:
    """``kv.set(key, record, **write)`` (``namespace``, ``expires_at``, ``tags``, ``now``
    and, for a joint SQLite write, ``vector`` and ``vector_meta``)."""
    yield Op(kv.set, (key, record), write, twin(kv, "aset"))


def kv_set_guessed(
    kv: KVStore, counter: str, guess: int, key: str, record: str, write: Mapping[str, Any]
) -> Flow[int]:
    """The counter's value, and ``kv_set(kv, key, record, write)`` done if it equals
    ``guess`` (``key`` is the key at that version): one round trip on a store with
    ``set_versioned`` (Redis checks and writes in one script), else ``get_counter``
    then ``set`` only when the guess was right."""
    if callable(getattr(kv, "set_versioned", None)):
        version = yield Op(
            kv.set_versioned,  # type: ignore[attr-defined]
            (counter, guess, key, record),
            write,
            twin(kv, "aset_versioned"),
        )
        return cast(int, version)
    version = yield from kv_get_counter(kv, counter)
    if version == guess:
        yield from kv_set(kv, key, record, write)
    return version


def kv_delete(kv: KVStore, keys: Sequence[str]) -> Flow[int]:
    return call_twin(kv.delete, twin(kv, "adelete"), keys)


def kv_clear(kv: KVStore, namespace: str | None) -> Flow[int]:
    return call_twin(kv.clear, twin(kv, "aclear"), namespace)


def kv_keys_for_tag(
    kv: KVStore, tag: str, limit: int, namespace: str | None = None
) -> Flow[list[str]]:
    """Up to ``limit`` keys carrying ``tag`` (of ``namespace`` only, when given)."""
    scoped = {"namespace": namespace} if namespace is not None else {}
    found = yield Op(kv.keys_for_tag, (tag, limit), scoped, twin(kv, "akeys_for_tag"))
    return cast(list[str], found)


def kv_housekeep(kv: Any, now: float, limit: int) -> Flow[Sequence[str]]:
    """The optional ``housekeep(now, limit=...)`` of a store: the keys it purged."""
    return call_twin(kv.housekeep, twin(kv, "ahousekeep"), now, limit=limit)


def kv_evict_over(kv: Any, namespace: str, keep: int) -> Flow[Sequence[str]]:
    """The optional ``evict_over(namespace, keep)`` of a store: the keys it evicted."""
    return call_twin(kv.evict_over, twin(kv, "aevict_over"), namespace, keep)


# ---------------------------------------------------------------------- the semantic layer
def embed(embedder: Embedder, texts: Sequence[str]) -> Flow[Vectors]:
    return call_twin(embedder.embed, twin(embedder, "aembed"), texts)


def vector_query(
    vectors: VectorStore, vector: Any, *, k: int, scope: str, now: float
) -> Flow[list[VectorMatch]]:
    return call_twin(vectors.query, twin(vectors, "aquery"), vector, k=k, scope=scope, now=now)


def vector_add(
    vectors: VectorStore,
    ids: Sequence[str],
    vecs: Any,
    metas: Sequence[Mapping[str, MetaValue]],
) -> Flow[None]:
    return call_twin(vectors.add, twin(vectors, "aadd"), ids, vecs, metas)


def vector_delete(vectors: VectorStore, ids: Sequence[str]) -> Flow[None]:
    return call_twin(vectors.delete, twin(vectors, "adelete"), ids)


def vector_clear(vectors: VectorStore, namespace: str | None) -> Flow[None]:
    return call_twin(vectors.clear, twin(vectors, "aclear"), namespace)


def vector_housekeep(vectors: Any, now: float, limit: int) -> Flow[Any]:
    """The optional ``housekeep(now, limit=...)`` of a vector store."""
    return call_twin(vectors.housekeep, twin(vectors, "ahousekeep"), now, limit=limit)


def rerank(reranker: Reranker, query: str, candidates: Sequence[str]) -> Flow[list[float]]:
    return call_twin(reranker.score, twin(reranker, "ascore"), query, candidates)


def judge_ask(judge: Any, query: str, candidate: str) -> Flow[bool]:
    """The request judge's verdict on serving ``candidate`` for ``query``."""
    return call_twin(judge.ask, twin(judge, "aask"), query, candidate)


# ---------------------------------------------------------------------- coordination
def lease_acquire(lease: Lease) -> Flow[bool | None]:
    return call(lease.acquire)


def lease_release(lease: Lease) -> Flow[None]:
    return call(lease.release)


def sleep(seconds: float) -> Flow[None]:
    """A pause that never blocks the event loop (``asyncio.sleep`` there)."""
    return call_twin(_sleep, _asleep, seconds)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


async def _asleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def compute(fn: Callable[[], Any]) -> Flow[Any]:
    """The caller's ``compute``: ``fn()``; the async driver awaits what it returns (its
    ``compute`` is a coroutine function)."""
    return (yield Op(fn, afn=fn))


def _flight_sync(flight: SingleFlight, key: str, make: Callable[[], Flow[T]]) -> tuple[T, bool]:
    return flight.do(key, lambda: run_sync(make()))


async def _flight_async(
    flight: SingleFlight, key: str, make: Callable[[], Flow[T]]
) -> tuple[T, bool]:
    return await flight.ado(key, lambda: run_async(make()))


def single_flight(
    flight: SingleFlight, key: str, make: Callable[[], Flow[T]]
) -> Flow[tuple[T, bool]]:
    """One run of ``make()``'s flow per concurrent ``key``, by the caller's driver:
    ``(value, whether this caller ran it)``."""
    return call_twin(_flight_sync, _flight_async, flight, key, make)


_TASKS: set[asyncio.Task[Any]] = set()  # kept until done (the loop holds tasks weakly)


def _spawn_thread(flow: Flow[Any]) -> None:
    threading.Thread(target=run_sync, args=(flow,), name="agent-cache-refresh", daemon=True).start()


async def _spawn_task(flow: Flow[Any]) -> None:
    task = asyncio.create_task(run_async(flow))
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


def spawn(flow: Flow[Any]) -> Flow[None]:
    """Start ``flow`` without waiting for it: a daemon thread (sync), a task (async)."""
    return call_twin(_spawn_thread, _spawn_task, flow)
