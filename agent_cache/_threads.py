"""How many threads one pass (an embedding, a k-NN search) gets on this machine."""

from __future__ import annotations

import os

from agent_cache.errors import ConfigurationError

__all__ = ["pass_threads", "usable_cores"]


def pass_threads(env_var: str) -> int:
    """``env_var`` if set (an integer >= 1), else 1 on machines with <= 2 usable cores
    and half the cores (at most 4) on larger ones: on a small machine the second core is
    busy with the rest of the process and its neighbours (measurements: the callers'
    docstrings).

    Example:
        >>> pass_threads("AGENT_CACHE_NO_SUCH_VARIABLE") >= 1
        True
    """
    env = os.environ.get(env_var, "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ConfigurationError(f"{env_var} must be an integer, got {env!r}") from None
        if value < 1:
            raise ConfigurationError(f"{env_var} must be >= 1, got {value}")
        return value
    cores = usable_cores()
    return 1 if cores <= 2 else min(4, cores // 2)


def usable_cores() -> int:
    """The cores this process may run on (its affinity; the CPU count where unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
