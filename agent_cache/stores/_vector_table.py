"""The SQL of the vector table that lives in the exact layer's SQLite database.

Shared by :class:`~agent_cache.stores.SQLiteStore` (which writes an entry and its vector
in one transaction, and deletes them together) and
:class:`~agent_cache.vectors.SQLiteVectorStore` (which reads them into an in-process
matrix). Every function takes a connection inside a transaction the caller opened.

``vector_log`` is the change feed readers follow: every write or delete of a vector
appends the key (``seq`` only grows), so a process refreshes its matrix by reading the
rows after the last ``seq`` it saw instead of the whole table. ``vector_state`` holds an
``epoch`` (bumped by a bulk clear: readers reload everything) and a ``floor`` (the log was
trimmed up to there: a reader that is further behind reloads everything).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from agent_cache.errors import ConfigurationError

__all__ = [
    "SCHEMA",
    "clear_vectors",
    "delete_vectors",
    "encode_vector_row",
    "write_vector_rows",
]

#: Trim the change log to this many rows (checked every ``_TRIM_EVERY`` writes).
LOG_KEEP = 50_000
_TRIM_EVERY = 1024
_CHUNK = 500

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS vectors (
        key TEXT PRIMARY KEY,
        scope TEXT NOT NULL,
        namespace TEXT NOT NULL,
        expires_at REAL NOT NULL,
        vector BLOB NOT NULL,
        meta TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS vectors_namespace ON vectors(namespace)",
    "CREATE INDEX IF NOT EXISTS vectors_expires_at ON vectors(expires_at)",
    """CREATE TABLE IF NOT EXISTS vector_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS vector_state (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        epoch INTEGER NOT NULL,
        floor INTEGER NOT NULL
    )""",
    "INSERT OR IGNORE INTO vector_state (id, epoch, floor) VALUES (0, 0, 0)",
)

VectorRow = tuple[str, str, str, float, bytes, str]  # key, scope, namespace, expires, blob, meta


def _expiry(value: Any) -> float:
    if value is None:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise ConfigurationError(f"expires_at must be a number, got {value!r}", layer="semantic")
    number = float(value)
    if math.isnan(number):
        raise ConfigurationError("expires_at must not be NaN", layer="semantic")
    return number


def encode_vector_row(
    key: str, vector: npt.ArrayLike, meta: Mapping[str, Any], *, namespace: str | None = None
) -> VectorRow:
    """Validate and encode one vector (L2-normalized float32) and its metadata."""
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.size == 0 or not np.isfinite(array).all():
        raise ConfigurationError("a vector must be non-empty and finite", layer="semantic")
    norm = float(np.linalg.norm(array))
    if norm > 0:
        array = array / np.float32(norm)
    scope = meta.get("scope")
    if not isinstance(scope, str):
        raise ConfigurationError("every vector needs a str 'scope'", layer="semantic")
    ns = meta.get("namespace", namespace)
    if not isinstance(ns, str):
        raise ConfigurationError("every vector needs a str 'namespace'", layer="semantic")
    clean: dict[str, Any] = {}
    for name, value in meta.items():
        if isinstance(value, np.generic):
            value = value.item()
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ConfigurationError(
                f"metadata {name!r} must be str, int, float or bool", layer="semantic"
            )
        clean[name] = value
    expires = _expiry(meta.get("expires_at"))
    clean["expires_at"] = expires
    blob = array.astype("<f4", copy=False).tobytes()
    return key, scope, ns, expires, blob, json.dumps(clean, ensure_ascii=False)


def write_vector_rows(conn: sqlite3.Connection, rows: Sequence[VectorRow]) -> None:
    """Insert or replace vectors and log their keys (inside the caller's transaction)."""
    if not rows:
        return
    conn.executemany(
        "INSERT INTO vectors (key, scope, namespace, expires_at, vector, meta) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET scope = excluded.scope, "
        "namespace = excluded.namespace, expires_at = excluded.expires_at, "
        "vector = excluded.vector, meta = excluded.meta",
        rows,
    )
    cur = conn.executemany("INSERT INTO vector_log (key) VALUES (?)", [(r[0],) for r in rows])
    last = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'vector_log'").fetchone()
    seq = int(last[0]) if last else 0
    if cur.rowcount and seq // _TRIM_EVERY != (seq - len(rows)) // _TRIM_EVERY:
        _trim(conn, seq)


def _trim(conn: sqlite3.Connection, seq: int) -> None:
    floor = seq - LOG_KEEP
    if floor > 0:
        conn.execute("DELETE FROM vector_log WHERE seq <= ?", (floor,))
        conn.execute("UPDATE vector_state SET floor = MAX(floor, ?) WHERE id = 0", (floor,))


def delete_vectors(conn: sqlite3.Connection, keys: Iterable[str]) -> None:
    """Delete the vectors of ``keys`` (if any) and log them."""
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        conn.execute(
            f"INSERT INTO vector_log (key) SELECT key FROM vectors WHERE key IN ({marks})", chunk
        )
        conn.execute(f"DELETE FROM vectors WHERE key IN ({marks})", chunk)


def delete_vectors_where(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> None:
    """Delete (and log) the vectors matching a SQL condition on the ``vectors`` table."""
    conn.execute(f"INSERT INTO vector_log (key) SELECT key FROM vectors WHERE {where}", params)
    conn.execute(f"DELETE FROM vectors WHERE {where}", params)


def clear_vectors(conn: sqlite3.Connection) -> None:
    """Delete every vector; readers see a new epoch and reload."""
    conn.execute("DELETE FROM vectors")
    conn.execute("UPDATE vector_state SET epoch = epoch + 1 WHERE id = 0")
