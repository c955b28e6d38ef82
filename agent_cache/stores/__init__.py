"""Key-value stores for the exact layer: in memory, SQLite (embedded default), Redis.

Each one satisfies :class:`agent_cache.protocols.KVStore`, lists its live records
(``entries()``, as :class:`StoredEntry`) and counts them per namespace
(``namespace_counts()``). ``RedisStore`` is imported on first access, so that the
``redis`` package stays optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_cache.stores._entry import StoredEntry
from agent_cache.stores.memory import MemoryStore
from agent_cache.stores.sqlite import SQLiteStore

if TYPE_CHECKING:
    from agent_cache.stores.redis import RedisStore

__all__ = ["MemoryStore", "RedisStore", "SQLiteStore", "StoredEntry"]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from agent_cache.stores.redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
