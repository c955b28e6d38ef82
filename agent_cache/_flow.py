"""One body for the sync and async paths.

The cache's request logic is written once, as generators that *yield* the I/O they need
(an :class:`Op`: the function to call, its arguments, and optionally its async twin) and
receive the result. The flows build their ops through the typed helpers of
:mod:`agent_cache._io` (``kv_get``, ``embed``, ``lease_acquire``, ``sleep`` ...), one per
verb. Two small drivers run them: :func:`run_sync` calls the function; :func:`run_async`
awaits the twin when the op has one (a backend's ``a``-prefixed coroutine method: Redis,
HTTP) and otherwise runs the sync function in a worker thread (SQLite, embedded Chroma,
a local embedding model), so no blocking call ever runs inside the event loop.

A flow may itself start flows through an op whose function and twin run them with the
sync and the async driver (single-flight runs the leader's flow with the caller's
driver; refresh-ahead starts one in a thread or a task), so the choice of driver is
made once, by the public method called.

Whatever an op raises, ``BaseException`` included (a task's ``CancelledError``), is
thrown into the flow at its ``yield``, so its ``finally`` blocks run and may still yield
their clean-up ops (releasing a lease) before the exception goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["Flow", "Op", "run_async", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Op:
    """One I/O step: ``fn(*args, **kwargs)``, or under the async driver ``await
    afn(*args, **kwargs)`` when ``afn`` is given (else ``fn`` in a worker thread)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    afn: Callable[..., Awaitable[Any]] | None = None


Flow = Generator[Op, Any, T]


def run_sync(flow: Flow[T]) -> T:
    try:
        op = next(flow)
        while True:
            try:
                result = op.fn(*op.args, **op.kwargs)
            except BaseException as exc:  # handed to the flow, which decides
                op = flow.throw(exc)
            else:
                op = flow.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def _call_async(op: Op) -> Any:
    if op.afn is not None:
        return await op.afn(*op.args, **op.kwargs)
    return await asyncio.to_thread(op.fn, *op.args, **op.kwargs)


async def run_async(flow: Flow[T]) -> T:
    try:
        op = next(flow)
        while True:
            try:
                result = await _call_async(op)
            except BaseException as exc:
                op = flow.throw(exc)
            else:
                op = flow.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
