"""An in-process vector store on numpy: one matrix per scope, exact k-NN.

Vectors are partitioned by their ``scope`` metadata, so a query searches only its own
scope's matrix (the scope filter happens *before* the k-NN, and a crowded neighbouring
scope can never push a match out of the top k). Expired rows are masked inside the same
search. Deletion swap-removes the row: the matrix stays dense and needs no compaction.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from agent_cache import _fork
from agent_cache.errors import ConfigurationError
from agent_cache.protocols import MetaValue, Vector, VectorMatch
from agent_cache.vectors import _int8
from agent_cache.vectors._int8 import Builder, Int8Index
from agent_cache.vectors._search import Combiner, Query, similarities, top_rows

__all__ = ["MemoryVectorStore"]

_INITIAL_ROWS = 64


def _expiry(metadata: Mapping[str, MetaValue]) -> float:
    value = metadata.get("expires_at")
    if value is None:
        return math.inf
    if isinstance(value, str):
        raise ConfigurationError(f"expires_at must be a number, got {value!r}")
    return float(value)


@dataclass
class _Partition:
    """The vectors of one scope: a dense, growing matrix and its parallel arrays."""

    dim: int
    matrix: npt.NDArray[np.float32] = field(init=False)
    expires: npt.NDArray[np.float64] = field(init=False)
    ids: list[str] = field(default_factory=list)
    metas: list[dict[str, MetaValue]] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    int8: Builder = field(default_factory=Builder, init=False)

    def __post_init__(self) -> None:
        self.matrix = np.empty((_INITIAL_ROWS, self.dim), dtype=np.float32)
        self.expires = np.empty(_INITIAL_ROWS, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def index(self) -> Int8Index | None:
        """The int8 copy searches use now (``None``: none built yet)."""
        return self.int8.index

    def put(self, id_: str, vector: npt.NDArray[np.float32], meta: dict[str, MetaValue]) -> None:
        row = self.rows.get(id_)
        if row is None:
            row = len(self.ids)
            if row == self.matrix.shape[0]:
                grown = row * 2
                matrix = np.empty((grown, self.dim), dtype=np.float32)
                matrix[:row] = self.matrix[:row]
                expires = np.empty(grown, dtype=np.float64)
                expires[:row] = self.expires[:row]
                self.matrix, self.expires = matrix, expires
            self.ids.append(id_)
            self.metas.append(meta)
            self.rows[id_] = row
        else:
            self.metas[row] = meta
        self.int8.mark(row)
        self.matrix[row] = vector
        self.expires[row] = _expiry(meta)

    def remove(self, id_: str) -> bool:
        row = self.rows.pop(id_, None)
        if row is None:
            return False
        last = len(self.ids) - 1
        self.int8.mark(row)
        self.int8.mark(last)
        if row != last:  # move the last row into the hole
            moved = self.ids[last]
            self.matrix[row] = self.matrix[last]
            self.expires[row] = self.expires[last]
            self.ids[row] = moved
            self.metas[row] = self.metas[last]
            self.rows[moved] = row
        self.ids.pop()
        self.metas.pop()
        return True

    def search(self, query: npt.NDArray[np.float32], k: int, now: float) -> list[VectorMatch]:
        """The ``k`` best unexpired rows for one normalized query."""
        return self.search_many(query.reshape(1, -1), [k], [now])[0]

    def search_many(
        self, queries: npt.NDArray[np.float32], ks: Sequence[int], nows: Sequence[float]
    ) -> list[list[VectorMatch]]:
        """The ``ks[i]`` best rows unexpired at ``nows[i]`` for each normalized query
        (shape ``(len(ks), dim)``), in one pass over the matrix."""
        n = len(self.ids)
        if n == 0:
            return [[] for _ in ks]
        index = self._int8(n)
        if index is not None:
            return self._search_int8(index, queries, ks, nows)
        sims = similarities(self.matrix[:n], queries)
        expires = self.expires[:n]
        soonest = float(expires.min())
        out: list[list[VectorMatch]] = []
        for row_sims, k, now in zip(sims, ks, nows, strict=True):
            if soonest <= now:  # mask expired rows inside the search
                row_sims[expires <= now] = -np.inf
            out.append(self._matches(top_rows(row_sims, k), row_sims))
        return out

    def _matches(self, rows: Sequence[int], sims: npt.NDArray[np.float32]) -> list[VectorMatch]:
        return [
            VectorMatch(self.ids[row], min(1.0, max(0.0, float(sims[row]))), dict(self.metas[row]))
            for row in rows
        ]

    def _int8(self, n: int) -> Int8Index | None:
        """The int8 first pass for a large partition; a missing or worn copy is rebuilt
        in the background (:class:`~agent_cache.vectors._int8.Builder`)."""
        if n < _int8.MIN_ROWS or not _int8.available():
            if self.int8.index is not None or self.int8.building:
                self.int8 = Builder()  # a running build finishes unseen, its copy dropped
            return None
        return self.int8.current(self.matrix, n)

    def _search_int8(
        self,
        index: Int8Index,
        queries: npt.NDArray[np.float32],
        ks: Sequence[int],
        nows: Sequence[float],
    ) -> list[list[VectorMatch]]:
        """The exact top k through the int8 first pass (:mod:`agent_cache.vectors._int8`)."""
        n = len(self.ids)
        m = min(index.rows, n)  # copy rows beyond n are gone
        approx, bound = index.bounds(queries)
        current = ~index.stale[:m]
        stale_rows = np.flatnonzero(index.stale[:m])
        exact_rows = np.concatenate([stale_rows, np.arange(index.rows, n, dtype=np.int64)])
        exact = None
        if exact_rows.size:  # rows newer than the copy are a slice: no gather for them
            parts = [similarities(self.matrix[stale_rows], queries)] if stale_rows.size else []
            if n > index.rows:
                parts.append(similarities(self.matrix[index.rows : n], queries))
            exact = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
        expires = self.expires[:n]
        soonest = float(expires.min())
        out: list[list[VectorMatch]] = []
        all_current = bool(current.all())
        for b, (k, now) in enumerate(zip(ks, nows, strict=True)):
            lo = approx[b, :m] - bound[b, :m]
            hi = approx[b, :m]
            hi += bound[b, :m]
            dead = None if all_current else ~current
            if soonest <= now:
                expired = expires[:m] <= now
                dead = expired if dead is None else dead | expired
            if dead is not None:
                lo[dead] = -np.inf
                hi[dead] = -np.inf
            ex = (
                np.where(expires[exact_rows] > now, exact[b], -np.inf)
                if exact is not None
                else np.empty(0, dtype=np.float32)
            )
            best = np.partition(lo, lo.size - min(k, lo.size))[lo.size - min(k, lo.size) :]
            floor = np.concatenate([best, ex])
            tau = -np.inf if floor.size < k else float(np.partition(floor, floor.size - k)[-k])
            cand = np.flatnonzero(np.isfinite(hi)) if tau == -np.inf else np.flatnonzero(hi >= tau)
            rows = np.concatenate([cand, exact_rows])
            sims = np.concatenate([self.matrix[cand] @ queries[b], ex]).astype(np.float32)
            order = np.argsort(rows, kind="stable")  # ties keep row order, as the plain path
            rows, sims = rows[order], sims[order]
            picked = top_rows(sims, k)
            out.append(
                [
                    VectorMatch(
                        self.ids[int(rows[i])],
                        min(1.0, max(0.0, float(sims[i]))),
                        dict(self.metas[int(rows[i])]),
                    )
                    for i in picked
                ]
            )
        return out


def _queries(
    vectors: Sequence[Vector] | Vector, k: int, scope: str | Sequence[str], now: float
) -> list[Query]:
    """Validated, L2-normalized queries of one ``query_many`` call."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    if matrix.ndim != 2:
        raise ConfigurationError("query vectors must be one row per query", layer="semantic")
    scopes = [scope] * matrix.shape[0] if isinstance(scope, str) else list(scope)
    if len(scopes) != matrix.shape[0] or not all(isinstance(s, str) for s in scopes):
        raise ConfigurationError("one str scope per query vector", layer="semantic")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)
    return [Query(row, k, s, now) for row, s in zip(matrix, scopes, strict=True)]


