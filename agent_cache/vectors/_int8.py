"""An int8 first pass over a large scope's matrix, rescored exactly: the same top k.

At 100,000 x 384 the float32 matrix is 150 MB and one search streams all of it from RAM
(~5 ms on a core). This keeps an int8 copy (38 MB, one scale per row) inside an ONNX
Runtime session as a constant, which ONNX Runtime prepacks once for its integer matrix
product (``MatMulInteger``): the first pass then takes ~1 ms. It decides nothing by
itself. Each row has a bound on its error, ``|q.x - q~.x~| <= |x - x~| + |q - q~| |x~|``
(Cauchy-Schwarz, ``q`` and ``x`` unit vectors), so a row whose upper bound is below the
k-th best lower bound cannot be in the top k; every other row is rescored with the exact
float32 product. The answer is the exact search's answer.

The copy is a snapshot of the rows when it was built. Rows written or moved since then
are marked stale and scored exactly, like the rows appended after it; when they make up
more than ``REBUILD_SHARE`` of the rows the copy is rebuilt (~0.3 s at 100,000 rows).
The rebuild runs off the search path (:class:`Builder`): one daemon thread per scope
builds the new copy while searches go on with the old one (stale copy plus exact rows:
slower, still exact); the first search after it finished swaps it in. ``BACKGROUND =
False`` builds inside the search instead (tests).
Without ``onnxruntime`` and ``onnx`` (the ``agent-cache[onnx]`` extra) nothing of this
is used and every search is the exact float32 product.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["BACKGROUND", "MIN_ROWS", "REBUILD_SHARE", "Builder", "Int8Index", "available"]

#: Scopes with at least this many rows get an int8 first pass (below, the float32
#: matrix fits in the CPU caches and the plain product is as fast).
MIN_ROWS = 20_000
#: Rebuild the int8 copy when stale and newer rows exceed this share of it.
REBUILD_SHARE = 0.1
#: Added to every bound: float32 rounding of the exact products and of the scales.
SLACK = 1e-4
#: Build copies in a background thread; ``False``: inside the search that finds one due.
BACKGROUND = True
#: Niceness of a build thread: searches get the cores first, the build the time left.
_NICE = 10

_ORT: Any = None


def available() -> bool:
    """Whether ONNX Runtime and onnx can be imported (checked once)."""
    global _ORT
    if _ORT is None:
        try:
            import onnx  # noqa: F401
            import onnxruntime
        except ImportError:
            _ORT = False
        else:
            _ORT = onnxruntime
    return _ORT is not False


_QUERY: tuple[int, int] | None = None  # (levels, zero point) of the uint8 query codes


def _query_format() -> tuple[int, int]:
    """How to code queries for ``MatMulInteger`` on this CPU: ``(127, 128)`` (8 bits) when
    its integer product is exact, else ``(63, 64)`` (7 bits), checked once per process.

    On x86 CPUs without AVX-VNNI (AVX2 only, e.g. many AMD EPYC and older Xeons) ONNX
    Runtime multiplies uint8 x int8 with ``vpmaddubsw``, whose int16 sum of two products
    saturates when the uint8 side exceeds 127: with 8-bit queries the first pass then
    computed wrong similarities and lost true neighbours (the tests caught it on such a
    host). Queries kept below 128 never saturate (127 x 127 x 2 < 32,767); the error bound
    follows the coarser query codes, so the answer stays exact.
    """
    global _QUERY
    if _QUERY is None:
        rng = np.random.default_rng(7)
        codes = rng.integers(-127, 128, size=(384, 8), dtype=np.int64)
        codes[:, 0] = 127
        query = rng.integers(0, 256, size=(1, 384), dtype=np.int64)
        query[0, :] = np.where(np.arange(384) % 2 == 0, 255, query[0, :])
        session, _ = _session(codes.astype(np.int8), 1, zero=128)
        (got,) = session.run(None, {"q": query.astype(np.uint8)})
        exact = (query - 128) @ codes
        _QUERY = (127, 128) if np.array_equal(got.astype(np.int64), exact) else (63, 64)
    return _QUERY


def _session(
    codes_t: npt.NDArray[np.int8], threads: int, *, zero: int | None = None
) -> tuple[Any, Any]:
    """The session, and the ``OrtValue`` over ``codes_t`` it reads (keep both alive).

    The codes reach ONNX Runtime as an external initializer over the array's own memory,
    not copied into the model's protobuf: serializing 38 MB held the GIL for ~100 ms
    (stalling searches on other threads while a copy is built in the background) and made
    the build ~3x slower.
    """
    from onnx import TensorProto, helper, numpy_helper

    dim, rows = codes_t.shape
    codes = TensorProto(name="codes", data_type=TensorProto.INT8, dims=[dim, rows])
    codes.data_location = TensorProto.EXTERNAL
    codes.external_data.add(key="location", value="agent_cache_int8_codes")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["q", "codes", "zero"], ["y"])],
        "agent_cache_int8_knn",
        [helper.make_tensor_value_info("q", TensorProto.UINT8, ["b", dim])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, ["b", rows])],
        initializer=[
            codes,
            numpy_helper.from_array(
                np.array(_query_format()[1] if zero is None else zero, dtype=np.uint8), "zero"
            ),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = _ORT.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    value = _ORT.OrtValue.ortvalue_from_numpy(codes_t)
    options.add_external_initializers(["codes"], [value])
    session = _ORT.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session, value


def _quantize(
    matrix: npt.NDArray[np.float32], chunk: int = 8192
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per-row int8 codes, their scales, and each row's error ``|x - x~|`` (float32
    arithmetic in cache-sized chunks; its rounding is far inside ``SLACK``)."""
    n = matrix.shape[0]
    codes = np.empty(matrix.shape, dtype=np.int8)
    scale = np.empty(n, dtype=np.float64)
    error = np.empty(n, dtype=np.float64)
    for start in range(0, n, chunk):
        block = matrix[start : start + chunk]
        peak = np.abs(block).max(axis=1)
        step = np.where(peak > 0, peak / np.float32(127.0), np.float32(1.0)).astype(np.float32)
        q = np.rint(block / step[:, None])
        np.clip(q, -127, 127, out=q)
        codes[start : start + chunk] = q
        q *= step[:, None]
        q -= block
        scale[start : start + chunk] = step
        error[start : start + chunk] = np.sqrt(np.einsum("ij,ij->i", q, q))
    return codes, scale, error


