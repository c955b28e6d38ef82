"""Micro-batching: concurrent embed calls share one forward pass.

A web app looks up many questions at once; without this, each lookup runs its own
forward pass and the passes fight over the same cores. :class:`MicroBatcher` runs at
most ``passes`` passes at a time (by default as many as the cores hold passes of the
inner embedder's threads: 2 on a 2-core machine with 1-thread passes, so both cores
work under load): a thread that finds a pass slot free and nothing queued runs its own
pass on its own thread (no hand-over to another thread, no wake-up: a lone caller pays
nothing for the batcher); every other request (and every asyncio task, which must not
block its loop) queues in front of the worker threads (one per slot, started as the
queue needs them), each of which embeds whatever is waiting in a single call of the
inner embedder. Batches form by themselves under load: while
one pass runs, the next callers queue up. When the traffic is concurrent (more than one
request is waiting, or the first one arrived while the previous pass was running) the
worker also waits up to ``max_wait_ms`` for company before it starts; a lone caller
never waits.

Bounds: a batch holds at most ``max_batch`` texts (a single larger request runs on its
own, never split), and a request waits at most ``max_wait_ms`` plus the pass in flight
when it arrived before its own pass starts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from agent_cache._threads import pass_threads, usable_cores
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.protocols import Embedder

__all__ = ["MicroBatcher", "default_passes"]

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]


@dataclass
class _Request:
    texts: list[str]
    future: Future[Vectors] = field(default_factory=Future)
    submitted: float = field(default_factory=time.monotonic)


class MicroBatcher:
    """Embed concurrent requests together: one forward pass per batch, in one thread.

    Thread-safe and asyncio-friendly (:meth:`aembed` never blocks the event loop). The
    worker thread starts on the first call (no thread in the constructor), is a daemon,
    and is started again in a forked child. Put a :class:`~agent_cache.embedders.MemoEmbedder`
    in front of it, so that repeated texts never reach the queue.

    Args:
        inner: the embedder that runs the batches (any :class:`~agent_cache.protocols.Embedder`).
        max_batch: most texts in one pass; a bigger single request runs alone.
        max_wait_ms: longest wait for more requests before a pass, used only while the
            traffic is concurrent (another request is waiting, or this one arrived while
            the previous pass ran); ``0`` never waits (batches still form from the queue).
            The default, 200 µs, lets callers that arrive together share a pass without
            holding a core idle: with 8 callers on 2 cores, 2 ms gave 1.55× one caller's
            lookups/s and 0.2 ms 1.80× (``bench latency``'s cells at 5,000 entries).
        passes: most passes running at once (None: :func:`default_passes` for the inner
            embedder's ``threads``); 1 runs one pass at a time.

    Attributes:
        batches: passes run so far; ``requests`` and ``texts``: what they held.

    Example:
        >>> from agent_cache.testing import HashEmbedder
        >>> batcher = MicroBatcher(HashEmbedder(dim=8))
        >>> batcher.embed(["a question"]).shape
        (1, 8)
        >>> batcher.close()
    """

    def __init__(
        self,
        inner: Embedder,
        *,
        max_batch: int = 32,
        max_wait_ms: float = 0.2,
        passes: int | None = None,
    ) -> None:
        if max_batch < 1:
            raise ConfigurationError(f"max_batch must be >= 1, got {max_batch}")
        if passes is not None and passes < 1:
            raise ConfigurationError(f"passes must be >= 1, got {passes}")
        if not 0 <= max_wait_ms <= 1000:
            raise ConfigurationError(f"max_wait_ms must be in [0, 1000], got {max_wait_ms}")
        self.inner = inner
        self.name: str = inner.name
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self.passes = passes if passes is not None else default_passes(inner)
        self.batches = 0
        self.requests = 0
        self.texts = 0
        self._queue: deque[_Request] = deque()
        self._cond = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._closed = False
        self._running = 0  # passes running (the workers' and lone callers' own)
        self._last_end = 0.0  # when the previous pass finished (monotonic)
        _LIVE.add(self)

    @property
    def dimension(self) -> int:
        """The inner embedder's ``dimension``."""
        dimension = getattr(self.inner, "dimension", None)
        if dimension is None:
            raise ConfigurationError(f"embedder {self.name!r} does not expose a dimension")
        return int(dimension)

    # ------------------------------------------------------------------ callers
    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (rows in order), sharing a forward pass with concurrent callers."""
        items = list(texts)
        return self._shared(items) if items else self._nothing()

    async def aembed(self, texts: Sequence[str]) -> Vectors:
        """Async twin of :meth:`embed`: awaits the shared pass without blocking the loop
        (a task never runs a pass itself: it always queues for a worker)."""
        if not (items := list(texts)):
            return await asyncio.to_thread(self._nothing)
        return await asyncio.wrap_future(self._submit(items))

    def _nothing(self) -> Vectors:
        """The inner embedder's answer to no texts (its empty array, of its dimension)."""
        return np.asarray(self.inner.embed([]), dtype=np.float32)

    def _shared(self, items: list[str]) -> Vectors:
        """A thread's pass: its own when a slot is free and nothing queues, else its
        share of a worker's."""
        if threading.current_thread() in self._workers:  # re-entrant call: no deadlock
            return self._run(items)
        with self._cond:
            alone = self._running < self.passes and not self._queue
            if alone:
                self._running += 1
        if not alone:
            return self._submit(items).result()
        try:  # nothing running, nothing waiting: this thread runs the pass itself
            unique = list(dict.fromkeys(items))
            self._count(1, len(unique))
            vectors = self._run(unique)
        finally:
            self._end_pass()
        if len(unique) == len(items):
            return vectors
        row = {text: i for i, text in enumerate(unique)}
        return np.ascontiguousarray(vectors[[row[t] for t in items]])

    def close(self) -> None:
        """Stop the worker after the queued requests and close the inner embedder (its model
        is freed); later calls start both again."""
        with self._cond:
            self._closed = True
            workers = list(self._workers)
            self._cond.notify_all()
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join(timeout=5.0)
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    # ------------------------------------------------------------------ worker
    def _submit(self, items: list[str]) -> Future[Vectors]:
        request = _Request(items)
        with self._cond:
            self._ensure_worker()
            self._queue.append(request)
            self._cond.notify()
        return request.future

    def _after_fork(self) -> None:
        """In a forked child: the parent's worker, passes and queued requests are not ours."""
        self._queue = deque()
        self._cond = threading.Condition()
        self._workers = []
        self._running = 0

    def _count(self, requests: int, texts: int) -> None:
        with self._cond:
            self.batches += 1
            self.requests += requests
            self.texts += texts

    def _end_pass(self) -> None:
        """A pass is over: the worker may take what queued behind it."""
        with self._cond:
            self._running -= 1
            self._last_end = time.monotonic()
            self._cond.notify_all()

    def _ensure_worker(self) -> None:  # called with the condition held
        """One more worker while the queue outgrows those alive (at most ``passes``)."""
        self._workers = [w for w in self._workers if w.is_alive()]
        if self._workers and (len(self._workers) >= self.passes or not self._queue):
            return  # the first request of a quiet spell needs one worker, no more
        self._closed = False
        worker = threading.Thread(target=self._loop, name="agent-cache-embed-batcher", daemon=True)
        self._workers.append(worker)
        worker.start()

    def _take_batch(self) -> list[_Request] | None:
        with self._cond:
            while True:
                while not self._queue or self._running >= self.passes:
                    if self._closed and not self._queue:
                        me = threading.current_thread()
                        self._workers = [w for w in self._workers if w is not me]
                        return None
                    self._cond.wait()
                self._linger()
                if self._queue and self._running < self.passes:  # another worker may
                    break  # have taken the queue while this one lingered
            batch = [self._queue.popleft()]
            size = len(batch[0].texts)
            while self._queue and size + len(self._queue[0].texts) <= self.max_batch:
                request = self._queue.popleft()
                size += len(request.texts)
                batch.append(request)
            self._running += 1
            return batch

    def _linger(self) -> None:  # called with the condition held and a request queued
        """Under concurrent traffic, wait up to ``max_wait_s`` for a full batch."""
        concurrent = len(self._queue) > 1 or self._queue[0].submitted < self._last_end
        if not concurrent or self.max_wait_s <= 0:
            return
        deadline = time.monotonic() + self.max_wait_s
        while sum(len(r.texts) for r in self._queue) < self.max_batch:
            left = deadline - time.monotonic()
            if left <= 0 or self._closed or not self._queue:
                return
            self._cond.wait(left)

    def _loop(self) -> None:
        while True:
            batch = self._take_batch()
            if batch is None:
                return
            try:
                self._serve(batch)
            finally:
                self._end_pass()

    def _serve(self, batch: list[_Request]) -> None:
        unique = list(dict.fromkeys(t for r in batch for t in r.texts))
        self._count(len(batch), len(unique))
        try:
            vectors = self._run(unique)
        except BaseException as exc:  # handed to the callers
            if len(batch) == 1:
                _fail(batch[0], exc)
                return
            log.debug("batch of %d requests failed (%s); retrying one by one", len(batch), exc)
            for request in batch:  # the error lands only on the request that causes it
                try:
                    _resolve(request, self._run(request.texts))
                except BaseException as one:
                    _fail(request, one)
            return
        row = {text: i for i, text in enumerate(unique)}
        for request in batch:
            _resolve(request, vectors[[row[t] for t in request.texts]])

    def _run(self, texts: list[str]) -> Vectors:
        vectors = np.asarray(self.inner.embed(texts), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise BackendError(
                f"embedder {self.name!r} returned shape {vectors.shape} for {len(texts)} texts",
                layer="semantic",
            )
        return vectors


def default_passes(inner: object) -> int:
    """Passes that run side by side without sharing a core: usable cores over the inner
    embedder's ``threads`` (intra-op threads of one pass, as :class:`OnnxEmbedder` has
    them), at most 4; 1 for an embedder that does not say (torch runs its own threads).
    A pass of 1 thread on a 2-core machine: 2, so 8 concurrent callers keep both cores
    busy instead of queueing behind one pass. ``AGENT_CACHE_EMBED_PASSES`` overrides it.

    Example:
        >>> default_passes(object())
        1
    """
    env = os.environ.get("AGENT_CACHE_EMBED_PASSES", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ConfigurationError(f"AGENT_CACHE_EMBED_PASSES must be >= 1, got {env!r}")
        return int(env)
    if not hasattr(inner, "threads"):  # its thread use is unknown (torch has its own)
        return 1
    threads = inner.threads or pass_threads("AGENT_CACHE_EMBED_THREADS")  # None: the default
    if not isinstance(threads, int) or threads < 1:
        return 1
    return max(1, min(4, usable_cores() // threads))


_LIVE: weakref.WeakSet[MicroBatcher] = weakref.WeakSet()


def _reset_after_fork() -> None:
    for batcher in list(_LIVE):
        batcher._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _resolve(request: _Request, vectors: Vectors) -> None:
    if not request.future.done():
        request.future.set_result(np.ascontiguousarray(vectors))


def _fail(request: _Request, exc: BaseException) -> None:
    if not request.future.done():
        request.future.set_exception(exc)
