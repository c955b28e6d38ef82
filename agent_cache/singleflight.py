"""Single-flight: concurrent identical misses make ONE model call.

The first caller for a key (the leader) computes; the others (threads or asyncio tasks,
in any event loop) wait for its result, however long it takes, as long as the leader is
alive: a thread is until its call returns or raises; a task is while its event loop runs
(a loop stopped or closed under a pending leader never finishes it). Every ``timeout``
seconds a waiter checks; a waiter whose leader is gone gives up and computes itself
(degrade, never hang): at most ``timeout`` seconds after the leader stopped. A slow
leader thus costs no extra model call. If the leader's call raises, its waiters receive
the same exception: one failing call, not N.

This is in-process. Across processes, identical misses may each compute once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agent_cache import _fork
from agent_cache._flow import Flow, run_async, run_sync
from agent_cache._io import call_twin, compute

__all__ = ["SingleFlight"]

T = TypeVar("T")
_MISSING = object()


@dataclass
class _Flight:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = _MISSING
    error: BaseException | None = None
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list
    )
    #: the leader's thread, and its task and event loop (an async leader)
    thread: int = 0
    task: asyncio.Task[Any] | None = None
    loop: asyncio.AbstractEventLoop | None = None

    def leader_alive(self) -> bool:
        """A leader thread lives until its call ends (``done`` is set in its
        ``finally``); a leader task only while its event loop runs."""
        loop = self.loop
        return loop is None or (loop.is_running() and not loop.is_closed())

    def waits_for_itself(self, task: asyncio.Task[Any] | None) -> bool:
        """Whether waiting would wait on the caller itself: the leader's own thread
        (a ``compute`` asking for its own key, a sync call inside a leader task's loop)
        or its own task. Such a call runs at once, on its own."""
        if task is not None and task is self.task:
            return True
        return self.thread == threading.get_ident() and (task is None or self.task is None)

    def finish(self, lock: threading.Lock) -> None:
        with lock:
            self.done.set()
            waiters, self.waiters = self.waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_resolve, fut)

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


# how a waiter waits for its flight: a thread on ``done`` (nothing to set up), a task on
# a future that :meth:`_Flight.finish` resolves through the task's own loop
def _no_watch(flight: _Flight, lock: threading.Lock) -> asyncio.Future[None] | None:
    return None


async def _watch(flight: _Flight, lock: threading.Lock) -> asyncio.Future[None] | None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    with lock:
        if flight.done.is_set():
            fut.set_result(None)
        else:
            flight.waiters.append((loop, fut))
    return fut


def _wait(flight: _Flight, fut: asyncio.Future[None] | None, timeout: float) -> bool:
    """Whether the flight is done, waiting at most ``timeout`` seconds for it."""
    return flight.done.wait(timeout)


async def _await(flight: _Flight, fut: asyncio.Future[None] | None, timeout: float) -> bool:
    assert fut is not None
    if not fut.done():
        await asyncio.wait((fut,), timeout=timeout)  # never cancels ``fut``
    return fut.done()


class SingleFlight:
    """Deduplicates concurrent calls per key.

    Example:
        >>> sf = SingleFlight(timeout=5.0)
        >>> sf.do("k", lambda: 42)
        (42, True)
    """

    def __init__(self, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        _fork.after_fork_in_child(self, SingleFlight._after_fork)

    def _after_fork(self) -> None:
        """In a forked child the parent's leaders do not run: forget their flights."""
        self._lock = threading.Lock()
        self._flights = {}

    def _join(
        self,
        key: str,
        task: asyncio.Task[Any] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> tuple[_Flight, bool]:
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None:
                return flight, False
            flight = _Flight(thread=threading.get_ident(), task=task, loop=loop)
            self._flights[key] = flight
            return flight, True

    def _leave(self, key: str, flight: _Flight) -> None:
        with self._lock:
            if self._flights.get(key) is flight:
                del self._flights[key]
        flight.finish(self._lock)

    def do(self, key: str, fn: Callable[[], T]) -> tuple[T, bool]:
        """Run ``fn`` once per concurrent ``key``; returns (value, whether this call ran it)."""
        return run_sync(self._flow(key, fn, None, None))

    async def ado(self, key: str, fn: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """Async twin of :meth:`do`; waiters are woken through their own event loop."""
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        return await run_async(self._flow(key, fn, task, loop))

    def _flow(
        self,
        key: str,
        fn: Callable[[], Any],
        task: asyncio.Task[Any] | None,
        loop: asyncio.AbstractEventLoop | None,
    ) -> Flow[tuple[Any, bool]]:
        """:meth:`do` and :meth:`ado`, written once: a thread waits on the flight's
        event, a task on a future its own loop resolves (:func:`_watch`, :func:`_wait`)."""
        flight, leader = self._join(key, task, loop)
        if not leader:
            if flight.waits_for_itself(task):
                return (yield from compute(fn)), True
            watch = yield from call_twin(_no_watch, _watch, flight, self._lock)
            while not (yield from call_twin(_wait, _await, flight, watch, self.timeout)):
                if not flight.leader_alive():  # the leader is gone: degrade to our own call
                    return (yield from compute(fn)), True
            return flight.outcome(), False
        try:
            flight.value = yield from compute(fn)
            return flight.value, True
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            self._leave(key, flight)

    def in_flight(self) -> int:
        with self._lock:
            return len(self._flights)
