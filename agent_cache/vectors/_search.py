"""Exact k-NN on one scope's matrix, for one query or many at once, and the combiner
that lets concurrent callers share one pass over the matrix.

Where the time goes: a search is a matrix-vector product over the scope's rows, and from
a few tens of thousands of rows on (100,000 x 384 float32 is 150 MB, far more than the
caches) it is bound by memory bandwidth, not arithmetic: one product streams the whole
matrix from RAM (~5 ms at 100,000 rows on one core here). A batch of queries is one
matrix-matrix product, which reads the matrix once for all of them (at 8 queries ~2 ms a
query instead of ~5). Everything else in a search (the expiry mask, an ``argpartition``
top-k) is a few hundred microseconds at 100,000 rows.

:class:`Combiner` batches concurrent ``query`` calls without a thread or a timer: the
first caller in runs the search for every query that is waiting; callers that arrive
while a search runs queue up and the next free one serves them all in one pass. A lone
caller never waits.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from agent_cache import _fork
from agent_cache._threads import pass_threads
from agent_cache.protocols import VectorMatch

__all__ = ["Combiner", "Query", "search_threads", "similarities", "top_rows"]

#: From this many queries a batch is one matrix-matrix product; below, one
#: matrix-vector product per query is faster (measured at 100,000 x 384 on 2 cores).
GEMM_FROM = 4

Matrix = npt.NDArray[np.float32]


def search_threads() -> int:
    """BLAS threads for one search: 1 on machines with <= 2 usable cores.

    Measured on the shared 2-core machine at 100,000 x 384: one query takes ~5 ms on 1
    thread when the other core is busy and 9-16 ms on OpenBLAS's default 2 (its threads
    wait for a core the embedder, SQLite or a neighbour holds); 8 queries in one product,
    ~25 ms vs ~50 ms. Only an idle second core makes 2 faster (3.4 ms vs 5 ms for one
    query), and a cache under load has none. Larger machines get half their cores (at most
    4). ``AGENT_CACHE_SEARCH_THREADS`` overrides it. The count is held from the first
    search on, for numpy in the whole process (see :class:`_BlasThreads` for why it is
    not restored after each search).

    Example:
        >>> search_threads() >= 1
        True
    """
    return pass_threads("AGENT_CACHE_SEARCH_THREADS")


class _BlasThreads:
    """Holds numpy's BLAS at the search's thread count (threadpoolctl, a dependency of
    sentence-transformers; without it nothing changes).

    The count is set on the first search and left there, not restored after each one:
    OpenBLAS's idle threads spin-wait for work after being woken, so putting a pool of 2
    back after every search had its second thread spinning on the core the embedder
    needed. Measured on the shared 2-core machine, 5,000 entries, one caller in a thread:
    the k-NN took 2.7-11 ms a lookup (the product itself: 0.3 ms) and the ONNX pass 6.7-14
    ms, against 0.6 ms and 4.8 ms with the count held at 1 (lookups/s 57-87 against
    138-152). numpy elsewhere in the process gets the same count from the first search
    on; a count someone sets later is put back to the search's at the next search (one
    cheap ``get_num_threads`` call a search).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._libs: list[Any] | None = None
        _fork.after_fork_in_child(self, _BlasThreads._after_fork)

    def _after_fork(self) -> None:
        """In a forked child: a free lock (BLAS keeps the thread count it has)."""
        self._lock = threading.Lock()

    def _load(self) -> list[Any]:
        if self._libs is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:
                self._libs = []
            else:
                self._libs = list(ThreadpoolController().select(user_api="blas").lib_controllers)
        return self._libs

    def hold(self, threads: int) -> None:
        """Set every BLAS library to ``threads`` unless it already runs that many."""
        libs = self._libs
        if libs is None:
            with self._lock:
                libs = self._load()
        for lib in libs:
            if int(lib.get_num_threads()) != threads:
                with self._lock:
                    lib.set_num_threads(threads)


_BLAS = _BlasThreads()


def similarities(matrix: Matrix, queries: Matrix) -> Matrix:
    """``queries @ matrix.T``, shape ``(len(queries), len(matrix))``, on
    :func:`search_threads` BLAS threads.

    One query: one matrix-vector product. A few: one product each (BLAS's matrix-matrix
    product packs the whole matrix first, a loss below ``GEMM_FROM`` queries). More: one
    matrix-matrix product, which reads the matrix once for all of them. Each is a single
    call into BLAS: a loop of small calls would give up and wait for the GIL at every
    step, which under concurrent callers costs more than the arithmetic.
    """
    n, b = matrix.shape[0], queries.shape[0]
    _BLAS.hold(search_threads())
    if b >= GEMM_FROM:
        product: Matrix = np.matmul(queries, matrix.T)
        return product
    out = np.empty((b, n), dtype=np.float32)
    for i in range(b):
        np.matmul(matrix, queries[i], out=out[i])
    return out


def top_rows(sims: Matrix, k: int) -> list[int]:
    """The rows of the ``k`` largest finite values of ``sims``, largest first (ties keep
    row order); ``-inf`` (masked) rows are never returned."""
    n = sims.shape[0]
    if k < n:
        top = np.argpartition(sims, n - k)[n - k :]
        top = top[np.argsort(-sims[top], kind="stable")]
    else:
        top = np.argsort(-sims, kind="stable")
    rows: list[int] = top.tolist()
    while rows and sims[rows[-1]] == -np.inf:
        rows.pop()
    return rows


@dataclass
class Query:
    """One query of a batch: its normalized vector, ``k``, scope and clock; the combiner
    fills ``result`` or ``error``."""

    vector: Matrix
    k: int
    scope: str
    now: float
    result: list[VectorMatch] = field(default_factory=list)
    error: BaseException | None = None
    done: bool = False


class Combiner:
    """Concurrent callers share one search: the first one in serves everyone waiting.

    Args:
        serve: searches a batch, setting ``result`` (or ``error``) on each query; an
            exception it raises lands on every query of the batch that has no answer.

    Attributes:
        passes: batches served; ``queries``: the queries they held.
    """

    def __init__(self, serve: Callable[[list[Query]], None]) -> None:
        self._serve = serve
        self.passes = 0
        self.queries = 0
        self._reset()
        _LIVE.add(self)

    def _reset(self) -> None:  # also in a forked child: the parent's waiters are not ours
        self._cond = threading.Condition(threading.Lock())
        self._pending: list[Query] = []
        self._busy = False

    def run(self, queries: Sequence[Query]) -> None:
        """Answer ``queries`` (all in the same pass), serving whoever else is waiting."""
        if not queries:
            return
        last = queries[-1]
        cond = self._cond
        with cond:
            self._pending.extend(queries)
            while not last.done:
                if self._busy:
                    cond.wait()
                    continue
                self._busy = True
                batch, self._pending = self._pending, []
                cond.release()
                try:
                    self._serve_batch(batch)
                finally:
                    cond.acquire()
                    self._busy = False
                    cond.notify_all()

    def _serve_batch(self, batch: list[Query]) -> None:
        self.passes += 1
        self.queries += len(batch)
        try:
            self._serve(batch)
        except BaseException as exc:  # handed to the callers, each raises it
            for query in batch:
                if not query.done:
                    query.error = exc
        for query in batch:
            query.done = True


_LIVE: weakref.WeakSet[Combiner] = weakref.WeakSet()


def _reset_after_fork() -> None:
    for combiner in list(_LIVE):
        combiner._reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
