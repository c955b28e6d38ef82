"""The backend factory: the exact (KV) and vector stores, the embedder and the reranker.

:class:`Backends` builds each of them on first use (no I/O in the cache's constructor)
from a :class:`BackendConfig`: what :class:`~agent_cache.LayeredCache` was given, ``path``
(one SQLite database holding entries and vectors), ``redis_url``, ``chroma_url``,
``vector_backend``, or ready-made stores (never closed here). Shared servers get a
circuit breaker each.
:func:`report_failure` is the rule every path follows when a store fails: a logged
miss, never an exception in the user's request (bad input and corrupt files excepted).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from agent_cache import _fork
from agent_cache._breaker import CircuitBreaker
from agent_cache.errors import ConfigurationError
from agent_cache.protocols import Embedder, KVStore, Reranker, VectorStore
from agent_cache.stats import StatsRecorder

__all__ = ["BackendConfig", "Backends", "VectorBackend", "failure_cause", "report_failure"]

log = logging.getLogger("agent_cache")

VectorBackend = Literal["sqlite", "memory", "chroma"]
_VECTOR_BACKENDS = ("sqlite", "memory", "chroma")
_PREFIX = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{1,198}[a-zA-Z0-9]")
T = TypeVar("T")


#: Seconds the first vector add to a Chroma server waits for others to share its
#: ``upsert`` (:class:`~agent_cache.vectors._write_batch.WriteBatcher`).
CHROMA_WRITE_LINGER = 0.01

#: At most one "served as a miss" warning per cause in this many seconds (per cache).
WARN_EVERY_S = 60.0
#: Distinct causes tracked per cache; any further one is counted as ``other``.
_MAX_CAUSES = 32
_monotonic = time.monotonic  # replaced by tests
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\d+")
_CONTEXT = re.compile(r"\s\((?:layer|key|endpoint)=.*\)\Z", re.DOTALL)


def failure_cause(exc: BaseException) -> str:
    """What a failure is, for rate limiting and counting: the layer (backend), the error
    classes and the underlying message with paths, keys and numbers blanked out, so that
    every read and write failing for one reason (a full disk, a read-only file, a server
    down) is one cause.

    Example:
        >>> from agent_cache.errors import BackendError
        >>> failure_cause(BackendError("SQLite get failed on '/a/b': disk full", layer="exact"))
        'exact BackendError: SQLite get failed on _: disk full'
    """
    root = exc.__cause__ if exc.__cause__ is not None else exc
    layer = getattr(exc, "layer", None) or "cache"
    endpoint = getattr(exc, "endpoint", None)
    if endpoint:
        layer = f"{layer} {endpoint}"
    kind = type(exc).__name__
    if root is not exc:
        kind = f"{kind}/{type(root).__name__}"
    text = _NUMBER.sub("N", _QUOTED.sub("_", _CONTEXT.sub("", str(root))))
    return f"{layer} {kind}: {text}"[:160]


class _FailureLog:
    """When each cause last warned, and how many of its failures were not logged since."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: dict[str, float] = {}
        self.suppressed: dict[str, int] = {}


_logs: weakref.WeakKeyDictionary[StatsRecorder, _FailureLog] = weakref.WeakKeyDictionary()
_logs_guard = threading.Lock()


def _failure_log(stats: StatsRecorder) -> _FailureLog:
    with _logs_guard:
        found = _logs.get(stats)
        if found is None:
            found = _logs[stats] = _FailureLog()
        return found


