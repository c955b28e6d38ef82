"""What a store's :meth:`entries` iteration yields: one live record and its index rows."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StoredEntry"]


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One live record of an exact-layer store, as ``entries()`` yields it.

    ``value`` is the record's JSON text exactly as stored; ``expires_at`` is the absolute
    expiry (``None``: never); ``tags`` are the record's tags in a stable (sorted) order.
    """

    key: str
    namespace: str
    value: str
    expires_at: float | None
    tags: tuple[str, ...] = ()
