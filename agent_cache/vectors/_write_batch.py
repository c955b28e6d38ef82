"""Vector adds batched in the background: one server call for many entries.

:class:`WriteBatcher` takes adds from any number of threads and hands them to ``write``
(one ``upsert`` for many entries) from one background thread: the first add of a batch
waits at most ``linger`` seconds for others, a batch is sent as soon as it holds
``max_batch`` entries, and adds arriving while a batch is being written form the next
one, so batches grow with the load and a lone writer waits no longer than ``linger``.

Nothing is lost silently:

* :meth:`WriteBatcher.flush` waits until every add made before it is written (or has
  failed); :meth:`WriteBatcher.close` flushes, and so does interpreter exit (``atexit``).
* A failing batch is retried ``retries`` times with a growing pause (a server that
  answered with an error, e.g. a vector of the wrong dimension, is not retried); then it
  is logged (a warning with the cause) and counted (``failed_batches``,
  ``failed_vectors``), and ``on_error`` is called with the error.
* ``max_pending`` bounds what waits: an add that would exceed it blocks until the writer
  caught up. A process killed (``SIGKILL``, a crash) with a batch pending loses at most
  ``max_pending + max_batch`` vectors: their exact entries are stored all the same (the
  exact layer is written synchronously before), only their semantic matches are missing
  until the prompt is stored again.

Adds still pending are visible through :meth:`WriteBatcher.pending` (the vector store
searches them with the server's results, so a process reads its own writes at once).
Vectors of different dimensions never share a batch.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from agent_cache import _fork
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.protocols import MetaValue

__all__ = ["PendingVector", "WriteBatcher"]

log = logging.getLogger("agent_cache")

Write = Callable[[list[str], npt.NDArray[np.float32], list[dict[str, MetaValue]]], None]


class PendingVector(NamedTuple):
    id: str
    vector: npt.NDArray[np.float32]
    meta: dict[str, MetaValue]


#: Seconds the writer thread waits idle before it ends (a cache never closed leaves no
#: thread behind for long).
_IDLE_S = 2.0

_live: weakref.WeakSet[WriteBatcher] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:  # pragma: no cover - runs at interpreter exit
    for batcher in list(_live):
        batcher.close()


class WriteBatcher:
    """Background batching of vector adds (see the module docstring).

    Args:
        write: writes one batch (ids, an ``(n, d)`` float32 matrix, metadatas); raises
            on failure.
        linger: seconds the first add of a batch waits for more (> 0).
        max_batch: entries per call to ``write`` at most.
        max_pending: entries waiting at most; a further add blocks until there is room.
        retries: further attempts of a failing batch; backoff: seconds before the first
            (doubled each time).
        on_error: called with the error of a batch that failed for good.
        name: says whose batches these are, in the log and the thread's name.

    Example:
        >>> got = []
        >>> b = WriteBatcher(lambda ids, m, metas: got.extend(ids), linger=0.001)
        >>> b.add([PendingVector("a", np.ones(2, np.float32), {"scope": "s"})])
        >>> b.flush(), got  # no timeout: True once all is written
        (True, ['a'])
        >>> b.close()
    """

    def __init__(
        self,
        write: Write,
        *,
        linger: float = 0.01,
        max_batch: int = 256,
        max_pending: int = 4096,
        retries: int = 2,
        backoff: float = 0.05,
        on_error: Callable[[Exception], None] | None = None,
        name: str = "vectors",
    ) -> None:
        if isinstance(linger, bool) or not isinstance(linger, int | float) or not linger > 0:
            raise ConfigurationError(f"linger must be > 0 seconds, not {linger!r}")
        if max_batch < 1 or max_pending < max_batch:
            raise ConfigurationError(
                f"need 1 <= max_batch <= max_pending, got {max_batch} and {max_pending}"
            )
        if retries < 0 or backoff < 0:
            raise ConfigurationError("retries and backoff must be >= 0")
        self._write = write
        self.linger = float(linger)
        self.max_batch = max_batch
        self.max_pending = max_pending
        self.retries = retries
        self.backoff = backoff
        self.on_error = on_error
        self.name = name
        self.batches = 0
        self.written = 0
        self.failed_batches = 0
        self.failed_vectors = 0
        self._reset()
        _fork.after_fork_in_child(self, WriteBatcher._reset)  # the parent writes its own
        _live.add(self)

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[PendingVector] = []
        self._inflight: list[PendingVector] = []
        self._first_at = 0.0  # when the oldest queued add arrived
        self._hurry = 0  # flushes waiting: send what is queued without lingering
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- producers --------------------------------------------------------------------

    def add(self, items: Sequence[PendingVector]) -> None:
        """Queue ``items`` for the next batch; blocks while ``max_pending`` are waiting."""
        if not items:
            return
        with self._cond:
            if self._closed:
                raise BackendError(f"the {self.name} writer is closed", layer="semantic")
            self._start()
            for item in items:
                while len(self._queue) >= self.max_pending and not self._closed:
                    self._hurry += 1
                    self._cond.notify_all()
                    self._cond.wait()
                    self._hurry -= 1
                if not self._queue:
                    self._first_at = time.monotonic()
                self._queue.append(item)
            self._cond.notify_all()

    def pending(self) -> list[PendingVector]:
        """Adds not yet confirmed by the server (queued or being written), oldest first."""
        with self._cond:
            return [*self._inflight, *self._queue]

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every add made before this call is written or failed for good.

        Returns False if ``timeout`` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                while self._queue or self._inflight:
                    if self._thread is None or not self._thread.is_alive():
                        self._start()
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._cond.wait(left)
                return True
            finally:
                self._hurry -= 1

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush, then stop the writer thread. Idempotent; adds after it raise."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        _live.discard(self)

    def counts(self) -> dict[str, int]:
        """``batches``, ``written``, ``failed_batches``, ``failed_vectors``, ``pending``."""
        with self._cond:
            pending = len(self._queue) + len(self._inflight)
        return {
            "batches": self.batches,
            "written": self.written,
            "failed_batches": self.failed_batches,
            "failed_vectors": self.failed_vectors,
            "pending": pending,
        }

    # -- the writer thread --------------------------------------------------------------

    def _start(self) -> None:  # with self._cond held
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._run, name=f"agent-cache-{self.name}-writer", daemon=True
            )
            self._thread.start()

    def _next_batch(self) -> list[PendingVector] | None:
        """The next batch, once it is full, lingered long enough or hurried; ``None``
        when closed with nothing left, or idle for ``_IDLE_S``."""
        with self._cond:
            while True:
                if self._queue:
                    waited = time.monotonic() - self._first_at
                    full = len(self._queue) >= self.max_batch
                    if full or self._hurry or self._closed or waited >= self.linger:
                        batch = self._queue[: self.max_batch]
                        del self._queue[: self.max_batch]
                        self._first_at = time.monotonic()  # the rest waited in flight
                        self._inflight = batch
                        self._cond.notify_all()  # adders blocked on max_pending
                        return batch
                    self._cond.wait(self.linger - waited)
                elif self._closed:
                    return None
                elif not self._cond.wait(_IDLE_S) and not self._queue:
                    self._thread = None  # idle: the next add starts another
                    return None

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            try:
                by_dim: dict[int, list[PendingVector]] = {}
                for item in batch:
                    by_dim.setdefault(item.vector.shape[-1], []).append(item)
                for group in by_dim.values():
                    self._send(group)
            finally:
                with self._cond:
                    self._inflight = []
                    self._cond.notify_all()

    def _send(self, group: list[PendingVector]) -> None:
        last = {item.id: item for item in group}  # a repeated id: the last add wins
        items = list(last.values())
        ids = [item.id for item in items]
        matrix = np.stack([item.vector for item in items]).astype(np.float32, copy=False)
        metas = [item.meta for item in items]
        pause = self.backoff
        for attempt in range(self.retries + 1):
            try:
                self._write(ids, matrix, metas)
            except Exception as exc:
                final = attempt == self.retries or getattr(exc, "answered", False)
                if not final:
                    time.sleep(pause)
                    pause *= 2
                    continue
                self.failed_batches += 1
                self.failed_vectors += len(items)
                log.warning(
                    "agent-cache: a batch of %d vectors (%s) failed after %d attempts and "
                    "is not stored (their exact entries are): %s",
                    len(items),
                    self.name,
                    attempt + 1,
                    exc,
                )
                if self.on_error is not None:
                    try:
                        self.on_error(exc)
                    except Exception:  # a failing callback must not stop the writer
                        log.exception("agent-cache: the %s writer's on_error failed", self.name)
                return
            self.batches += 1
            self.written += len(items)
            return


def pending_matches(
    items: Sequence[PendingVector], query: npt.NDArray[np.float32], scope: str, now: float
) -> list[tuple[str, float, Mapping[str, Any]]]:
    """``(id, cosine distance, metadata)`` of the live pending ``items`` in ``scope``
    (the rows a Chroma query would return for them), the last add of an id winning."""
    last = {item.id: item for item in items}
    rows: list[tuple[str, float, Mapping[str, Any]]] = []
    q = query.reshape(-1).astype(np.float32)
    qn = float(np.linalg.norm(q)) or 1.0
    for item in last.values():
        meta = item.meta
        expires = meta.get("expires_at")
        if meta.get("scope") != scope or not isinstance(expires, int | float):
            continue
        if float(expires) <= now or item.vector.shape[-1] != q.shape[-1]:
            continue
        vn = float(np.linalg.norm(item.vector)) or 1.0
        rows.append((item.id, 1.0 - float(item.vector @ q) / (vn * qn), meta))
    return rows
