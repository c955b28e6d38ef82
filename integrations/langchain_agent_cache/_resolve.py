"""Resolve a ``cache=`` argument (an ``AgentCache``, a ``LayeredCache``, a directory or
nothing)."""

from __future__ import annotations

import os
from typing import Any

from agent_cache import ConfigurationError, LayeredCache, default_cache

__all__ = ["layered_from"]


def layered_from(cache: Any) -> LayeredCache:
    """The core cache behind ``cache``: an ``AgentCache``, a ``LayeredCache``, a directory
    or ``None`` (the core's shared :func:`agent_cache.default_cache` for that directory,
    ``.agent_cache`` by default, the same one LlamaIndex uses).

    Raises:
        ConfigurationError: ``cache`` is something else.
    """
    if cache is None:
        return default_cache()
    if isinstance(cache, str | os.PathLike):  # cache_tool(search, cache=".agent_cache")
        return default_cache(cache)
    if isinstance(cache, LayeredCache):
        return cache
    inner = getattr(cache, "layered", None)
    if isinstance(inner, LayeredCache):
        return inner
    raise ConfigurationError(
        f"cache must be an AgentCache, a LayeredCache or a directory, not {type(cache).__name__}"
    )
