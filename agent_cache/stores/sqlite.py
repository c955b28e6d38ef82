"""A SQLite key-value store for the exact layer: the embedded, persistent default."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import threading
import time
import urllib.parse
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import numpy.typing as npt

from agent_cache import _fork
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.stores import _sqlite_open as _open_guard
from agent_cache.stores import _vector_table as vt
from agent_cache.stores._entry import StoredEntry

__all__ = ["SQLiteStore"]

log = logging.getLogger("agent_cache")

_CHUNK = 500  # bound parameters per IN (...) query; well under every SQLite limit
_BUSY_TIMEOUT_MS = 5000
_HAS_RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)

_ENTRY_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS entries (
        key TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        value TEXT NOT NULL,
        expires_at REAL NULL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS entries_namespace ON entries(namespace)",
    "CREATE INDEX IF NOT EXISTS entries_expires_at ON entries(expires_at)",
    """CREATE TABLE IF NOT EXISTS tags (
        tag TEXT NOT NULL,
        key TEXT NOT NULL,
        PRIMARY KEY (tag, key)
    )""",
    "CREATE INDEX IF NOT EXISTS tags_key ON tags(key)",
    """CREATE TABLE IF NOT EXISTS counters (
        name TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS locks (
        name TEXT PRIMARY KEY,
        token TEXT NOT NULL,
        expires_at REAL NOT NULL
    )""",
)
_SCHEMA = _ENTRY_SCHEMA + vt.SCHEMA
#: Every table and index the schema creates: all present means no schema write is needed.
_SCHEMA_NAMES = frozenset(
    m.group(1)
    for m in (re.search(r"IF NOT EXISTS (\w+)", statement) for statement in _SCHEMA)
    if m is not None
)


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _marks(n: int) -> str:
    return ",".join("?" * n)


class _Local(threading.local):
    conn: sqlite3.Connection | None = None
    generation: int = -1
    pid: int = -1


def _is_corrupt(exc: sqlite3.Error) -> bool:
    """``database disk image is malformed`` (SQLITE_CORRUPT) or ``file is not a
    database`` (SQLITE_NOTADB): the file's fault, not a passing condition."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (11, 26)
    text = str(exc)
    return "malformed" in text or "not a database" in text


def _cannot_open(exc: sqlite3.Error) -> bool:
    """``unable to open database file`` (SQLITE_CANTOPEN)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == 14
    return "unable to open" in str(exc)


#: How often (seconds) an open store checks that its path still names the open file.
INODE_CHECK_S = 1.0

#: A WAL smaller than this is never checkpointed early (one ``stat`` per commit, no more).
WAL_CHECK_MIN_BYTES = 64 * 1024
#: What a WAL is truncated back to once checkpointed (``PRAGMA journal_size_limit``):
#: a burst that grew it (a long reader holds checkpoints back) does not keep the space.
JOURNAL_SIZE_LIMIT = 8 * 1024 * 1024


def _is_full(exc: sqlite3.Error) -> bool:
    """``database or disk is full`` (SQLITE_FULL): the disk, or a size limit."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == 13
    return "is full" in str(exc)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _free_bytes(folder: Path) -> int | None:
    """Bytes this process may still write on the file system holding ``folder``."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return None
    return st.f_bavail * st.f_frsize


def _file_id(path: Path) -> tuple[int, int] | None:
    """The file's identity (device, inode); ``None`` if there is no file at ``path``."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _read_only(path: Path) -> bool:
    """Whether ``path`` exists but this process may not write it or its folder (SQLite
    needs the folder for its ``-wal`` / ``-shm`` files). ``os.access`` also reports a
    read-only mount, for root too."""
    if not path.exists():
        return False
    return not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _intact(path: Path) -> bool:
    """Whether the file now at ``path`` passes ``PRAGMA quick_check`` (absent: intact).

    Only a corrupt answer says no: a file busy or locked by another process is a
    database someone uses, never moved aside for that."""
    if not path.exists():
        return True
    try:
        conn = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        return not _is_corrupt(exc)
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
        return [tuple(r) for r in rows] == [("ok",)]
    except sqlite3.Error as exc:
        return isinstance(exc, sqlite3.OperationalError) and not _is_corrupt(exc)
    finally:
        conn.close()


class SQLiteStore:
    """A store in one SQLite file, shared safely by threads and processes.

    The database runs in WAL mode with a busy timeout, so several processes can read and
    write one file. Each thread gets its own connection; every write is one
    ``BEGIN IMMEDIATE`` transaction. Nothing touches the disk until the first call (the
    file and its parent directories are created then). Any number of processes may open
    a new file at once: its first open (the switch to WAL, the schema) is serialized by a
    lock on a sibling file, ``<name>-open.lock``, which stays next to the database.
    Expired records read as absent and are removed by :meth:`purge_expired` or by the
    next write to the same key.
    Counters survive :meth:`clear` (namespace versions live there and must only grow).
    Every ``sqlite3.Error`` is raised as :class:`~agent_cache.errors.BackendError`.
    A file that is not a SQLite database, or a corrupt one, is found when the first
    connection opens or by any read or write that meets a corrupt page: with
    ``on_corrupt="raise"`` it is a ``BackendError`` naming the file (with
    ``fatal = True``: :class:`~agent_cache.LayeredCache` raises it instead of serving
    misses); with ``on_corrupt="rebuild"`` the file is moved aside
    (``<name>.corrupt-<time>``) with a warning and an empty database takes its place.

    Args:
        path: the database file.
        on_corrupt: ``"raise"`` (default) or ``"rebuild"``.

    Example:
        >>> import tempfile, os
        >>> store = SQLiteStore(os.path.join(tempfile.mkdtemp(), "cache", "exact.db"))
        >>> store.set("k", '"v"', namespace="default", expires_at=10.0, now=0.0)
        >>> store.get("k", now=5.0), store.get("k", now=10.0)
        ('"v"', None)
        >>> store.close()
    """

    def __init__(
        self, path: str | os.PathLike[str], *, on_corrupt: Literal["raise", "rebuild"] = "raise"
    ) -> None:
        if on_corrupt not in ("raise", "rebuild"):
            raise ConfigurationError(f"on_corrupt must be 'raise' or 'rebuild', not {on_corrupt!r}")
        self.on_corrupt = on_corrupt
        text = os.fspath(path)
        if not text or text == ":memory:" or text.startswith("file:"):
            raise ConfigurationError(
                f"SQLiteStore needs a file path, got {text!r} (use MemoryStore for memory)"
            )
        self._path = Path(text)
        self._wal_path = f"{text}-wal"
        self._folder = self._path.parent
        self._wal_seen = 0  # the WAL's size when the free space was last read
        self._local = _Local()
        self._lock = threading.Lock()
        self._conns: list[sqlite3.Connection] = []
        self._inherited: list[sqlite3.Connection] = []
        self._generation = 0
        self._owner_pid = os.getpid()
        self._schema_ready_pid = -1
        self._read_only_logged = False
        self._checked_at = 0.0
        self._file_id: tuple[int, int] | None = None
        _fork.after_fork_in_child(self, SQLiteStore._after_fork)

    def _after_fork(self) -> None:
        """In a forked child: a lock a parent thread held is free, the parent's
        connections are dropped unused (never closed: SQLite must not touch them)."""
        self._lock = threading.Lock()
        self._local = _Local()
        self._forget_if_forked()

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    # -- records -----------------------------------------------------------------------

    def get(self, key: str, now: float) -> str | None:
        """The value under ``key``, or ``None`` if absent or expired at ``now``."""
        with self._errors("get", key):
            row = (
                self._conn()
                .execute(
                    "SELECT value FROM entries WHERE key = ? "
                    "AND (expires_at IS NULL OR expires_at > ?)",
                    (key, now),
                )
                .fetchone()
            )
        return None if row is None else str(row[0])

    def get_many(self, keys: Sequence[str], now: float) -> dict[str, str]:
        """The live values among ``keys``, read with one query per 500 keys."""
        unique = list(dict.fromkeys(keys))
        out: dict[str, str] = {}
        with self._errors("get_many"):
            conn = self._conn()
            for chunk in _chunks(unique):
                rows = conn.execute(
                    f"SELECT key, value FROM entries WHERE key IN ({_marks(len(chunk))}) "
                    "AND (expires_at IS NULL OR expires_at > ?)",
                    (*chunk, now),
                ).fetchall()
                out.update((str(k), str(v)) for k, v in rows)
        return out

    def set(
        self,
        key: str,
        value: str,
        *,
        namespace: str,
        expires_at: float | None,
        tags: Sequence[str] = (),
        now: float,
        vector: npt.ArrayLike | None = None,
        vector_meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Store ``value`` under ``key``, replacing any earlier record and its tags.

        A record already expired at ``now`` is not stored, and any earlier record under
        ``key`` (and its vector) is deleted, so the key reads as absent afterwards.
        With ``vector`` (and its ``vector_meta``: ``scope``, ``expires_at``, ...), the
        entry's vector is written in the same transaction, for
        :class:`~agent_cache.vectors.SQLiteVectorStore`: an entry and its vector are
        never out of step, whatever other processes do.
        """
        row = None
        if vector is not None:
            row = vt.encode_vector_row(key, vector, vector_meta or {}, namespace=namespace)
        with self._errors("set", key), self._write() as conn:
            conn.execute("DELETE FROM tags WHERE key = ?", (key,))
            if expires_at is not None and expires_at <= now:
                conn.execute("DELETE FROM entries WHERE key = ?", (key,))
                vt.delete_vectors(conn, [key])
                return
            conn.execute(
                "INSERT INTO entries (key, namespace, value, expires_at, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                "namespace = excluded.namespace, value = excluded.value, "
                "expires_at = excluded.expires_at, created_at = excluded.created_at",
                (key, namespace, value, expires_at, now),
            )
            conn.executemany(
                "INSERT OR IGNORE INTO tags (tag, key) VALUES (?, ?)",
                [(tag, key) for tag in dict.fromkeys(tags)],
            )
            if row is not None:
                vt.write_vector_rows(conn, [row])

    def delete(self, keys: Sequence[str]) -> int:
        """Delete records and their tag-index rows; return how many records existed."""
        unique = list(dict.fromkeys(keys))
        if not unique:
            return 0
        removed = 0
        with self._errors("delete"), self._write() as conn:
            for chunk in _chunks(unique):
                marks = _marks(len(chunk))
                conn.execute(f"DELETE FROM tags WHERE key IN ({marks})", chunk)
                vt.delete_vectors(conn, chunk)
                removed += conn.execute(
                    f"DELETE FROM entries WHERE key IN ({marks})", chunk
                ).rowcount
        return removed

    def keys_for_tag(self, tag: str, limit: int, *, namespace: str | None = None) -> list[str]:
        """Up to ``limit`` keys carrying ``tag`` (in ``namespace``, or in any namespace)."""
        if limit <= 0:
            return []
        with self._errors("keys_for_tag"):
            args: tuple[str | int, ...]
            if namespace is None:
                sql, args = "SELECT key FROM tags WHERE tag = ? LIMIT ?", (tag, limit)
            else:
                sql = (
                    "SELECT t.key FROM tags t JOIN entries e ON e.key = t.key "
                    "WHERE t.tag = ? AND e.namespace = ? LIMIT ?"
                )
                args = (tag, namespace, limit)
            rows = self._conn().execute(sql, args).fetchall()
        return [str(row[0]) for row in rows]

    def clear(self, namespace: str | None = None) -> int:
        """Delete every record (of ``namespace`` if given); return how many were deleted.

        Counters are kept.
        """
        with self._errors("clear"), self._write() as conn:
            if namespace is None:
                conn.execute("DELETE FROM tags")
                vt.clear_vectors(conn)
                return int(conn.execute("DELETE FROM entries").rowcount)
            vt.delete_vectors_where(conn, "namespace = ?", (namespace,))
            conn.execute(
                "DELETE FROM tags WHERE key IN (SELECT key FROM entries WHERE namespace = ?)",
                (namespace,),
            )
            return int(
                conn.execute("DELETE FROM entries WHERE namespace = ?", (namespace,)).rowcount
            )

    def count(self, namespace: str | None = None) -> int:
        """How many records are stored (of ``namespace`` if given).

        Expired records not yet purged are included.
        """
        with self._errors("count"):
            if namespace is None:
                row = self._conn().execute("SELECT COUNT(*) FROM entries").fetchone()
            else:
                row = (
                    self._conn()
                    .execute("SELECT COUNT(*) FROM entries WHERE namespace = ?", (namespace,))
                    .fetchone()
                )
        return int(row[0])

    def namespace_counts(self) -> dict[str, int]:
        """Records stored per namespace (expired ones not yet purged included)."""
        with self._errors("namespace_counts"):
            rows = (
                self._conn()
                .execute("SELECT namespace, COUNT(*) FROM entries GROUP BY namespace")
                .fetchall()
            )
        return {str(ns): int(n) for ns, n in rows}

    def entries(
        self, now: float, namespace: str | None = None, *, batch: int = 500
    ) -> Iterator[StoredEntry]:
        """Every record live at ``now`` (of ``namespace`` if given), in key order.

        Read in pages of ``batch`` records (one short read each, with their tags), so
        writers are never blocked for long: a record written while the iteration runs
        appears if its key sorts after the current page, and none appears twice.
        """
        after = ""
        scoped = "" if namespace is None else "AND namespace = ? "
        while True:
            params: tuple[Any, ...] = (after, now) + (() if namespace is None else (namespace,))
            with self._errors("entries"), self.snapshot("entries") as conn:
                rows = conn.execute(
                    "SELECT key, namespace, value, expires_at FROM entries WHERE key > ? "
                    f"AND (expires_at IS NULL OR expires_at > ?) {scoped}ORDER BY key LIMIT ?",
                    (*params, max(1, batch)),
                ).fetchall()
                tags: dict[str, list[str]] = {}
                if rows:
                    keys = [str(r[0]) for r in rows]
                    for chunk in _chunks(keys):
                        for key, tag in conn.execute(
                            f"SELECT key, tag FROM tags WHERE key IN ({_marks(len(chunk))})",
                            chunk,
                        ):
                            tags.setdefault(str(key), []).append(str(tag))
            if not rows:
                return
            for key, ns, value, expires in rows:
                yield StoredEntry(
                    str(key),
                    str(ns),
                    str(value),
                    None if expires is None else float(expires),
                    tuple(sorted(tags.get(str(key), ()))),
                )
            after = str(rows[-1][0])

    def housekeep(self, now: float, limit: int = 256) -> list[str]:
        """Delete up to ``limit`` records expired at ``now``, their tag rows and vectors
        (and up to ``limit`` vectors whose own, shorter, TTL ran out); return the keys
        of the records deleted. One short transaction, cheap when nothing expired
        (an index probe), so :class:`~agent_cache.LayeredCache` runs it on writes.
        """
        with self._errors("housekeep"):
            probe = (
                self._conn()
                .execute("SELECT 1 FROM entries WHERE expires_at <= ? LIMIT 1", (now,))
                .fetchone()
            )
            vprobe = (
                self._conn()
                .execute("SELECT 1 FROM vectors WHERE expires_at <= ? LIMIT 1", (now,))
                .fetchone()
            )
            if probe is None and vprobe is None:
                return []
            with self._write() as conn:
                keys = [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT key FROM entries WHERE expires_at <= ? LIMIT ?", (now, limit)
                    ).fetchall()
                ]
                for chunk in _chunks(keys):
                    marks = _marks(len(chunk))
                    conn.execute(f"DELETE FROM tags WHERE key IN ({marks})", chunk)
                    vt.delete_vectors(conn, chunk)
                    conn.execute(f"DELETE FROM entries WHERE key IN ({marks})", chunk)
                if vprobe is not None:
                    vt.delete_vectors_where(
                        conn,
                        "key IN (SELECT key FROM vectors WHERE expires_at <= ? LIMIT ?)",
                        (now, limit),
                    )
        return keys

    def evict_over(self, namespace: str, keep: int) -> list[str]:
        """Evict ``namespace``'s oldest-written records beyond ``keep`` (a per-tenant
        quota: other namespaces are never touched), vectors and tags included; return
        their keys."""
        with self._errors("evict_over"):
            row = (
                self._conn()
                .execute("SELECT COUNT(*) FROM entries WHERE namespace = ?", (namespace,))
                .fetchone()
            )
            excess = int(row[0]) - keep
            if excess <= 0:
                return []
            with self._write() as conn:
                keys = [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT key FROM entries WHERE namespace = ? ORDER BY created_at, key "
                        "LIMIT ?",
                        (namespace, excess),
                    ).fetchall()
                ]
                for chunk in _chunks(keys):
                    marks = _marks(len(chunk))
                    conn.execute(f"DELETE FROM tags WHERE key IN ({marks})", chunk)
                    vt.delete_vectors(conn, chunk)
                    conn.execute(f"DELETE FROM entries WHERE key IN ({marks})", chunk)
        return keys

    def purge_expired(self, now: float) -> int:
        """Delete every record expired at ``now`` and its tag rows; return how many."""
        with self._errors("purge_expired"), self._write() as conn:
            vt.delete_vectors_where(
                conn,
                "expires_at <= ? OR key IN "
                "(SELECT key FROM entries WHERE expires_at IS NOT NULL AND expires_at <= ?)",
                (now, now),
            )
            conn.execute(
                "DELETE FROM tags WHERE key IN "
                "(SELECT key FROM entries WHERE expires_at IS NOT NULL AND expires_at <= ?)",
                (now,),
            )
            return int(
                conn.execute(
                    "DELETE FROM entries WHERE expires_at IS NOT NULL AND expires_at <= ?",
                    (now,),
                ).rowcount
            )

    # -- counters ----------------------------------------------------------------------

    def incr(self, counter: str) -> int:
        """Atomically add one to ``counter`` and return the new value."""
        with self._errors("incr"), self._write() as conn:
            if _HAS_RETURNING:
                row = conn.execute(
                    "INSERT INTO counters (name, value) VALUES (?, 1) "
                    "ON CONFLICT(name) DO UPDATE SET value = value + 1 RETURNING value",
                    (counter,),
                ).fetchone()
            else:  # SQLite < 3.35: the IMMEDIATE transaction makes the pair atomic
                conn.execute(
                    "INSERT OR IGNORE INTO counters (name, value) VALUES (?, 0)", (counter,)
                )
                conn.execute("UPDATE counters SET value = value + 1 WHERE name = ?", (counter,))
                row = conn.execute(
                    "SELECT value FROM counters WHERE name = ?", (counter,)
                ).fetchone()
        return int(row[0])

    def get_counter(self, counter: str) -> int:
        """The counter's value; 0 if it was never incremented."""
        with self._errors("get_counter"):
            row = (
                self._conn()
                .execute("SELECT value FROM counters WHERE name = ?", (counter,))
                .fetchone()
            )
        return 0 if row is None else int(row[0])

    # -- locks (single-flight across processes) ---------------------------------------

    def try_lock(self, name: str, token: str, ttl: float) -> bool:
        """Take the named lock for ``ttl`` seconds (wall clock) unless another holder has it."""
        now = time.time()
        with self._errors("try_lock"), self._write() as conn:
            conn.execute("DELETE FROM locks WHERE name = ? AND expires_at <= ?", (name, now))
            cur = conn.execute(
                "INSERT OR IGNORE INTO locks (name, token, expires_at) VALUES (?, ?, ?)",
                (name, token, now + ttl),
            )
            return cur.rowcount == 1

    def renew_lock(self, name: str, token: str, ttl: float) -> bool:
        """Extend the lock to ``ttl`` seconds from now if ``token`` still holds it."""
        with self._errors("renew_lock"), self._write() as conn:
            cur = conn.execute(
                "UPDATE locks SET expires_at = ? WHERE name = ? AND token = ?",
                (time.time() + ttl, name, token),
            )
            return cur.rowcount == 1

    def unlock(self, name: str, token: str) -> None:
        """Release the lock if ``token`` still holds it."""
        with self._errors("unlock"), self._write() as conn:
            conn.execute("DELETE FROM locks WHERE name = ? AND token = ?", (name, token))

    # -- transactions (for stores that share this database) ---------------------------

    @contextmanager
    def transaction(self, op: str = "write") -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` write transaction on this thread's connection.

        For backends that keep their tables in this database
        (:class:`~agent_cache.vectors.SQLiteVectorStore`); errors become ``BackendError``.
        """
        with self._errors(op), self._write() as conn:
            yield conn

    @contextmanager
    def snapshot(self, op: str = "read") -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees the same committed state."""
        with self._errors(op):
            conn = self._conn()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection this store opened; a later call reopens lazily."""
        with self._lock:
            self._forget_if_forked()
            conns, self._conns = self._conns, []
            self._generation += 1
        with _fork.sqlite_gate.inside():
            for conn in conns:
                with contextlib.suppress(sqlite3.Error):  # closing is best effort
                    conn.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self._path)!r})"

    # -- internals ---------------------------------------------------------------------

    @contextmanager
    def _errors(self, op: str, key: str | None = None) -> Iterator[None]:
        try:
            with _fork.sqlite_gate.inside():  # no fork() while a thread is in SQLite
                yield
        except sqlite3.Error as exc:
            if _is_corrupt(exc):  # found by a read or write, not at open: on_corrupt
                raise self._corrupt_error(exc, op, key) from exc
            if _is_full(exc):  # give back what the WAL holds, for the next writes
                self._checkpoint(self._local.conn)
            raise BackendError(
                f"SQLite {op} failed on {str(self._path)!r}: {exc}", layer="exact", key=key
            ) from exc
        except OSError as exc:  # creating the parent directory
            raise BackendError(
                f"cannot open SQLite file {str(self._path)!r}: {exc}", layer="exact", key=key
            ) from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        self._keep_wal_small(conn)

    def _keep_wal_small(self, conn: sqlite3.Connection) -> None:
        """After a commit: a WAL larger than the free space left is checkpointed into
        the database and truncated at once, not when it reaches SQLite's 1,000 pages
        (4 MB): on a small or nearly full disk the WAL would otherwise fill it with
        old copies of a few pages, and the checkpoint that frees it could no longer
        grow the database (stuck full: 67 entries in 3 MiB, 3 MiB of WAL). So the WAL
        keeps at most half of what is free (give or take 64 KiB: the free space is
        read each time the WAL grew that much), and the database gets the rest."""
        wal = _size(self._wal_path)
        if wal < WAL_CHECK_MIN_BYTES or 0 <= wal - self._wal_seen < WAL_CHECK_MIN_BYTES:
            return  # the free space is read again once the WAL grew 64 KiB past it
        self._wal_seen = wal
        free = _free_bytes(self._folder)
        if free is not None and wal > free // 2:
            self._checkpoint(conn)
            self._wal_seen = 0

    def _checkpoint(self, conn: sqlite3.Connection | None) -> None:
        """``wal_checkpoint(TRUNCATE)`` without waiting: a reader or writer in another
        connection makes it give up (it is tried again after the next commit). Best
        effort: a failure here is not the caller's failure."""
        if conn is None or self._local.conn is not conn or conn.in_transaction:
            return
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        except sqlite3.Error as exc:
            log.debug("agent-cache: checkpoint of %r failed: %s", str(self._path), exc)

    def _conn(self) -> sqlite3.Connection:
        local = self._local
        pid = os.getpid()
        if (
            local.conn is not None
            and local.generation == self._generation
            and local.pid == pid
            and (time.monotonic() - self._checked_at < INODE_CHECK_S or self._same_file())
        ):
            return local.conn
        try:
            conn = self._open_conn(local, pid)
        finally:
            self._checked_at = time.monotonic()
        self._file_id = _file_id(self._path)
        return conn

    def _same_file(self) -> bool:
        """Whether the path still names the file the connections have open; if it was
        deleted or replaced (they would go on writing to a file nobody else sees),
        every connection is closed, with a warning, to reopen on what the path holds."""
        self._checked_at = time.monotonic()
        now = _file_id(self._path)
        if now == self._file_id:
            return True
        message = (
            f"agent-cache: the SQLite file {str(self._path)!r} was "
            f"{'deleted' if now is None else 'replaced'} under this process; reopening"
        )
        log.warning(message)
        self._schema_ready_pid = -1  # the new file may need its schema
        self.close()
        return False

    def _open_conn(self, local: _Local, pid: int) -> sqlite3.Connection:
        try:
            return self._open(local, pid)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):  # locked, unreadable dir, ...
                if self.on_corrupt != "rebuild" or not _cannot_open(exc):
                    raise
                # another process was moving a corrupt file aside (seen once in ~10
                # runs of four workers, under load): once more, after its move
                with _open_guard.first_open_lock(self._path):
                    pass
                return self._open(local, pid)
            if self.on_corrupt == "raise":
                error = BackendError(
                    f"the SQLite file {str(self._path)!r} is corrupt or not a SQLite database "
                    f"({exc}); move it aside, or pass on_corrupt='rebuild'",
                    layer="exact",
                )
                error.fatal = True  # type: ignore[attr-defined]
                raise error from exc
            self._rebuild(exc)
            return self._open(local, pid)

    def _rebuild(self, cause: Exception) -> None:
        """Move the corrupt file aside, once across processes: under the first-open lock,
        and only if the file now at the path still fails an integrity check (workers
        that started together all met the corrupt file; the first one moves it, the
        others then find the rebuilt one and open it)."""
        with _open_guard.first_open_lock(self._path):
            if not _intact(self._path):
                self._move_aside(cause)

    def _corrupt_error(self, exc: sqlite3.Error, op: str, key: str | None) -> BackendError:
        """A corrupt page met by ``op``. ``on_corrupt="raise"``: a fatal ``BackendError``
        naming the file (the cache raises it, never serves misses from a corrupt file).
        ``"rebuild"``: the file is moved aside (if it still fails an integrity check under
        the first-open lock: another process may have rebuilt it already) and every
        connection reopens on an empty one; this call is a (non-fatal) failure."""
        if self.on_corrupt == "raise":
            error = BackendError(
                f"the SQLite file {str(self._path)!r} is corrupt ({exc}, found by {op}); "
                "move it aside, or pass on_corrupt='rebuild'",
                layer="exact",
                key=key,
            )
            error.fatal = True  # type: ignore[attr-defined]
            return error
        try:
            self.close()  # every thread reopens on what the path holds after this
            self._rebuild(exc)
        except (OSError, sqlite3.Error) as failed:
            log.warning("agent-cache: could not rebuild %r: %s", str(self._path), failed)
        return BackendError(
            f"SQLite {op} failed on {str(self._path)!r}: {exc} (on_corrupt='rebuild': "
            "moved aside, starting empty)",
            layer="exact",
            key=key,
        )

    def _move_aside(self, cause: Exception) -> None:
        stamp = f"{self._path.name}.corrupt-{int(time.time())}"
        aside, n = self._path.with_name(stamp), 1
        while aside.exists():  # a second corruption within the second keeps both copies
            aside, n = self._path.with_name(f"{stamp}-{n}"), n + 1
        for suffix in ("", "-wal", "-shm"):
            part = Path(f"{self._path}{suffix}")
            if part.exists():
                os.replace(part, Path(f"{aside}{suffix}"))
        message = (
            f"agent-cache: the SQLite file {str(self._path)!r} was corrupt ({cause}); "
            f"moved to {str(aside)!r}, starting empty"
        )
        log.warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)

    def _open(self, local: _Local, pid: int) -> sqlite3.Connection:
        # A connection inherited across fork() must not be used (nor closed) here.
        self._path.parent.mkdir(parents=True, exist_ok=True)
        if _read_only(self._path):
            conn = self._open_read_only()
        else:
            self._drop_orphans()
            conn = self._connect()
            try:
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
                self._prepare(conn, pid)
            except BaseException:
                conn.close()
                raise
        with self._lock:
            self._forget_if_forked()
            self._conns.append(conn)
            local.conn, local.generation, local.pid = conn, self._generation, pid
        return conn

    def _connect(self) -> sqlite3.Connection:
        """A connection bound to the file the path names now.

        SQLite finds a database's ``-wal`` and ``-shm`` by the path's name, not by the
        open file: a connection opened on a file that another process then moves aside
        (``on_corrupt="rebuild"``) would read, write and checkpoint the new file's WAL
        into the old one (entries lost, "disk I/O error" elsewhere). With ``rebuild``, the
        connection is therefore opened and first read under the first-open lock, which a
        move aside holds: it is bound to the file that was at the path then."""

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(
                self._path,
                timeout=_BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
                check_same_thread=False,  # so that close() may close it from any thread
            )

        if self.on_corrupt != "rebuild":
            return connect()
        with _open_guard.first_open_lock(self._path):
            conn = connect()
            try:
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            except BaseException:
                conn.close()
                raise
            return conn

    def _drop_orphans(self) -> None:
        """A ``-wal`` / ``-shm`` beside no database file belong to one that was deleted
        (a process that still has it open goes on using them, unlinked): a new file
        opened with them reads the deleted database's WAL frames over its own empty
        pages ("disk I/O error" on every call, before). They are removed first, under
        the first-open lock (whoever creates the file next holds it for the WAL switch
        that makes new ones), with a warning."""
        parts = [Path(f"{self._path}{suffix}") for suffix in ("-wal", "-shm")]
        if self._path.exists() or not any(p.exists() for p in parts):
            return
        with _open_guard.first_open_lock(self._path):
            if self._path.exists():
                return  # another opener created the file meanwhile: they are its own
            removed = [p.name for p in parts if p.exists()]
            for part in parts:
                part.unlink(missing_ok=True)
        if removed:
            log.warning(
                "agent-cache: %s left beside no database file %r (it was deleted): "
                "removed, starting empty",
                " and ".join(removed),
                str(self._path),
            )

    def _open_read_only(self) -> sqlite3.Connection:
        """A read-only connection to a file this process cannot write (read-only file,
        folder or mount): reads are served, every write fails (a logged miss upstream).

        No journal switch, no schema write, no lock file. ``mode=ro`` first: it reads a
        WAL file whose ``-shm`` cannot be created as long as no ``-wal`` is left over
        (SQLite >= 3.22); where that fails too, ``immutable=1`` (nothing can write the
        file then, so nothing can change under the reader).
        """
        uri = "file:" + urllib.parse.quote(os.path.abspath(self._path))
        last: sqlite3.Error | None = None
        for flags in ("mode=ro", "mode=ro&immutable=1"):
            conn = sqlite3.connect(
                f"{uri}?{flags}",
                uri=True,
                timeout=_BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            except sqlite3.DatabaseError as exc:
                conn.close()
                if not isinstance(exc, sqlite3.OperationalError):
                    raise  # corrupt or not a database: on_corrupt decides
                last = exc
                continue
            if not self._read_only_logged:
                self._read_only_logged = True
                log.warning(
                    "agent-cache: %r is not writable: serving reads only (%s); writes are misses",
                    str(self._path),
                    flags,
                )
            return conn
        assert last is not None
        raise last

    def _prepare(self, conn: sqlite3.Connection, pid: int) -> None:
        """Make sure the file is in WAL with the schema, safe from any number of openers.

        Fast path (no lock file: one ``PRAGMA journal_mode`` read and, once per store and
        process, one read of ``sqlite_master``): the file is in WAL and has every table.
        Otherwise the first-open sequence runs under the first-open file lock, retried on
        ``database is locked`` (:mod:`agent_cache.stores._sqlite_open`). The header is
        read through SQLite, never by opening the file: closing any descriptor of the
        database file drops every POSIX lock this process holds on it, SQLite's included.
        """
        if _open_guard.retry_locked(lambda: self._ready(conn, pid)):
            return
        with _open_guard.first_open_lock(self._path):
            _open_guard.retry_locked(lambda: self._first_open(conn))
        self._schema_ready_pid = pid

    def _ready(self, conn: sqlite3.Connection, pid: int) -> bool:
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            return False
        return self._schema_present(conn, pid)

    def _schema_present(self, conn: sqlite3.Connection, pid: int) -> bool:
        if self._schema_ready_pid == pid:
            return True
        names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
        if not names >= _SCHEMA_NAMES:
            return False
        if conn.execute("SELECT 1 FROM vector_state WHERE id = 0").fetchone() is None:
            return False
        self._schema_ready_pid = pid
        return True

    @staticmethod
    def _first_open(conn: sqlite3.Connection) -> None:
        # WAL is stored in the file: switch only a file not in WAL yet. The switch takes
        # an exclusive lock the busy timeout does not wait for: the caller holds the
        # first-open file lock so that other openers of this library wait instead.
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise

    def _forget_if_forked(self) -> None:
        """After fork(), drop (without closing) the connections the parent opened."""
        pid = os.getpid()
        if pid != self._owner_pid:
            self._inherited.extend(self._conns)  # kept referenced: never finalized here
            self._conns = []
            self._owner_pid = pid
