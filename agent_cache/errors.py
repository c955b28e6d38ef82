"""The one exception tree of agent-cache.

::

    AgentCacheError                 base of everything raised on purpose
    ├── ConfigurationError          bad argument or bad input (None prompt, 2 MB prompt, ...)
    ├── SerializationError          a value that is not JSON-serializable, or a corrupt record
    ├── BackendError                a store or model server failed (raised ``from`` the cause)
    └── MissingDependencyError      an optional dependency is absent; names the pip extra

Errors carry context (``layer``, ``key``, ``endpoint``) where it is known. A store
failure inside :meth:`LayeredCache.lookup` is logged and counted as a miss, never raised
into the caller's request.
"""

from __future__ import annotations

__all__ = [
    "AgentCacheError",
    "BackendError",
    "ConfigurationError",
    "MissingDependencyError",
    "SerializationError",
]


class AgentCacheError(Exception):
    """Base class; carries optional context about where the error happened."""

    def __init__(
        self,
        message: str,
        *,
        layer: str | None = None,
        key: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.layer = layer
        self.key = key
        self.endpoint = endpoint
        context = ", ".join(
            f"{name}={value}"
            for name, value in (("layer", layer), ("key", key), ("endpoint", endpoint))
            if value is not None
        )
        super().__init__(f"{message} ({context})" if context else message)


class ConfigurationError(AgentCacheError, ValueError):
    """A bad argument or bad input; nothing was changed."""


class SerializationError(AgentCacheError, TypeError):
    """A value could not be encoded as JSON, or a stored record could not be decoded."""


class BackendError(AgentCacheError):
    """A store (SQLite, Redis, Chroma) or a model server failed."""


class MissingDependencyError(AgentCacheError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, package: str, extra: str, *, feature: str | None = None) -> None:
        what = f" for {feature}" if feature else ""
        super().__init__(f"{package} is required{what}: pip install 'agent-cache[{extra}]'")
        self.package = package
        self.extra = extra
