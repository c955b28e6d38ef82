"""The ``cache=`` argument of the LlamaIndex adapters: a ``LayeredCache``, a path, or None.

A path (and ``None``, meaning the embedded default ``.agent_cache``) maps to the core's
:func:`agent_cache.default_cache`: one shared ``LayeredCache`` per directory for the whole
process, the same one the LangChain adapter uses.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeAlias

from agent_cache import ConfigurationError, LayeredCache, default_cache
from agent_cache.shared import DEFAULT_PATH

__all__ = ["DEFAULT_PATH", "CacheArg", "cache_dir", "resolve_cache"]

CacheArg: TypeAlias = LayeredCache | str | os.PathLike[str] | None


def resolve_cache(cache: CacheArg) -> LayeredCache:
    """The ``LayeredCache`` for a ``cache=`` argument (no I/O: backends open lazily).

    Example:
        >>> resolve_cache(None) is resolve_cache(".agent_cache")  # doctest: +SKIP
        True
    """
    if isinstance(cache, LayeredCache):
        return cache
    return default_cache(cache_dir(cache))


def cache_dir(cache: object) -> str:
    """The absolute directory a ``cache=`` path argument names (``None``: ``.agent_cache``).

    Raises:
        ConfigurationError: ``cache`` is neither a path nor ``None``.
    """
    if cache is None:
        cache = DEFAULT_PATH
    if not isinstance(cache, str | os.PathLike):
        raise ConfigurationError(
            f"cache must be a LayeredCache, a directory path or None, not {type(cache).__name__}"
        )
    return str(Path(cache).expanduser().resolve())