class Int8Index:
    """The int8 copy of rows ``[0, rows)`` of one partition's matrix.

    Args:
        matrix: the partition's float32 rows (normalized), copied into the session.
        threads: ONNX Runtime intra-op threads.
    """

    def __init__(self, matrix: npt.NDArray[np.float32], threads: int) -> None:
        codes, self.scale, self.error = _quantize(matrix)
        self.rows: int = int(matrix.shape[0])
        self.norms = np.sqrt(np.einsum("ij,ij->i", codes, codes, dtype=np.float64)) * self.scale
        self._scale32 = self.scale.astype(np.float32)
        self._norms32 = self.norms.astype(np.float32)
        self._error32 = (self.error + SLACK).astype(np.float32)
        self.stale = np.zeros(self.rows, dtype=bool)
        self.stale_count = 0
        self._codes_t = np.ascontiguousarray(codes.T)
        self._session, self._codes_value = _session(self._codes_t, threads)

    def mark(self, row: int) -> None:
        """Row ``row`` no longer holds the vector the copy was built from."""
        if row < self.rows and not self.stale[row]:
            self.stale[row] = True
            self.stale_count += 1

    def worn(self, n: int) -> bool:
        """Whether stale and newer rows (of ``n`` live ones) call for a rebuild."""
        return self.stale_count + max(0, n - self.rows) > REBUILD_SHARE * self.rows

    def bounds(
        self, queries: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """Approximate similarities ``(len(queries), rows)`` and their error bounds."""
        levels, zero = _query_format()
        peak = np.abs(queries).max(axis=1).astype(np.float64)
        qscale = np.where(peak > 0, peak / levels, 1.0)
        qcodes = np.clip(np.rint(queries / qscale[:, None]), -levels, levels)
        qerror = np.linalg.norm(queries - qcodes * qscale[:, None], axis=1)
        feed = (qcodes + zero).astype(np.uint8)
        (dots,) = self._session.run(None, {"q": feed})
        approx = dots.astype(np.float32)
        approx *= self._scale32[None, :]
        approx *= qscale.astype(np.float32)[:, None]
        bound = qerror.astype(np.float32)[:, None] * self._norms32[None, :]
        bound += self._error32[None, :]
        return approx, bound


def _build(matrix: npt.NDArray[np.float32]) -> Int8Index:
    from agent_cache.vectors._search import search_threads

    return Int8Index(matrix, search_threads())


class Builder:
    """One partition's int8 copy, (re)built off the search path.

    Every call happens under the lock of the store that owns the partition. When the copy
    is missing or worn, :meth:`current` starts one daemon thread (never two) that builds
    a new copy from the rows as they are then, and returns the copy it has (``None``
    before the first: the search is the exact product). The thread reads the matrix
    without the lock: every row written or moved while it runs is recorded (:meth:`mark`)
    and marked stale on the new copy when the first call after the thread finished swaps
    it in, so what the copy may have read of such a row is never trusted; rows appended
    after the start are newer than the copy and scored exactly anyway. A copy that is
    already worn when swapped in starts the next build at once. The thread runs at a lower
    priority (``_NICE``, Linux), so searches keep the cores. A forked child inherits no
    thread: a build the parent had running is started afresh, never waited for.

    Args:
        build: makes a copy of the rows given (default: :class:`Int8Index` on
            ``search_threads()`` threads).

    Attributes:
        index: the copy searches use; ``builds``: builds started.
    """

    def __init__(self, build: Callable[[npt.NDArray[np.float32]], Int8Index] | None = None) -> None:
        self.index: Int8Index | None = None
        self.builds = 0
        self._build = build
        self._thread: threading.Thread | None = None
        self._changed: set[int] = set()
        self._result: Int8Index | None = None
        self._error: BaseException | None = None

    @property
    def building(self) -> bool:
        """Whether a build thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def mark(self, row: int) -> None:
        """Row ``row`` no longer holds the vector it held."""
        if self.index is not None:
            self.index.mark(row)
        if self._thread is not None:
            self._changed.add(row)

    def current(self, matrix: npt.NDArray[np.float32], n: int) -> Int8Index | None:
        """The copy to search rows ``[0, n)`` of ``matrix`` with; starts a build when due."""
        if self._thread is not None and not self._thread.is_alive():
            self._swap()
        if (self.index is None or self.index.worn(n)) and self._thread is None:
            if BACKGROUND:
                self._start(matrix[:n])
            else:
                self.builds += 1
                self.index = (self._build or _build)(matrix[:n])
        return self.index

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a running build (tests, benchmarks); the next call swaps it in."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _start(self, rows: npt.NDArray[np.float32]) -> None:
        self.builds += 1
        self._changed = set()
        self._result = self._error = None
        thread = threading.Thread(
            target=self._run, args=(rows,), name="agent-cache-int8-build", daemon=True
        )
        self._thread = thread
        thread.start()

    def _run(self, rows: npt.NDArray[np.float32]) -> None:
        with contextlib.suppress(AttributeError, OSError):  # Linux: niceness is per thread
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICE)
        try:
            self._result = (self._build or _build)(rows)
        except BaseException as exc:  # raised by the search that would swap it in
            self._error = exc

    def _swap(self) -> None:
        fresh, error, changed = self._result, self._error, self._changed
        self._thread, self._result, self._error, self._changed = None, None, None, set()
        if error is not None:
            raise error
        if fresh is None:  # a forked child: the parent's thread never ran here
            return
        for row in changed:
            fresh.mark(row)
        self.index = fresh
