"""Single-flight: concurrent identical misses make ONE model call.

The first caller for a key (the leader) computes; the others (threads or asyncio tasks,
in any event loop) wait for its result. A waiter that has waited ``timeout`` seconds gives
up on the leader and computes itself (degrade, never hang). If the leader's call raises,
its waiters receive the same exception: one failing call, not N.

This is in-process. Across processes, identical misses may each compute once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agent_cache import _fork

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

    def _join(self, key: str) -> tuple[_Flight, bool]:
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None:
                return flight, False
            flight = self._flights[key] = _Flight()
            return flight, True

    def _leave(self, key: str, flight: _Flight) -> None:
        with self._lock:
            if self._flights.get(key) is flight:
                del self._flights[key]
        flight.finish(self._lock)

    def do(self, key: str, fn: Callable[[], T]) -> tuple[T, bool]:
        """Run ``fn`` once per concurrent ``key``; returns (value, whether this call ran it)."""
        flight, leader = self._join(key)
        if not leader:
            if flight.done.wait(self.timeout):
                return flight.outcome(), False
            return fn(), True  # the leader is too slow: degrade to our own call
        try:
            flight.value = fn()
            return flight.value, True
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            self._leave(key, flight)

    async def ado(self, key: str, fn: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """Async twin of :meth:`do`; waiters are woken through their own event loop."""
        flight, leader = self._join(key)
        if not leader:
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[None] = loop.create_future()
            with self._lock:
                if flight.done.is_set():
                    fut.set_result(None)
                else:
                    flight.waiters.append((loop, fut))
            try:
                await asyncio.wait_for(fut, self.timeout)
            except TimeoutError:
                return await fn(), True
            return flight.outcome(), False
        try:
            flight.value = await fn()
            return flight.value, True
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            self._leave(key, flight)

    def in_flight(self) -> int:
        with self._lock:
            return len(self._flights)
