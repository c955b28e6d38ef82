"""The small protocols behind which every backend sits.

Adapters need no subclassing: anything with these methods works. Fakes for unit tests
live in :mod:`agent_cache.testing`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = [
    "Embedder",
    "KVStore",
    "Reranker",
    "VectorMatch",
    "VectorStore",
]

Vector = npt.NDArray[np.float32]
MetaValue = str | int | float | bool


@runtime_checkable
class KVStore(Protocol):
    """The exact layer's store: JSON text values, absolute expiry, tags, counters.

    ``now`` is the cache's clock reading (seconds); stores compare ``expires_at`` with it
    so that tests can run on a fake clock. A store that has native TTLs (Redis) may use
    them instead. Values are JSON text: a store never pickles.
    """

    def get(self, key: str, now: float) -> str | None: ...

    def get_many(self, keys: Sequence[str], now: float) -> dict[str, str]: ...

    def set(
        self,
        key: str,
        value: str,
        *,
        namespace: str,
        expires_at: float | None,
        tags: Sequence[str] = (),
        now: float,
    ) -> None: ...

    def delete(self, keys: Sequence[str]) -> int:
        """Delete records and their tag-index rows; return how many records existed."""
        ...

    def keys_for_tag(self, tag: str, limit: int, *, namespace: str | None = None) -> list[str]:
        """Up to ``limit`` keys carrying ``tag`` (the reverse index).

        With ``namespace``, only keys of that namespace: a namespace is a wall, and
        :meth:`LayeredCache.invalidate` never reaches across it.
        """
        ...

    def clear(self, namespace: str | None = None) -> int: ...

    def incr(self, counter: str) -> int:
        """Atomically add one to a named counter and return the new value."""
        ...

    def get_counter(self, counter: str) -> int: ...

    def count(self, namespace: str | None = None) -> int: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class VectorMatch:
    """A k-NN result: ``score`` is cosine similarity clamped to [0, 1]."""

    id: str
    score: float
    metadata: Mapping[str, MetaValue] = field(default_factory=dict)


@runtime_checkable
class VectorStore(Protocol):
    """The semantic layer's store.

    Every vector carries metadata with at least ``scope`` (namespace, version, model
    identity and conversation context, hashed), ``namespace`` and ``expires_at``
    (a float; ``inf`` is stored as a large number). ``query`` filters by scope and expiry
    **inside** the k-NN search, never afterwards.
    """

    def add(
        self,
        ids: Sequence[str],
        vectors: Sequence[Vector] | Vector,
        metadatas: Sequence[Mapping[str, MetaValue]],
    ) -> None: ...

    def query(self, vector: Vector, *, k: int, scope: str, now: float) -> list[VectorMatch]: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def clear(self, namespace: str | None = None) -> None: ...

    def count(self) -> int: ...

    def close(self) -> None: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors, shape ``(len(texts), dim)``."""

    name: str

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, candidate) pairs; higher means "same question"; each score in [0, 1]."""

    def score(self, query: str, candidates: Sequence[str]) -> list[float]: ...
