"""Choosing a replica from what it holds and how busy it is (no I/O, no lock).

:class:`PrefixChooser` scores every available replica by the prefill a request would
cost there plus the queue it would join:

``cost = uncached prompt tokens + load_weight * load * mean prompt tokens``

* *uncached prompt tokens*: the request's tokens beyond the longest prefix the
  :class:`~agent_cache.vllm.prefix_tree.PrefixTree` says the replica holds (what was
  sent there, expiring with its capacity) or, with KV events, what it announced it
  holds;
* *load*: requests in flight from this router, or the server's own
  ``vllm:num_requests_running + vllm:num_requests_waiting`` when that is larger (other
  routers share it), with waiting requests counted twice (they have not started);
  scraped from ``/metrics`` and trusted for ``metrics_ttl`` seconds.

Before scoring, a bounded-load guard (after consistent hashing with bounded loads,
Mirrokni et al. 2018) sets aside replicas whose load would pass ``load_factor`` times the
fair share plus ``load_slack`` requests: a hot prefix spills to its next-cheapest
replica, and because the spilled requests are recorded in the tree there too, the spill
is remembered (both replicas then hold the prefix, and cost splits the traffic).

A request whose longest cached prefix anywhere covers less than ``match_threshold`` of
it is *new* (a new conversation, new documents): it goes to the least loaded replica,
ties to the one holding the fewest blocks (as SGLang's cache-aware router does), so new
work spreads over the replicas' caches instead of piling onto whichever holds the shared
system prompt.

A session (a conversation, an agent run) keeps the replica it was last sent to while
that replica passes the guard, so each turn finds the previous turn's blocks even
before the tree has seen them (a first turn, a tree that expired them).

Example:
    >>> chooser = PrefixChooser(2, capacity_blocks=1000)
    >>> blocks = list(range(40))
    >>> chooser.assign(1, blocks, session=None)
    >>> chooser.rank([0, 1], blocks, block_tokens=16.0, prompt_tokens=700, session=None)[0]
    1
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_cache.errors import ConfigurationError
from agent_cache.vllm.metrics import LoadMetrics
from agent_cache.vllm.prefix_tree import PrefixTree

__all__ = ["PrefixChooser", "ReplicaLoad"]


@dataclass
class ReplicaLoad:
    """What the router knows of one replica's load."""

    in_flight: int = 0
    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0
    seen_at: float | None = None  # when /metrics was last read


