"""Deterministic fakes for tests: an embedder, a reranker and a clock.

They satisfy the protocols in :mod:`agent_cache.protocols`, need no model, no network
and no randomness, so unit tests are fast and repeatable.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from agent_cache import _fork
from agent_cache.errors import ConfigurationError

__all__ = ["FakeClock", "FakeReranker", "HashEmbedder"]

_TOKEN = re.compile(r"\w+", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class HashEmbedder:
    """A bag-of-words hashing embedder (the "hashing trick"), for tests.

    Each lowercased word token is hashed with BLAKE2b into one dimension with a sign of
    +1 or -1; the counts are summed and the vector L2-normalized. Texts sharing most of
    their words are therefore close, texts sharing none are near orthogonal. A text with
    no word tokens embeds to a fixed unit vector.

    Args:
        dim: Vector dimension (at least 2).

    Example:
        >>> e = HashEmbedder(dim=64)
        >>> v = e.embed(["how do I reset my password", "how can I reset my password"])
        >>> bool(v[0] @ v[1] > 0.5)
        True
    """

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise ConfigurationError(f"HashEmbedder needs dim >= 2, got {dim}")
        self.dim = dim
        self.name = f"hash-embedder-{dim}"
        self.calls = 0

    @property
    def dimension(self) -> int:
        """The vector dimension."""
        return self.dim

    def _slot(self, token: str) -> tuple[int, float]:
        h = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(h, "big")
        return value % self.dim, (1.0 if (value >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` into an ``(n, dim)`` float32 array of unit rows."""
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = _tokens(text) or ["\x00empty"]
            for token in tokens:
                index, sign = self._slot(token)
                out[row, index] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm > 0.0:
                out[row] /= norm
            else:  # tokens cancelled out exactly: fall back to a fixed unit vector
                out[row, 0] = 1.0
        return out


ScoreTable = Mapping[tuple[str, str] | str, float]
ScoreFunction = Callable[[str, str], float]


def _overlap(query: str, candidate: str) -> float:
    a, b = set(_tokens(query)), set(_tokens(candidate))
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


class FakeReranker:
    """A reranker whose scores come from a table, a function, or word overlap.

    Args:
        scores: ``None`` scores a pair by the Jaccard overlap of its word sets; a mapping
            looks up ``(query, candidate)`` first, then ``candidate`` alone, and scores
            anything absent as ``default``; a callable is called as ``fn(query,
            candidate)``. Every score is clamped to [0, 1].
        default: The score of a pair missing from a mapping.

    Attributes:
        calls: Every ``(query, candidates)`` scored, in order.

    Example:
        >>> r = FakeReranker({("cancel order", "cancel my order"): 0.9})
        >>> r.score("cancel order", ["cancel my order", "create an order"])
        [0.9, 0.0]
    """

    def __init__(
        self,
        scores: ScoreTable | ScoreFunction | None = None,
        *,
        default: float = 0.0,
    ) -> None:
        self._scores = scores
        self.default = default
        self.name = "fake-reranker"
        self.calls: list[tuple[str, list[str]]] = []

    def _one(self, query: str, candidate: str) -> float:
        table = self._scores
        if table is None:
            value = _overlap(query, candidate)
        elif callable(table):
            value = float(table(query, candidate))
        elif (query, candidate) in table:
            value = float(table[(query, candidate)])
        elif candidate in table:
            value = float(table[candidate])
        else:
            value = self.default
        return min(1.0, max(0.0, value))

    def score(self, query: str, candidates: Sequence[str]) -> list[float]:
        """Score each candidate against ``query``; each score in [0, 1]."""
        self.calls.append((query, list(candidates)))
        return [self._one(query, c) for c in candidates]


class FakeClock:
    """A clock for TTL tests: call it for "now", :meth:`advance` it instead of sleeping.

    Example:
        >>> clock = FakeClock()
        >>> clock.advance(60)
        >>> clock()
        1000060.0
    """

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (must not be negative)."""
        if seconds < 0:
            raise ConfigurationError("a FakeClock only moves forward")
        with self._lock:
            self._now += float(seconds)