def _answers(queries: Sequence[Query]) -> list[list[VectorMatch]]:
    for query in queries:
        if query.error is not None:
            raise query.error
    return [query.result for query in queries]


def _by_scope(batch: Sequence[Query]) -> dict[str, list[Query]]:
    groups: dict[str, list[Query]] = {}
    for query in batch:
        groups.setdefault(query.scope, []).append(query)
    return groups


def _search_partition(partition: _Partition, queries: Sequence[Query]) -> None:
    """Search one partition for the queries of its scope; a query of the wrong
    dimension gets its own error."""
    fit = []
    for query in queries:
        if query.vector.shape[0] != partition.dim:
            query.error = ConfigurationError(
                f"query dimension {query.vector.shape[0]} does not match {partition.dim}",
                layer="semantic",
            )
        else:
            fit.append(query)
    if not fit:
        return
    found = partition.search_many(
        np.stack([q.vector for q in fit]), [q.k for q in fit], [q.now for q in fit]
    )
    for query, matches in zip(fit, found, strict=True):
        query.result = matches


class MemoryVectorStore:
    """A thread-safe in-memory :class:`~agent_cache.protocols.VectorStore`.

    Cosine similarity is the dot product of L2-normalized vectors (inputs are normalized
    on the way in), clamped to [0, 1]. Every metadata mapping needs ``scope``;
    ``namespace`` is used by :meth:`clear`, ``expires_at`` (absent means never) by
    :meth:`query`. Re-adding an id replaces its vector and metadata.

    Example:
        >>> import numpy as np
        >>> store = MemoryVectorStore()
        >>> store.add(["a"], np.array([[1.0, 0.0]], dtype=np.float32),
        ...           [{"scope": "s", "namespace": "default", "expires_at": 2e9}])
        >>> [m.id for m in store.query(np.array([1.0, 0.0], dtype=np.float32),
        ...                            k=1, scope="s", now=0.0)]
        ['a']
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))
        self._partitions: dict[str, _Partition] = {}
        self._scope_of: dict[str, str] = {}
        self._combiner = Combiner(self._serve)

    def _check_dim(self, dim: int, scopes: set[str]) -> None:
        """One dimension per scope; scopes of other embedders may have others."""
        for scope in scopes:
            partition = self._partitions.get(scope)
            if partition is not None and partition.dim != dim:
                raise ConfigurationError(
                    f"vector dimension {dim} does not match the dimension {partition.dim} "
                    f"of scope {scope!r}",
                    layer="semantic",
                )

    def add(
        self,
        ids: Sequence[str],
        vectors: Sequence[Vector] | Vector,
        metadatas: Sequence[Mapping[str, MetaValue]],
    ) -> None:
        """Insert or replace vectors; each metadata mapping must carry ``scope``."""
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim == 1 and len(ids) == 1:
            matrix = matrix.reshape(1, -1)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids) or len(metadatas) != len(ids):
            raise ConfigurationError(
                "ids, vectors and metadatas must have the same length", layer="semantic"
            )
        if not ids:
            return
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)
        metas = []
        for meta in metadatas:
            scope = meta.get("scope")
            if not isinstance(scope, str):
                raise ConfigurationError("every vector needs a str 'scope'", layer="semantic")
            _expiry(meta)
            metas.append(dict(meta))
        with self._lock:
            self._check_dim(matrix.shape[1], {str(meta["scope"]) for meta in metas})
            for id_, vector, meta in zip(ids, matrix, metas, strict=True):
                scope = str(meta["scope"])
                previous = self._scope_of.get(id_)
                if previous is not None and previous != scope:
                    self._partitions[previous].remove(id_)
                partition = self._partitions.get(scope)
                if partition is None:
                    partition = self._partitions[scope] = _Partition(matrix.shape[1])
                partition.put(id_, vector, meta)
                self._scope_of[id_] = scope

    def query(self, vector: Vector, *, k: int, scope: str, now: float) -> list[VectorMatch]:
        """The ``k`` most similar unexpired vectors of ``scope``, best first.

        Concurrent calls share one pass over the matrix (:mod:`agent_cache.vectors._search`).
        """
        return self.query_many([vector], k=k, scope=scope, now=now)[0]

    def query_many(
        self,
        vectors: Sequence[Vector] | Vector,
        *,
        k: int,
        scope: str | Sequence[str],
        now: float,
    ) -> list[list[VectorMatch]]:
        """:meth:`query` for many vectors at once (one scope, or one scope per vector):
        one pass over each scope's matrix for the whole batch.

        Example:
            >>> import numpy as np
            >>> store = MemoryVectorStore()
            >>> store.add(["a", "b"], np.eye(2, dtype=np.float32),
            ...           [{"scope": "s", "namespace": "default"}] * 2)
            >>> [[m.id for m in found] for found in
            ...  store.query_many(np.eye(2, dtype=np.float32), k=1, scope="s", now=0.0)]
            [['a'], ['b']]
        """
        queries = _queries(vectors, k, scope, now)
        if k <= 0:
            return [[] for _ in queries]
        self._combiner.run(queries)
        return _answers(queries)

    def _serve(self, batch: list[Query]) -> None:
        with self._lock:
            for scope, queries in _by_scope(batch).items():
                partition = self._partitions.get(scope)
                if partition is not None:
                    _search_partition(partition, queries)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove vectors by id; unknown ids are ignored."""
        with self._lock:
            for id_ in ids:
                scope = self._scope_of.pop(id_, None)
                if scope is not None:
                    partition = self._partitions[scope]
                    partition.remove(id_)
                    if not len(partition):
                        del self._partitions[scope]

    def clear(self, namespace: str | None = None) -> None:
        """Remove everything, or only vectors whose metadata ``namespace`` matches."""
        with self._lock:
            if namespace is None:
                self._partitions.clear()
                self._scope_of.clear()
                return
            doomed = [
                id_
                for partition in self._partitions.values()
                for id_, meta in zip(partition.ids, partition.metas, strict=True)
                if meta.get("namespace") == namespace
            ]
            self.delete(doomed)

    def housekeep(self, now: float, limit: int = 256) -> int:
        """Delete up to ``limit`` vectors expired at ``now``; return how many."""
        with self._lock:
            doomed: list[str] = []
            for partition in self._partitions.values():
                n = len(partition)
                if n and partition.expires[:n].min() <= now:
                    rows = np.flatnonzero(partition.expires[:n] <= now)[: limit - len(doomed)]
                    doomed.extend(partition.ids[int(r)] for r in rows)
                if len(doomed) >= limit:
                    break
            self.delete(doomed)
            return len(doomed)

    def count(self) -> int:
        """How many vectors are stored (expired ones included until deleted)."""
        with self._lock:
            return len(self._scope_of)

    def namespace_counts(self) -> dict[str, int]:
        """Vectors per metadata ``namespace`` (expired ones included until deleted)."""
        with self._lock:
            out: dict[str, int] = {}
            for partition in self._partitions.values():
                for meta in partition.metas:
                    ns = str(meta.get("namespace", ""))
                    out[ns] = out.get(ns, 0) + 1
            return out

    def metadata(self, ids: Sequence[str]) -> dict[str, dict[str, MetaValue]]:
        """The stored metadata of those ``ids`` that have a vector."""
        with self._lock:
            out: dict[str, dict[str, MetaValue]] = {}
            for id_ in ids:
                scope = self._scope_of.get(id_)
                if scope is not None:
                    partition = self._partitions[scope]
                    out[id_] = dict(partition.metas[partition.rows[id_]])
            return out

    def close(self) -> None:
        """Nothing to release; the store stays usable."""
