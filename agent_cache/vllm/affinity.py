"""Prefix affinity: send requests that share a prefix to the replica that holds its KV.

The endpoint is chosen by rendezvous (highest-random-weight) hashing of an *affinity key*
built from the prompt's leading part. The key skips the system messages (every request
shares them, so they say nothing about where a request belongs) and takes ``depth``
characters of what follows, which with a :class:`~agent_cache.prompt.StablePrompt` layout
reaches into the first documents. Requests that share those documents land together;
adding or removing a replica moves only the keys that ranked it first.

Bounded load (after consistent hashing with bounded loads, Mirrokni et al. 2018): a
replica's load is its requests in flight plus its assignments among the last ``window``;
it may take a request only while that load stays within
``ceil(load_factor * (window + in flight + 1) / n)``, so a hot prefix beyond its share of
the window spills to its next choice.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Any, cast

from agent_cache.errors import ConfigurationError
from agent_cache.keys import canonical_json

__all__ = ["BoundedLoad", "affinity_key", "rendezvous_order"]

#: Characters of the prompt after the system messages that form the key by default
#: (about 100-130 tokens: past a document's title into its body).
DEFAULT_DEPTH = 512


def _text(content: Any) -> str:
    return content if isinstance(content, str) else canonical_json(content)


def affinity_key(
    prompt: str | Sequence[Mapping[str, Any]] | Sequence[int],
    *,
    depth: int = DEFAULT_DEPTH,
    skip: int = 0,
    namespace: str | None = None,
) -> bytes:
    """The bytes that decide which replica a request goes to.

    Args:
        prompt: Chat messages, a completion prompt, or token ids.
        depth: How much of the prompt after the skipped part counts (characters, or
            tokens for token ids).
        skip: For a text or token prompt, leading characters (tokens) to take whole
            before ``depth`` starts, e.g. the length of a preamble every prompt shares.
            Chat messages skip their leading system messages on their own.
        namespace: Requests of different namespaces carry different ``cache_salt``s and
            share no blocks, so the namespace is part of the key.

    Returns:
        A 16-byte digest.

    Example:
        >>> a = [{"role": "system", "content": "S" * 5000}, {"role": "user", "content": "doc1 q1"}]
        >>> b = [{"role": "system", "content": "S" * 5000}, {"role": "user", "content": "doc1 q2"}]
        >>> affinity_key(a, depth=4) == affinity_key(b, depth=4)
        True
        >>> affinity_key(a) == affinity_key(b)
        False
    """
    if depth < 0 or skip < 0:
        raise ConfigurationError("depth and skip must be >= 0")
    h = hashlib.blake2b(digest_size=16)
    h.update((namespace or "").encode() + b"\x00")
    if isinstance(prompt, str):
        h.update(b"t" + prompt[: skip + depth].encode("utf-8", "surrogatepass"))
        return h.digest()
    items = list(prompt)
    if items and all(isinstance(x, int) for x in items):
        h.update(b"i" + ",".join(map(str, items[: skip + depth])).encode())
        return h.digest()
    system, rest = _split(cast(Sequence[Mapping[str, Any]], items))
    h.update(b"s" + system.encode("utf-8", "surrogatepass"))
    h.update(b"m" + rest[:depth].encode("utf-8", "surrogatepass"))
    return h.digest()


def _split(messages: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """(leading system messages, the rest), each rendered to text."""
    i = 0
    while i < len(messages) and messages[i].get("role") in ("system", "developer"):
        i += 1
    system = "".join(_text(m.get("content")) + "\x1e" for m in messages[:i])
    rest = "".join(f"{m.get('role', '')}\x1f{_text(m.get('content'))}\x1e" for m in messages[i:])
    return system, rest


def key_covers_depth(
    prompt: str | Sequence[Mapping[str, Any]], *, depth: int = DEFAULT_DEPTH, skip: int = 0
) -> bool:
    """Whether ``prompt`` is long enough to decide the affinity key on its own.

    A shorter prefix (e.g. only the system prompt) is shared by requests that go to every
    replica, so a warm-up should reach all of them.

    Example:
        >>> key_covers_depth([{"role": "system", "content": "long " * 999}], depth=10)
        False
    """
    if isinstance(prompt, str):
        return len(prompt) >= skip + depth
    return len(_split(list(prompt))[1]) >= depth


def rendezvous_order(key: bytes, names: Sequence[str]) -> list[int]:
    """Indices of ``names`` by descending rendezvous weight for ``key``.

    Example:
        >>> order = rendezvous_order(b"k", ["a", "b", "c"])
        >>> sorted(order)
        [0, 1, 2]
    """

    def weight(i: int) -> bytes:
        return hashlib.blake2b(key + names[i].encode(), digest_size=8).digest()

    return sorted(range(len(names)), key=weight, reverse=True)


class BoundedLoad:
    """Load accounting for bounded-load choice: in-flight counts plus a recent window.

    Not locked: the router calls it under its own lock.

    Args:
        n: Number of replicas.
        load_factor: How far above the mean share one replica may go (>= 1).
        window: How many recent assignments count as load.

    Example:
        >>> load = BoundedLoad(2, load_factor=1.0, window=4)  # at most 3 of the last 4
        >>> [load.pick([0, 1]) for _ in range(6)]
        [0, 0, 0, 1, 1, 0]
    """

    def __init__(self, n: int, *, load_factor: float = 1.25, window: int = 32) -> None:
        if load_factor < 1.0:
            raise ConfigurationError("load_factor must be >= 1.0")
        if window < 0:
            raise ConfigurationError("window must be >= 0")
        self.n = n
        self.load_factor = load_factor
        self.in_flight = [0] * n
        self._recent: deque[int] = deque(maxlen=window) if window else deque(maxlen=0)
        self._recent_count: Counter[int] = Counter()

    def load(self, i: int) -> int:
        """Replica ``i``'s requests in flight plus its assignments in the window."""
        return self.in_flight[i] + self._recent_count[i]

    def pick(self, ranked: Sequence[int]) -> int:
        """The first of ``ranked`` under the bound (recorded as assigned)."""
        if not ranked:
            raise ConfigurationError("no replica to pick from")
        # The window counts in full even before it has filled, so a quiet router keeps
        # its affinity: only a share above load_factor x fair of the window spills.
        total = sum(self.in_flight[i] for i in ranked) + (self._recent.maxlen or 0)
        bound = math.ceil(self.load_factor * (total + 1) / len(ranked))
        choice = next((i for i in ranked if self.load(i) + 1 <= bound), ranked[0])
        self.assign(choice)
        return choice

    def assign(self, i: int) -> None:
        """Count one assignment to ``i`` in the recent window."""
        if self._recent.maxlen:
            if len(self._recent) == self._recent.maxlen:
                self._recent_count[self._recent[0]] -= 1
            self._recent.append(i)
            self._recent_count[i] += 1
