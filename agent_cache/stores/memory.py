"""An in-process, LRU-bounded key-value store for the exact layer."""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType

from agent_cache import _fork
from agent_cache.errors import ConfigurationError
from agent_cache.stores._entry import StoredEntry

__all__ = ["MemoryStore"]


@dataclass(frozen=True, slots=True)
class _Record:
    value: str
    namespace: str
    expires_at: float | None
    tags: tuple[str, ...]


class MemoryStore:
    """A thread-safe, size-bounded LRU store that lives in this process only.

    When more than ``max_entries`` records are held, the least recently used one is
    evicted together with its tag-index rows. Expiry is checked against the ``now``
    passed to :meth:`get`: an expired record reads as ``None`` and is removed. Counters
    are kept apart from records and survive :meth:`clear` (namespace versions live there
    and must only ever grow).

    Args:
        max_entries: the most records held at once (at least 1).

    Example:
        >>> store = MemoryStore(max_entries=2)
        >>> store.set("k", '"v"', namespace="default", expires_at=None, tags=["doc:1"], now=0.0)
        >>> store.get("k", now=1.0)
        '"v"'
        >>> store.keys_for_tag("doc:1", limit=10)
        ['k']
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        if max_entries < 1:
            raise ConfigurationError(f"max_entries must be at least 1, got {max_entries}")
        self._max_entries = max_entries
        self._lock = threading.RLock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))
        self._records: OrderedDict[str, _Record] = OrderedDict()
        # (namespace, tag) -> keys carrying it; a dict keeps insertion order for stable
        # batches, and the namespace in the index keeps tenants apart
        self._tags: dict[tuple[str, str], dict[str, None]] = {}
        self._counters: dict[str, int] = {}
        self._expiry: list[tuple[float, str]] = []  # a heap of (expires_at, key)
        self._evicted: deque[str] = deque(maxlen=max_entries)  # for :meth:`housekeep`

    @property
    def max_entries(self) -> int:
        """The most records held at once."""
        return self._max_entries

    # -- records -----------------------------------------------------------------------

    def get(self, key: str, now: float) -> str | None:
        """The value under ``key``, or ``None`` if absent or expired at ``now``."""
        with self._lock:
            return self._get_locked(key, now)

    def get_many(self, keys: Sequence[str], now: float) -> dict[str, str]:
        """The live values among ``keys``; absent and expired keys are left out."""
        with self._lock:
            out: dict[str, str] = {}
            for key in keys:
                value = self._get_locked(key, now)
                if value is not None:
                    out[key] = value
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
    ) -> None:
        """Store ``value`` under ``key``, replacing any earlier record and its tags.

        A record already expired at ``now`` is not stored, and any earlier record under
        ``key`` is deleted, so the key reads as absent afterwards.
        """
        with self._lock:
            self._remove_locked(key)
            if expires_at is not None and expires_at <= now:
                return
            unique_tags = tuple(dict.fromkeys(tags))
            self._records[key] = _Record(value, namespace, expires_at, unique_tags)
            for tag in unique_tags:
                self._tags.setdefault((namespace, tag), {})[key] = None
            if expires_at is not None:
                heapq.heappush(self._expiry, (expires_at, key))
            while len(self._records) > self._max_entries:
                oldest = next(iter(self._records))
                self._remove_locked(oldest)
                self._evicted.append(oldest)
            if len(self._expiry) > 2 * self._max_entries:  # overwritten keys' stale items
                self._expiry = [(x, k) for x, k in self._expiry if self._expires(k) == x]
                heapq.heapify(self._expiry)

    def housekeep(self, now: float, limit: int = 256) -> list[str]:
        """Delete up to ``limit`` records expired at ``now`` (and their tag rows).

        Returns their keys and those of the records the LRU bound evicted since the last
        call, so that the cache deletes their vectors too.
        """
        with self._lock:
            out = list(self._evicted)
            self._evicted.clear()
            purged = 0
            while self._expiry and self._expiry[0][0] <= now and purged < limit:
                expires, key = heapq.heappop(self._expiry)
                if self._expires(key) == expires and self._remove_locked(key):
                    out.append(key)
                    purged += 1
            return out

    def evict_over(self, namespace: str, keep: int) -> list[str]:
        """Evict ``namespace``'s least recently used records beyond ``keep`` (a
        per-tenant quota: other namespaces are never touched); return their keys."""
        with self._lock:
            mine = [k for k, r in self._records.items() if r.namespace == namespace]
            doomed = mine[: max(0, len(mine) - keep)]
            for key in doomed:
                self._remove_locked(key)
            return doomed

    def _expires(self, key: str) -> float | None:
        record = self._records.get(key)
        return None if record is None else record.expires_at

    def delete(self, keys: Sequence[str]) -> int:
        """Delete records and their tag-index rows; return how many records existed."""
        with self._lock:
            return sum(self._remove_locked(key) for key in dict.fromkeys(keys))

    def keys_for_tag(self, tag: str, limit: int, *, namespace: str | None = None) -> list[str]:
        """Up to ``limit`` keys carrying ``tag`` (in ``namespace``, or in any namespace)."""
        if limit <= 0:
            return []
        with self._lock:
            if namespace is not None:
                indexes = [self._tags.get((namespace, tag), {})]
            else:
                indexes = [keys for (_, t), keys in self._tags.items() if t == tag]
            out: list[str] = []
            for keys in indexes:
                for key in keys:
                    if len(out) >= limit:
                        return out
                    out.append(key)
            return out

    def clear(self, namespace: str | None = None) -> int:
        """Delete every record (of ``namespace`` if given); return how many were deleted.

        Counters are kept.
        """
        with self._lock:
            if namespace is None:
                removed = len(self._records)
                self._records.clear()
                self._tags.clear()
                self._expiry.clear()
                return removed
            doomed = [k for k, r in self._records.items() if r.namespace == namespace]
            for key in doomed:
                self._remove_locked(key)
            return len(doomed)

    def count(self, namespace: str | None = None) -> int:
        """How many records are held (of ``namespace`` if given).

        Expired records not yet read or evicted are included.
        """
        with self._lock:
            if namespace is None:
                return len(self._records)
            return sum(1 for r in self._records.values() if r.namespace == namespace)

    def namespace_counts(self) -> dict[str, int]:
        """Records held per namespace (expired ones not yet removed included)."""
        with self._lock:
            out: dict[str, int] = {}
            for record in self._records.values():
                out[record.namespace] = out.get(record.namespace, 0) + 1
            return out

    def entries(
        self, now: float, namespace: str | None = None, *, batch: int = 500
    ) -> Iterator[StoredEntry]:
        """Every record live at ``now`` (of ``namespace`` if given), oldest use first.

        A snapshot taken in batches of ``batch`` under the lock: records written while the
        iteration runs may or may not appear; none appears twice. Reading does not count
        as a use for the LRU order.
        """
        with self._lock:
            keys = [
                k for k, r in self._records.items() if namespace is None or r.namespace == namespace
            ]
        for start in range(0, len(keys), max(1, batch)):
            with self._lock:
                found = [(k, self._records.get(k)) for k in keys[start : start + batch]]
            for key, record in found:
                if record is None or (record.expires_at is not None and record.expires_at <= now):
                    continue
                yield StoredEntry(
                    key,
                    record.namespace,
                    record.value,
                    record.expires_at,
                    tuple(sorted(record.tags)),
                )

    # -- counters ----------------------------------------------------------------------

    def incr(self, counter: str) -> int:
        """Add one to ``counter`` and return the new value."""
        with self._lock:
            value = self._counters.get(counter, 0) + 1
            self._counters[counter] = value
            return value

    def get_counter(self, counter: str) -> int:
        """The counter's value; 0 if it was never incremented."""
        with self._lock:
            return self._counters.get(counter, 0)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Nothing to release; the store stays usable."""

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore(max_entries={self._max_entries}, size={len(self._records)})"

    # -- internals (lock held) ---------------------------------------------------------

    def _get_locked(self, key: str, now: float) -> str | None:
        record = self._records.get(key)
        if record is None:
            return None
        if record.expires_at is not None and record.expires_at <= now:
            self._remove_locked(key)
            return None
        self._records.move_to_end(key)
        return record.value

    def _remove_locked(self, key: str) -> bool:
        record = self._records.pop(key, None)
        if record is None:
            return False
        for tag in record.tags:
            keys = self._tags.get((record.namespace, tag))
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._tags[(record.namespace, tag)]
        return True