def report_failure(stats: StatsRecorder, exc: Exception, what: str) -> None:
    """A failing store is a counted, logged miss; bad input or a corrupt file is raised.

    Counted in ``errors`` and per cause in ``errors:<cause>`` (:func:`failure_cause`).
    Logged as a warning with its traceback at most once per :data:`WARN_EVERY_S` per
    cause (a full disk or read-only file fails every call); the others are counted in
    ``warnings_suppressed`` and the next warning of that cause says how many there were.
    """
    if isinstance(exc, ConfigurationError) or getattr(exc, "fatal", False):
        raise exc  # bad input, or a corrupt file: loud, never a silent miss
    stats.incr("errors")
    if getattr(exc, "circuit_open", False):  # already logged once, when it opened
        stats.incr("circuit_open")
        log.debug("agent-cache %s skipped, serving as a miss: %s", what, exc)
        return
    flog = _failure_log(stats)
    cause = failure_cause(exc)
    now = _monotonic()
    with flog.lock:
        if cause not in flog.last and len(flog.last) >= _MAX_CAUSES:
            cause = "other"
        last = flog.last.get(cause)
        warn = last is None or now - last >= WARN_EVERY_S
        if warn:
            flog.last[cause] = now
            quiet = flog.suppressed.pop(cause, 0)
        else:
            flog.suppressed[cause] = flog.suppressed.get(cause, 0) + 1
    stats.incr(f"errors:{cause}")
    if not warn:
        stats.incr("warnings_suppressed")
        log.debug("agent-cache %s failed, serving as a miss: %s", what, exc)
        return
    extra = (
        f" ({quiet} more failures of this cause since the last warning, not logged)"
        if quiet
        else ""
    )
    log.warning(
        "agent-cache %s failed, serving as a miss: %s%s; at most one warning per %g s "
        "for this cause",
        what,
        exc,
        extra,
        WARN_EVERY_S,
        exc_info=exc,
    )


def _check_seconds(name: str, value: Any) -> float | None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
    ):
        raise ConfigurationError(f"{name} must be > 0 seconds or None, not {value!r}")
    return value


@dataclass(frozen=True)
class BackendConfig:
    """Where one cache keeps its entries and vectors, and which models it uses: the
    arguments of :class:`~agent_cache.LayeredCache` of the same names, checked when the
    config is made (a ``ConfigurationError`` naming the argument)."""

    path: str | os.PathLike[str] | None = None
    redis_url: str | None = None
    chroma_url: str | None = None
    vector_backend: VectorBackend | None = None
    prefix: str = "agent_cache"
    on_corrupt: Literal["raise", "rebuild"] = "raise"
    backend_timeout: float | None = 2.0
    circuit_reset: float | None = 5.0
    embedder: str | Embedder = ""
    reranker: str | Reranker | None = None
    kv_store: KVStore | None = None
    vector_store: VectorStore | None = None

    def __post_init__(self) -> None:
        if self.vector_backend is not None and self.vector_backend not in _VECTOR_BACKENDS:
            raise ConfigurationError(
                f"vector_backend must be one of {_VECTOR_BACKENDS}, not {self.vector_backend!r}"
            )
        if not isinstance(self.prefix, str) or not _PREFIX.fullmatch(self.prefix):
            raise ConfigurationError(
                f"prefix needs 3-200 characters from [a-zA-Z0-9._-], starting and ending "
                f"with a letter or digit; got {self.prefix!r}"
            )
        if self.on_corrupt not in ("raise", "rebuild"):
            raise ConfigurationError(
                f"on_corrupt must be 'raise' or 'rebuild', not {self.on_corrupt!r}"
            )
        _check_seconds("backend_timeout", self.backend_timeout)
        _check_seconds("circuit_reset", self.circuit_reset)


