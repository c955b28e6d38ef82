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

from agent_cache.errors import ConfigurationError
from agent_cache.protocols import MetaValue, Vector, VectorMatch

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

    def __post_init__(self) -> None:
        self.matrix = np.empty((_INITIAL_ROWS, self.dim), dtype=np.float32)
        self.expires = np.empty(_INITIAL_ROWS, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.ids)

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
        self.matrix[row] = vector
        self.expires[row] = _expiry(meta)

    def remove(self, id_: str) -> bool:
        row = self.rows.pop(id_, None)
        if row is None:
            return False
        last = len(self.ids) - 1
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
        n = len(self.ids)
        if n == 0:
            return []
        sims = self.matrix[:n] @ query
        expires = self.expires[:n]
        if expires.min() <= now:  # mask expired rows inside the search
            sims[expires <= now] = -np.inf
        if k < n:
            top = np.argpartition(sims, n - k)[n - k :]
            top = top[np.argsort(-sims[top], kind="stable")]
        else:
            top = np.argsort(-sims, kind="stable")
        out = []
        for row in top.tolist():
            sim = float(sims[row])
            if sim == -np.inf:
                break
            out.append(VectorMatch(self.ids[row], min(1.0, max(0.0, sim)), dict(self.metas[row])))
        return out


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
        self._partitions: dict[str, _Partition] = {}
        self._scope_of: dict[str, str] = {}

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
        """The ``k`` most similar unexpired vectors of ``scope``, best first."""
        if k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(query))
        if norm > 0:
            query = query / np.float32(norm)
        with self._lock:
            partition = self._partitions.get(scope)
            if partition is None:
                return []
            if query.shape[0] != partition.dim:
                raise ConfigurationError(
                    f"query dimension {query.shape[0]} does not match {partition.dim}",
                    layer="semantic",
                )
            return partition.search(query, k, now)

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
