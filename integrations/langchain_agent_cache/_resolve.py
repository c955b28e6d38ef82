"""Resolve a ``cache=`` argument (an ``AgentCache``, a ``LayeredCache`` or nothing)."""

from __future__ import annotations

from typing import Any

from agent_cache import ConfigurationError, LayeredCache, default_cache

__all__ = ["layered_from"]


def layered_from(cache: Any) -> LayeredCache:
    """The core cache behind ``cache``: an ``AgentCache``, a ``LayeredCache`` or ``None``
    (the core's shared :func:`agent_cache.default_cache`, the same one LlamaIndex uses).

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