class Backends:
    """The stores and models one cache uses, each built lazily and at most once, from a
    :class:`BackendConfig`.

    Example:
        >>> b = Backends(BackendConfig(None))
        >>> type(b.kv).__name__, type(b.vectors).__name__
        ('MemoryStore', 'MemoryVectorStore')
    """

    def __init__(self, config: BackendConfig) -> None:
        self.config = c = config
        self.path = Path(c.path) if c.path is not None else None
        self.redis_url, self.chroma_url = c.redis_url, c.chroma_url
        self.vector_backend, self.prefix, self.on_corrupt = c.vector_backend, c.prefix, c.on_corrupt
        self.backend_timeout, self.circuit_reset = c.backend_timeout, c.circuit_reset
        self.breakers: dict[str, CircuitBreaker] = {}
        self._embedder_spec = c.embedder
        self._reranker_spec = c.reranker
        self._kv: KVStore | None = c.kv_store
        self._vectors: VectorStore | None = c.vector_store
        self._embedder: Embedder | None = None
        self._reranker: Reranker | None = None
        self._reranker_ready = c.reranker is None
        self._owned: list[Any] = []
        #: ``on_error(exc, what)``: told of failures off the caller's path (a batch of
        #: vector writes that failed for good); the cache counts and logs them.
        self.on_error: Callable[[Exception, str], None] | None = None
        self._lock = threading.RLock()  # the vector store may build the KV store
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))

    @property
    def kv(self) -> KVStore:
        if self._kv is None:
            with self._lock:
                if self._kv is None:
                    self._kv = self._own(self._make_kv())
        return self._kv

    @property
    def vectors(self) -> VectorStore:
        if self._vectors is None:
            with self._lock:
                if self._vectors is None:
                    self._vectors = self._own(self._make_vectors())
        return self._vectors

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from agent_cache.embedders import shared_embedder

            with self._lock:
                if self._embedder is None:
                    # one model per process for a model name, released by close()
                    self._embedder = shared_embedder(self._embedder_spec)
        return self._embedder

    @property
    def reranker(self) -> Reranker | None:
        if not self._reranker_ready:
            from agent_cache.rerankers import reranker_from

            with self._lock:
                if not self._reranker_ready:
                    self._reranker = reranker_from(self._reranker_spec)
                    self._reranker_ready = True
        return self._reranker

    @property
    def joint(self) -> bool:
        """True when the vectors live in the KV store's database (one transaction)."""
        from agent_cache.vectors.sqlite import SQLiteVectorStore

        vs = self.vectors
        return isinstance(vs, SQLiteVectorStore) and vs.store is self.kv

    def health(self) -> dict[str, str]:
        return {layer: b.state for layer, b in self.breakers.items()}

    def close(self) -> None:
        """Close what was built here (never a store passed in) and give back this cache's
        share of the embedder (the last cache using a model frees it)."""
        for backend in self._owned:
            backend.close()
        self._owned.clear()
        with self._lock:
            embedder, self._embedder = self._embedder, None
        if embedder is not None:
            from agent_cache.embedders import release_embedder

            release_embedder(embedder)

    def _write_failed(self, exc: Exception) -> None:
        if self.on_error is not None:
            self.on_error(exc, "vector write (a background batch)")

    def _own(self, backend: T) -> T:
        self._owned.append(backend)
        return backend

    def _breaker(self, layer: str, url: str | None) -> CircuitBreaker | None:
        if self.circuit_reset is None or not url:
            return None
        kind = "Redis" if layer == "exact" else "Chroma server"
        breaker = CircuitBreaker(
            f"{kind} {url}", reset_after=self.circuit_reset, layer=layer, endpoint=url
        )
        self.breakers[layer] = breaker
        return breaker

    def _make_kv(self) -> KVStore:
        if self.redis_url:
            from agent_cache.stores import RedisStore

            return RedisStore(
                self.redis_url,
                prefix=f"{self.prefix}:",
                timeout=self.backend_timeout,
                breaker=self._breaker("exact", self.redis_url),
            )
        if self.path is not None:
            from agent_cache.stores import SQLiteStore

            return SQLiteStore(self.path / "exact.sqlite3", on_corrupt=self.on_corrupt)
        from agent_cache.stores import MemoryStore

        return MemoryStore()

    def _make_vectors(self) -> VectorStore:
        kind = self.vector_backend or ("sqlite" if self.path is not None else "memory")
        if self.chroma_url:
            from agent_cache.vectors import ChromaVectorStore

            return ChromaVectorStore(
                url=self.chroma_url,
                collection=self.prefix,
                timeout=self.backend_timeout,
                breaker=self._breaker("semantic", self.chroma_url),
                write_linger=CHROMA_WRITE_LINGER,  # adds batched in the background
                on_write_error=self._write_failed,
            )
        if kind == "memory" or self.path is None:
            from agent_cache.vectors import MemoryVectorStore

            return MemoryVectorStore()
        if kind == "chroma":
            from agent_cache.vectors import ChromaVectorStore

            return ChromaVectorStore(path=str(self.path / "vectors"), collection=self.prefix)
        from agent_cache.stores import SQLiteStore
        from agent_cache.vectors import SQLiteVectorStore

        kv = self.kv
        if isinstance(kv, SQLiteStore):  # entries and vectors commit together
            return SQLiteVectorStore(kv)
        return SQLiteVectorStore(self.path / "vectors.sqlite3")
