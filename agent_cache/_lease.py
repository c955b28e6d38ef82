"""A renewable lease on a shared store: single-flight across processes.

The store (SQLite file, Redis) provides ``try_lock(name, token, ttl)``,
``unlock(name, token)`` and, for long calls, ``renew_lock(name, token, ttl)``. A lease
that is not renewed expires after ``ttl`` seconds, so a crashed holder never blocks the
others for longer than that. A store failure is reported through ``on_error`` and reads
as "no lease available" (the caller degrades to computing), never as an exception.

:func:`contend_flow` is how a miss uses it: take the lease and compute, or wait for the
answer its holder stores (see there).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from agent_cache import _io as io
from agent_cache._flow import Flow

__all__ = ["Lease", "contend_flow"]

LOCK_POLL_S = 0.05  # how often a waiter looks for the holder's answer
T = TypeVar("T")


class Lease:
    """One caller's claim on the named lock of a shared store.

    Example:
        >>> from agent_cache.stores import MemoryStore
        >>> Lease(MemoryStore(), "k", ttl=5.0, on_error=print).acquire() is None  # no locks
        True
    """

    def __init__(
        self, store: Any, name: str, *, ttl: float, on_error: Callable[[Exception, str], None]
    ) -> None:
        self.store = store
        self.name = name
        self.ttl = ttl
        self.token = uuid.uuid4().hex
        self._on_error = on_error
        self.held = False

    def acquire(self) -> bool | None:
        """True: we hold it; False: another caller does; None: no lock (unsupported/failed)."""
        try_lock = getattr(self.store, "try_lock", None)
        if try_lock is None:
            return None
        try:
            self.held = bool(try_lock(self.name, self.token, self.ttl))
        except Exception as exc:
            self._on_error(exc, "lock")
            return None
        return self.held

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        try:
            self.store.unlock(self.name, self.token)
        except Exception as exc:
            self._on_error(exc, "unlock")

    def renew(self) -> bool:
        renew = getattr(self.store, "renew_lock", None)
        if renew is None or not self.held:
            return False
        try:
            return bool(renew(self.name, self.token, self.ttl))
        except Exception as exc:
            self._on_error(exc, "renew lock")
            return False

    @contextmanager
    def renewing(self, alive: Callable[[], bool] | None = None) -> Iterator[None]:
        """Keep the lease alive (renewed every ``ttl / 3`` s) while the body runs and
        ``alive()`` says its caller still can finish it (an async holder: its event
        loop runs; a loop stopped under it would otherwise keep a dead holder's
        lease, and its waiters, forever)."""
        if not self.held or getattr(self.store, "renew_lock", None) is None:
            yield
            return
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(self.ttl / 3):
                if alive is not None and not alive():
                    return  # the holder cannot finish: let the lease expire
                if not self.renew():
                    return  # lost it (expired or store down): nothing more to do

        thread = threading.Thread(target=loop, name=f"agent-cache-lease-{self.name}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=1.0)


def contend_flow(lease: Lease, peek: Callable[[], Flow[T | None]]) -> Flow[tuple[T | None, bool]]:
    """Single-flight across processes on a shared store (SQLite file, Redis).

    ``peek()`` is the flow that reads the answer without stats (``None`` when there is
    none yet). Returns ``(answer, held)``: the answer another process stored while we
    waited, or ``(None, True)`` when we hold the lease and must compute, or
    ``(None, False)`` when there is no lock to take (memory store, store down: compute,
    degraded). The holder re-checks after taking the lease (the previous holder may just
    have stored the answer). A waiter polls for the answer (every ``LOCK_POLL_S``) and
    contends for the lease again whenever it is free: it waits for a live holder however
    long its call takes (the holder renews the lease every ``ttl / 3`` s: its
    heartbeat), and takes over, computing once for all the waiters, when the holder
    finished without storing or stopped renewing (crashed, killed, its store
    unreachable): at most ``ttl`` + ``LOCK_POLL_S`` seconds after its last renewal.
    """
    held = yield from io.lease_acquire(lease)
    while held is False:
        yield from io.sleep(LOCK_POLL_S)
        found = yield from peek()
        if found is not None:
            return found, False
        held = yield from io.lease_acquire(lease)
    if not held:
        return None, False
    found = yield from peek()
    return found, True
