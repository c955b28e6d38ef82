"""The ``cache=`` argument of the LlamaIndex adapters: a ``LayeredCache``, a path, or None.

A path (and ``None``, meaning the embedded default ``.agent_cache``) maps to one shared
``LayeredCache`` per directory for the whole process, so wrapping ten tools and an LLM
opens one SQLite file and loads one embedding model, not eleven.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TypeAlias

from agent_cache import ConfigurationError, LayeredCache

__all__ = ["DEFAULT_PATH", "CacheArg", "resolve_cache"]

#: Where the default embedded cache lives (relative to the working directory).
DEFAULT_PATH = ".agent_cache"

CacheArg: TypeAlias = LayeredCache | str | os.PathLike[str] | None

_shared: dict[str, LayeredCache] = {}
_lock = threading.Lock()


def resolve_cache(cache: CacheArg) -> LayeredCache:
    """The ``LayeredCache`` for a ``cache=`` argument (no I/O: backends open lazily).

    Example:
        >>> resolve_cache(None) is resolve_cache(".agent_cache")  # doctest: +SKIP
        True
    """
    if isinstance(cache, LayeredCache):
        return cache
    if cache is None:
        cache = DEFAULT_PATH
    if not isinstance(cache, str | os.PathLike):
        raise ConfigurationError(
            f"cache must be a LayeredCache, a directory path or None, not {type(cache).__name__}"
        )
    where = str(Path(cache).expanduser().resolve())
    with _lock:
        found = _shared.get(where)
        if found is None:
            found = _shared[where] = LayeredCache(path=where)
        return found
