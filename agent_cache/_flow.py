"""One body for the sync and async paths.

The cache's request logic is written once, as generators that *yield* the I/O they need
(``_Op``: which backend, which method, which arguments) and receive the result. Two small
drivers run them: :func:`run_sync` calls the method; :func:`run_async` awaits the
backend's ``a``-prefixed twin when it has one (Redis, HTTP) and otherwise runs the sync
method in a worker thread (SQLite, embedded Chroma, a local embedding model), so no
blocking call ever runs inside the event loop.

A flow may itself start flows through an op whose backend has both twins (single-flight
runs the leader's flow with the caller's driver; refresh-ahead starts one in a thread or
a task), so the choice of driver is made once, by the public method called.

Whatever an op raises, ``BaseException`` included (a task's ``CancelledError``), is
thrown into the flow at its ``yield``, so its ``finally`` blocks run and may still yield
their clean-up ops (releasing a lease) before the exception goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["Flow", "Op", "run_async", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True)
class Op:
    backend: Any
    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Flow = Generator[Op, Any, T]


def run_sync(flow: Flow[T]) -> T:
    try:
        op = next(flow)
        while True:
            try:
                result = getattr(op.backend, op.method)(*op.args, **op.kwargs)
            except BaseException as exc:  # handed to the flow, which decides
                op = flow.throw(exc)
            else:
                op = flow.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def _call_async(op: Op) -> Any:
    twin = getattr(op.backend, "a" + op.method, None)
    if twin is not None and asyncio.iscoroutinefunction(twin):
        return await twin(*op.args, **op.kwargs)
    return await asyncio.to_thread(getattr(op.backend, op.method), *op.args, **op.kwargs)


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