class PrefixChooser:
    """Prefix tree + live load + sessions + bounded load (the ``"prefix"`` policy).

    Not locked: the router calls it under its own lock.

    Args:
        n: Number of replicas.
        capacity_blocks: Router-side blocks each replica holds (None: unbounded until
            ``/metrics`` tells); see :class:`~agent_cache.vllm.prefix_tree.PrefixTree`.
        load_weight: How many mean prompts of prefill one request of load is worth;
            0 scores by the cached prefix alone (ties: least loaded).
        load_factor: The bounded-load guard (>= 1; ``inf`` turns it off).
        load_slack: Requests a replica may carry above ``load_factor`` x the fair share
            (light load needs no balancing).
        match_threshold: Below this cached share a request is new (see above).
        max_sessions: Sessions remembered (least recently used forgotten first).
        metrics_ttl: Seconds a ``/metrics`` reading counts.
        clock: Monotonic clock.
    """

    def __init__(
        self,
        n: int,
        *,
        capacity_blocks: int | Sequence[int | None] | None = None,
        load_weight: float = 0.5,
        load_factor: float = 1.25,
        load_slack: float = 2.0,
        match_threshold: float = 0.5,
        max_sessions: int = 100_000,
        metrics_ttl: float = 30.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if load_weight < 0:
            raise ConfigurationError("load_weight must be >= 0")
        if load_factor < 1.0:
            raise ConfigurationError("load_factor must be >= 1.0")
        if load_slack < 0 or max_sessions < 0 or not 0.0 <= match_threshold <= 1.0:
            raise ConfigurationError(
                "load_slack and max_sessions must be >= 0, match_threshold in [0, 1]"
            )
        self.n = n
        self.tree = PrefixTree(n, capacity_blocks=capacity_blocks)
        self.load_weight = load_weight
        self.load_factor = load_factor
        self.load_slack = load_slack
        self.match_threshold = match_threshold
        self.loads = [ReplicaLoad() for _ in range(n)]
        self.metrics_ttl = metrics_ttl
        self._clock = clock
        self._sessions: OrderedDict[str, int] = OrderedDict()
        self._max_sessions = max_sessions
        self._mean_tokens = 0.0
        self._requests = 0

    # ------------------------------------------------------------------ load
    def observe(self, i: int, metrics: LoadMetrics, now: float) -> None:
        """Take one ``/metrics`` reading of replica ``i``."""
        load = self.loads[i]
        load.running, load.waiting, load.kv_usage = (
            metrics.running,
            metrics.waiting,
            metrics.kv_usage,
        )
        load.seen_at = now

    def started(self, i: int) -> None:
        self.loads[i].in_flight += 1

    def finished(self, i: int) -> None:
        self.loads[i].in_flight = max(0, self.loads[i].in_flight - 1)

    def load(self, i: int, now: float | None = None) -> float:
        """Replica ``i``'s load in requests (see the module docstring)."""
        r = self.loads[i]
        fresh = r.seen_at is not None and now is not None and now - r.seen_at <= self.metrics_ttl
        if not fresh:
            return float(r.in_flight)
        return max(float(r.in_flight), r.running + r.waiting) + r.waiting

    def _guarded(self, up: Sequence[int], loads: dict[int, float]) -> list[int]:
        """``up`` without the replicas over the bounded-load share (all if none pass)."""
        if math.isinf(self.load_factor):
            return list(up)
        total = sum(loads[i] for i in up)
        bound = math.ceil(self.load_factor * (total + 1) / len(up)) + self.load_slack
        ok = [i for i in up if loads[i] + 1 <= bound]
        return ok or list(up)

    # ------------------------------------------------------------------ choice
    def rank(
        self,
        up: Sequence[int],
        blocks: Sequence[int],
        *,
        block_tokens: float,
        prompt_tokens: float,
        session: str | None,
        cached_tokens: Sequence[float] | None = None,
    ) -> list[int]:
        """Replicas of ``up``, best first (the first is where the request goes).

        Args:
            up: Available replicas (breakers closed).
            blocks: The request's chained block hashes.
            block_tokens: Tokens one block stands for.
            prompt_tokens: The request's estimated prompt tokens.
            session: Session id, if any.
            cached_tokens: Per replica, the request's tokens it is known to hold (from
                KV events); None: estimate them from the prefix tree.
        """
        if not up:
            raise ConfigurationError("no replica to rank")
        now = self._clock() if self._clock is not None else None
        cached = (
            list(cached_tokens)
            if cached_tokens is not None
            else [m * block_tokens for m in self.tree.match(blocks)]
        )
        mean = self._mean_tokens or prompt_tokens
        loads = {i: self.load(i, now) for i in up}
        allowed = set(self._guarded(up, loads))
        tiebreak = _spread(blocks, self.n)
        new = max(cached[i] for i in allowed) < self.match_threshold * prompt_tokens

        def cost(i: int) -> float:
            if new:  # nothing worth keeping: balance load, then cache pressure
                return loads[i]
            uncached = max(0.0, prompt_tokens - cached[i])
            return uncached + self.load_weight * loads[i] * mean

        ranked = sorted(
            up,
            key=lambda i: (i not in allowed, cost(i), loads[i], self.tree.size(i), tiebreak[i]),
        )
        if session is not None:
            home = self._sessions.get(session)
            if home is not None and home in allowed:
                ranked = [home] + [i for i in ranked if i != home]
        return ranked

    def assign(
        self, i: int, blocks: Sequence[int], *, session: str | None, prompt_tokens: float = 0.0
    ) -> None:
        """Replica ``i`` was sent the request: record its blocks, session, and share."""
        self.tree.insert(i, blocks)
        if session is not None and self._max_sessions:
            self._sessions[session] = i
            self._sessions.move_to_end(session)
            while len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
        if prompt_tokens > 0:
            self._requests += 1
            self._mean_tokens += (prompt_tokens - self._mean_tokens) / min(self._requests, 256)

    def session_replica(self, session: str) -> int | None:
        """The replica a session was last sent to, if remembered."""
        return self._sessions.get(session)


def _spread(blocks: Sequence[int], n: int) -> list[bytes]:
    """Per replica, a rendezvous weight of the request's last block (which names the
    whole prompt), so that ties (a prefix nobody holds, equal loads) spread requests."""
    seed = str(blocks[-1] if blocks else 0).encode()
    return [hashlib.blake2b(seed + bytes([i % 256]), digest_size=8).digest() for i in range(n)]
