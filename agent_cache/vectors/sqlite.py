"""Vectors in the exact layer's SQLite database: the embedded default, safe for many processes.

The vectors live in a table of the same database file as the entries
(:mod:`agent_cache.stores._vector_table`), written in the same transaction as their entry
by :meth:`SQLiteStore.set(..., vector=...) <agent_cache.stores.SQLiteStore.set>`, and
deleted with it. Every process that opens the file reads them; WAL mode lets readers and
one writer at a time work side by side.

Search is exact k-NN on numpy, in process: one dense matrix per scope (the scope filter
happens *before* the k-NN), expired rows masked inside the search. Before each query the
matrix catches up with other processes' writes by reading the change log after the last
sequence number it applied (one indexed query, usually returning nothing), so a query
never re-reads the whole table; a bulk clear or a trimmed log makes it reload once.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from agent_cache import _fork
from agent_cache.errors import ConfigurationError
from agent_cache.protocols import MetaValue, Vector, VectorMatch
from agent_cache.stores import _vector_table as vt
from agent_cache.stores.sqlite import SQLiteStore
from agent_cache.vectors._search import Combiner, Query
from agent_cache.vectors.memory import (
    _answers,
    _by_scope,
    _Partition,
    _queries,
    _search_partition,
)

__all__ = ["SQLiteVectorStore"]

_META_CHUNK = 500  # keys per metadata read (SQLite's bound on parameters)


class SQLiteVectorStore:
    """A :class:`~agent_cache.protocols.VectorStore` in a SQLite database file.

    Args:
        store: the :class:`~agent_cache.stores.SQLiteStore` whose database holds the
            vectors (shared: entries and vectors commit together), or a file path (a store
            of its own, closed by :meth:`close`).

    Example:
        >>> import os, tempfile, numpy as np
        >>> vs = SQLiteVectorStore(os.path.join(tempfile.mkdtemp(), "cache.sqlite3"))
        >>> vs.add(["a"], np.array([[1.0, 0.0]], dtype=np.float32),
        ...        [{"scope": "s", "namespace": "default", "expires_at": 2e9}])
        >>> [m.id for m in vs.query(np.array([1.0, 0.0], dtype=np.float32),
        ...                         k=1, scope="s", now=0.0)]
        ['a']
        >>> vs.close()
    """

    def __init__(self, store: SQLiteStore | str | os.PathLike[str]) -> None:
        if isinstance(store, SQLiteStore):
            self._store, self._owns_store = store, False
        else:
            self._store, self._owns_store = SQLiteStore(store), True
        self._lock = threading.RLock()
        self._combiner = Combiner(self._serve)
        self._reset()
        _fork.after_fork_in_child(self, SQLiteVectorStore._after_fork)

    def _after_fork(self) -> None:
        """In a forked child: a free lock, and the index reloaded from the file (a parent
        thread may have been changing it at the fork)."""
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._partitions: dict[str, _Partition] = {}
        self._scope_of: dict[str, str] = {}
        self._seq = -1  # last change-log sequence applied; -1: never loaded
        self._epoch = -1

    @property
    def store(self) -> SQLiteStore:
        """The SQLite store whose database holds the vectors."""
        return self._store

    @property
    def path(self) -> Path:
        """The database file."""
        return self._store.path

    # -- VectorStore ----------------------------------------------------------------

    def add(
        self,
        ids: Sequence[str],
        vectors: Sequence[Vector] | Vector,
        metadatas: Sequence[Mapping[str, MetaValue]],
    ) -> None:
        """Insert or replace vectors in one transaction; each metadata needs ``scope``.

        Prefer ``SQLiteStore.set(..., vector=...)``, which writes the entry too.
        """
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim == 1 and len(ids) == 1:
            matrix = matrix.reshape(1, -1)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids) or len(metadatas) != len(ids):
            raise ConfigurationError(
                "ids, vectors and metadatas must have the same length", layer="semantic"
            )
        if not ids:
            return
        rows = [
            vt.encode_vector_row(id_, vec, meta)
            for id_, vec, meta in zip(ids, matrix, metadatas, strict=True)
        ]
        with self._store.transaction("vector add") as conn:
            vt.write_vector_rows(conn, rows)

    def query(self, vector: Vector, *, k: int, scope: str, now: float) -> list[VectorMatch]:
        """The ``k`` most similar unexpired vectors of ``scope``, best first.

        Concurrent calls share one refresh and one pass over the matrix
        (:mod:`agent_cache.vectors._search`).
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
        one refresh, one pass over each scope's matrix and one metadata read for all."""
        queries = _queries(vectors, k, scope, now)
        if k <= 0:
            return [[] for _ in queries]
        self._combiner.run(queries)
        return _answers(queries)

    def _serve(self, batch: list[Query]) -> None:
        with self._lock:
            self.refresh()
            for scope, queries in _by_scope(batch).items():
                partition = self._partitions.get(scope)
                if partition is not None:
                    _search_partition(partition, queries)
        found = [m.id for q in batch for m in q.result]
        if not found:
            return
        metas = self._metadata(list(dict.fromkeys(found)))
        for query in batch:  # a row deleted since the refresh is left out
            query.result = [
                VectorMatch(m.id, m.score, dict(metas[m.id])) for m in query.result if m.id in metas
            ]

    def delete(self, ids: Sequence[str]) -> None:
        """Remove vectors by id; unknown ids are ignored."""
        if not ids:
            return
        with self._store.transaction("vector delete") as conn:
            vt.delete_vectors(conn, ids)

    def clear(self, namespace: str | None = None) -> None:
        """Remove every vector, or only those whose ``namespace`` matches."""
        with self._store.transaction("vector clear") as conn:
            if namespace is None:
                vt.clear_vectors(conn)
            else:
                vt.delete_vectors_where(conn, "namespace = ?", (namespace,))

    def housekeep(self, now: float, limit: int = 256) -> int:
        """Delete up to ``limit`` vectors expired at ``now`` (in a database of its own;
        with a shared one the store's own housekeeping does it); return how many."""
        if not self._owns_store:
            return 0
        before = self.count()
        self._store.housekeep(now, limit)
        return before - self.count()

    def count(self) -> int:
        """How many vectors the database holds (expired ones included until purged)."""
        with self._store.snapshot("vector count") as conn:
            row = conn.execute("SELECT COUNT(*) FROM vectors").fetchone()
        return int(row[0])

    def namespace_counts(self) -> dict[str, int]:
        """Vectors per namespace (expired ones included until purged)."""
        with self._store.snapshot("vector count") as conn:
            rows = conn.execute("SELECT namespace, COUNT(*) FROM vectors GROUP BY namespace")
            return {str(ns): int(n) for ns, n in rows.fetchall()}

    def metadata(self, ids: Sequence[str]) -> dict[str, dict[str, MetaValue]]:
        """The stored metadata of those ``ids`` that have a vector (``scope``, ...)."""
        unique = list(dict.fromkeys(ids))
        out: dict[str, dict[str, MetaValue]] = {}
        for start in range(0, len(unique), 500):
            out.update(self._metadata(unique[start : start + 500]))
        return out

    def close(self) -> None:
        """Close the SQLite store if this object opened it; a store passed in stays open."""
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> SQLiteVectorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteVectorStore({str(self.path)!r})"

    # -- the in-process matrix ------------------------------------------------------

    def refresh(self) -> None:
        """Apply the changes other processes (and this one) committed since the last call."""
        with self._lock, self._store.snapshot("vector refresh") as conn:
            epoch, floor = conn.execute(
                "SELECT epoch, floor FROM vector_state WHERE id = 0"
            ).fetchone()
            if epoch != self._epoch or self._seq < floor:
                self._reload(conn, int(epoch))
                return
            changes = conn.execute(
                "SELECT l.seq, l.key, v.scope, v.expires_at, v.vector FROM vector_log l "
                "LEFT JOIN vectors v ON v.key = l.key WHERE l.seq > ? ORDER BY l.seq",
                (self._seq,),
            ).fetchall()
            if not changes:
                return
            latest: dict[str, tuple[Any, Any, Any]] = {}
            for _, key, scope, expires, blob in changes:
                latest.pop(key, None)  # keep the order of the last change per key
                latest[key] = (scope, expires, blob)
            for key, (scope, expires, blob) in latest.items():
                if scope is None:
                    self._remove(key)
                else:
                    self._put(key, scope, float(expires), blob)
            self._seq = int(changes[-1][0])

    def _reload(self, conn: Any, epoch: int) -> None:
        self._reset()
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'vector_log'").fetchone()
        seq = int(row[0]) if row else 0
        for key, scope, expires, blob in conn.execute(
            "SELECT key, scope, expires_at, vector FROM vectors"
        ):
            self._put(key, scope, float(expires), blob)
        self._seq, self._epoch = seq, epoch

    def _put(self, key: str, scope: str, expires: float, blob: bytes) -> None:
        vector: npt.NDArray[np.float32] = np.frombuffer(blob, dtype="<f4")
        previous = self._scope_of.get(key)
        if previous is not None and previous != scope:
            self._remove(key)
        partition = self._partitions.get(scope)
        if partition is not None and partition.dim != vector.shape[0]:
            self._remove(key)  # another dimension in one scope (an untagged, older
            return  # file): never comparable, never served; other scopes have their own
        if partition is None:
            partition = self._partitions[scope] = _Partition(vector.shape[0])
        partition.put(key, vector, {"expires_at": expires})
        self._scope_of[key] = scope

    def _remove(self, key: str) -> None:
        scope = self._scope_of.pop(key, None)
        if scope is None:
            return
        partition = self._partitions[scope]
        partition.remove(key)
        if not len(partition):
            del self._partitions[scope]

    def _metadata(self, keys: Sequence[str]) -> dict[str, dict[str, MetaValue]]:
        rows: list[tuple[str, str]] = []
        with self._store.snapshot("vector query") as conn:
            for start in range(0, len(keys), _META_CHUNK):
                chunk = list(keys[start : start + _META_CHUNK])
                marks = ",".join("?" * len(chunk))
                rows += conn.execute(
                    f"SELECT key, meta FROM vectors WHERE key IN ({marks})", chunk
                ).fetchall()
        return {str(key): dict(json.loads(meta)) for key, meta in rows}
