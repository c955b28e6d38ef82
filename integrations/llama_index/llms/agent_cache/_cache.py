"""The ``cache=`` argument of the LlamaIndex adapters (a ``LayeredCache``, a path, or None),
and the wrapped LLM rebuilt from its ``to_dict()``.

A path (and ``None``, meaning the embedded default ``.agent_cache``) maps to the core's
:func:`agent_cache.default_cache`: one shared ``LayeredCache`` per directory for the whole
process, the same one the LangChain adapter uses.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

from llama_index.core.llms.llm import LLM

from agent_cache import ConfigurationError, LayeredCache, default_cache
from agent_cache.shared import DEFAULT_PATH

__all__ = ["DEFAULT_PATH", "CacheArg", "cache_dir", "load_llm", "resolve_cache"]

CacheArg: TypeAlias = LayeredCache | str | os.PathLike[str] | None


def resolve_cache(cache: CacheArg, embedder: Any = None) -> LayeredCache:
    """The ``LayeredCache`` for a ``cache=`` argument (no I/O: backends open lazily); with
    an ``embedder``, a cache of its own over that directory (not the shared default).

    Raises:
        ConfigurationError: an ``embedder`` with a ``LayeredCache`` (give it to that cache).

    Example::

        resolve_cache(None) is resolve_cache(".agent_cache")  # -> True
    """
    if embedder is None:
        return cache if isinstance(cache, LayeredCache) else default_cache(cache_dir(cache))
    if isinstance(cache, LayeredCache):
        raise ConfigurationError(
            "CachedLLM(embedder=...) builds its own cache: pass the embedder to the "
            "LayeredCache given as cache= instead"
        )
    return LayeredCache(path=cache_dir(cache), embedder=embedder)


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


def load_llm(data: Mapping[str, Any]) -> LLM:
    """An LLM from its ``to_dict()`` (found by ``class_name`` among the loaded LLM classes)."""
    name = data.get("class_name")
    stack: list[type[Any]] = [LLM]
    while stack:
        kind = stack.pop()
        stack.extend(kind.__subclasses__())
        try:
            found = kind.class_name() == name and not getattr(kind, "__abstractmethods__", None)
        except Exception:  # a subclass whose class_name needs an instance
            found = False
        if found:
            return kind.from_dict(dict(data))  # type: ignore[no-any-return]
    raise ConfigurationError(f"cannot rebuild the wrapped LLM: no loaded class named {name!r}")
