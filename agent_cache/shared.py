"""One shared ``LayeredCache`` per directory, for every adapter of the process.

The LangChain and LlamaIndex adapters, given no ``cache=`` (or a path), both open the
cache here: wrapping ten tools, a chat model and a ``Settings.llm`` over one folder opens
one SQLite database and loads one embedding model, not twelve.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from agent_cache.cache import LayeredCache
from agent_cache.errors import ConfigurationError

__all__ = ["DEFAULT_PATH", "default_cache"]

#: Where the embedded default cache lives (relative to the working directory).
DEFAULT_PATH = ".agent_cache"

_shared: dict[str, LayeredCache] = {}
_lock = threading.Lock()


def _renew_lock() -> None:  # a forked child: a free lock
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_lock)


def default_cache(path: str | os.PathLike[str] | None = None) -> LayeredCache:
    """The process-wide ``LayeredCache(path=...)`` for ``path`` (default ``.agent_cache``).

    Created on first use (no I/O: backends open lazily) and returned again for the same
    directory however it is spelled (relative, ``~``, a trailing slash).

    Raises:
        ConfigurationError: ``path`` is not a path.

    Example:
        >>> default_cache() is default_cache("./.agent_cache")
        True
    """
    if path is None:
        path = DEFAULT_PATH
    if not isinstance(path, str | os.PathLike):
        raise ConfigurationError(f"path must be a directory path, not {type(path).__name__}")
    where = str(Path(path).expanduser().resolve())
    with _lock:
        found = _shared.get(where)
        if found is None:
            found = _shared[where] = LayeredCache(path=where)
        return found
