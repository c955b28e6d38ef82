"""Resolve a ``cache=`` argument (an ``AgentCache``, a ``LayeredCache`` or nothing)."""

from __future__ import annotations

import threading
from typing import Any

from agent_cache import ConfigurationError, LayeredCache

__all__ = ["default_cache", "layered_from"]

_lock = threading.Lock()
_default: LayeredCache | None = None


def default_cache() -> LayeredCache:
    """The process-wide embedded default (``LayeredCache()``: ``.agent_cache`` on disk).

    Created on first use and shared by every adapter that was given no ``cache=``, so
    that one SQLite file and one vector collection serve them all.
    """
    global _default
    with _lock:
        if _default is None:
            _default = LayeredCache()
        return _default


def layered_from(cache: Any) -> LayeredCache:
    """The core cache behind ``cache``: an ``AgentCache``, a ``LayeredCache`` or ``None``.

    Raises:
        ConfigurationError: ``cache`` is something else.
    """
    if cache is None:
        return default_cache()
    if isinstance(cache, LayeredCache):
        return cache
    inner = getattr(cache, "layered", None)
    if isinstance(inner, LayeredCache):
        return inner
    raise ConfigurationError(
        f"cache must be an AgentCache or a LayeredCache, not {type(cache).__name__}"
    )
