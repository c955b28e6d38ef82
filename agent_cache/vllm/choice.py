"""Choosing a replica from what it holds and how busy it is (no I/O, no lock).

:class:`PrefixChooser` estimates, for every available replica, how many prompt tokens
stand between the request and its first token there:

``cost = uncached prompt tokens + load_weight * prefill tokens queued ahead``

* *uncached prompt tokens*: the request's tokens beyond the longest prefix the
  :class:`~agent_cache.vllm.prefix_tree.PrefixTree` says the replica holds (what was
  sent there, expiring with its capacity) or, with KV events, what it announced it
  holds;
* *prefill tokens queued ahead*: a leaky bucket per replica: every request sent there
  adds its expected uncached tokens, which drain at ``prefill_rate`` tokens a second (an
  8B model on an H200 prefills about 32,000 a second). It is live, so it cannot herd
  requests onto a replica that looked idle at the last scrape; ``/metrics`` only raises
  it (``vllm:num_requests_waiting`` x the mean uncached prompt: work other routers sent).
  A finished request takes its tokens out at once.

Before scoring, a bounded-load guard (after consistent hashing with bounded loads,
Mirrokni et al. 2018) sets aside replicas whose requests in flight (or, from
``/metrics``, running + waiting) would pass ``load_factor`` times the fair share plus
``load_slack``: a hot prefix spills to its next-cheapest replica, and because the
spilled requests are recorded in the tree there too, the spill is remembered (both
replicas then hold the prefix, and cost splits the traffic).

A request whose longest cached prefix anywhere covers less than ``match_threshold`` of
it, or the first request of a session, is *new*: it goes where the least prefill is
queued, ties to the replica holding the fewest blocks (as SGLang's cache-aware router
balances), so new work spreads over the replicas' caches.

Among the replicas allowed, those whose cost is within ``near_tie`` (5 %) of the best
are a tie: the request goes to the one holding most of its prompt. The wait is the
same either way, but staying computes fewer tokens (prefill others then do not queue
behind) and keeps one copy of the prefix instead of two; a burst of requests sharing a
new context otherwise splits on the last few tokens of each estimate.

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
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agent_cache.errors import ConfigurationError
from agent_cache.vllm.metrics import LoadMetrics
from agent_cache.vllm.prefix_tree import PrefixTree

__all__ = ["PrefixChooser", "ReplicaLoad"]


@dataclass
class ReplicaLoad:
    """What the router knows of one replica's load."""

    in_flight: int = 0
    external: float = 0.0  # running + waiting beyond our in-flight, at the last scrape
    waiting: float = 0.0
    kv_usage: float = 0.0
    seen_at: float | None = None  # when /metrics was last read
    pending: float = 0.0  # prefill tokens queued (leaky bucket)
    pending_at: float | None = None
    queued: deque[float] = field(default_factory=deque)  # per request in flight


class PrefixChooser:
    """Prefix tree + live load + sessions + bounded load (the ``"prefix"`` policy).

    Not locked: the router calls it under its own lock.

    Args:
        n: Number of replicas.
        capacity_blocks: Router-side blocks each replica holds (None: unbounded until
            ``/metrics`` tells); see :class:`~agent_cache.vllm.prefix_tree.PrefixTree`.
        load_weight: Weight of the prefill queued ahead against the request's own
            uncached tokens; 0 scores by the cached prefix alone (ties: least loaded).
        prefill_rate: Prompt tokens a replica prefills per second (drains the queue).
        load_factor: The bounded-load guard (>= 1; ``inf`` turns it off).
        load_slack: Requests a replica may carry above ``load_factor`` x the fair share
            (light load needs no balancing).
        match_threshold: Below this cached share a request is new (see above).
        near_tie: Costs within this fraction of the best are a tie, resolved towards
            the replica holding most of the prompt (0: the lowest cost always wins).
        max_sessions: Sessions remembered (least recently used forgotten first).
        metrics_ttl: Seconds a ``/metrics`` reading counts.
        clock: Monotonic clock.
    """

    def __init__(
        self,
        n: int,
        *,
        capacity_blocks: int | Sequence[int | None] | None = None,
        load_weight: float = 1.0,
        prefill_rate: float = 32_000.0,
        load_factor: float = 1.25,
        load_slack: float = 2.0,
        match_threshold: float = 0.2,
        near_tie: float = 0.05,
        max_sessions: int = 100_000,
        metrics_ttl: float = 30.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if load_weight < 0 or prefill_rate <= 0:
            raise ConfigurationError("load_weight must be >= 0 and prefill_rate > 0")
        if load_factor < 1.0:
            raise ConfigurationError("load_factor must be >= 1.0")
        if load_slack < 0 or max_sessions < 0 or not 0.0 <= match_threshold <= 1.0:
            raise ConfigurationError(
                "load_slack and max_sessions must be >= 0, match_threshold in [0, 1]"
            )
        if not 0.0 <= near_tie < 1.0:
            raise ConfigurationError(f"near_tie must be in [0, 1), got {near_tie!r}")
        self.n = n
        self.tree = PrefixTree(n, capacity_blocks=capacity_blocks)
        self.load_weight = load_weight
        self.prefill_rate = prefill_rate
        self.load_factor = load_factor
        self.load_slack = load_slack
        self.match_threshold = match_threshold
        self.near_tie = near_tie
        self.loads = [ReplicaLoad() for _ in range(n)]
        self.metrics_ttl = metrics_ttl
        self._clock = clock
        self._sessions: OrderedDict[str, int] = OrderedDict()
        self._max_sessions = max_sessions
        self._mean_tokens = 0.0
        self._mean_uncached = 0.0
        self._requests = 0

    # ------------------------------------------------------------------ load
    def observe(self, i: int, metrics: LoadMetrics, now: float) -> None:
        """Take one ``/metrics`` reading of replica ``i``."""
        r = self.loads[i]
        r.external = max(0.0, metrics.running + metrics.waiting - r.in_flight)
        r.waiting, r.kv_usage, r.seen_at = metrics.waiting, metrics.kv_usage, now
        floor = metrics.waiting * (self._mean_uncached or self._mean_tokens)
        if floor > self.pending(i, now):
            r.pending, r.pending_at = floor, now

    def started(self, i: int) -> None:
        self.loads[i].in_flight += 1

    def finished(self, i: int) -> None:
        """A request of replica ``i`` is over: its prefill certainly is (requests end
        about in the order they were sent, so the oldest one's tokens leave the queue)."""
        r = self.loads[i]
        r.in_flight = max(0, r.in_flight - 1)
        if r.queued:
            r.pending = max(0.0, r.pending - r.queued.popleft())

    def _fresh(self, i: int, now: float | None) -> bool:
        seen = self.loads[i].seen_at
        return seen is not None and now is not None and now - seen <= self.metrics_ttl

    def load(self, i: int, now: float | None = None) -> float:
        """Replica ``i``'s requests: in flight from this router, plus those the last
        fresh ``/metrics`` reading showed beyond them (other routers' work)."""
        r = self.loads[i]
        return r.in_flight + (r.external if self._fresh(i, now) else 0.0)

    def pending(self, i: int, now: float | None = None) -> float:
        """Prefill tokens queued on replica ``i`` now (the leaky bucket, drained)."""
        r = self.loads[i]
        if now is not None and r.pending_at is not None and now > r.pending_at:
            r.pending = max(0.0, r.pending - self.prefill_rate * (now - r.pending_at))
            r.pending_at = now
        elif now is not None and r.pending_at is None:
            r.pending_at = now
        return r.pending

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
        if cached_tokens is None:  # estimated from the prefix tree
            cached_tokens = [m * block_tokens for m in self.tree.match(blocks)]
        cached = list(cached_tokens)
        loads = {i: self.load(i, now) for i in up}
        queued = {i: self.pending(i, now) for i in up}
        allowed = set(self._guarded(up, loads))
        tiebreak = _spread(blocks, self.n)
        new = max(cached[i] for i in allowed) < self.match_threshold * prompt_tokens
        if session is not None and session not in self._sessions:
            new = True  # a new conversation: what it shares is the system prompt at most

        def cost(i: int) -> float:
            if new:  # nothing worth keeping: balance the queues, then cache pressure
                return self.load_weight * queued[i]
            uncached = max(0.0, prompt_tokens - cached[i])
            return uncached + self.load_weight * queued[i]

        costs = {i: cost(i) for i in up}
        ranked = sorted(
            up,
            key=lambda i: (i not in allowed, costs[i], loads[i], self.tree.size(i), tiebreak[i]),
        )
        if not new and self.near_tie > 0 and ranked[0] in allowed:
            bound = costs[ranked[0]] * (1.0 + self.near_tie)
            best = max(  # ties keep the sort's order among equal holdings
                (i for i in ranked if i in allowed and costs[i] <= bound),
                key=lambda i: cached[i],
            )
            if cached[best] > cached[ranked[0]]:
                ranked = [best] + [i for i in ranked if i != best]
        if session is not None:
            home = self._sessions.get(session)
            if home is not None and home in allowed:
                ranked = [home] + [i for i in ranked if i != home]
        return ranked

    def assign(
        self,
        i: int,
        blocks: Sequence[int],
        *,
        session: str | None,
        prompt_tokens: float = 0.0,
        uncached_tokens: float | None = None,
        block_tokens: float = 16.0,
    ) -> None:
        """Replica ``i`` was sent the request: record its blocks, session, and the
        prefill it queues there (``uncached_tokens``, else estimated from the tree)."""
        if uncached_tokens is None:
            uncached_tokens = max(0.0, prompt_tokens - self.tree.match(blocks)[i] * block_tokens)
        now = self._clock() if self._clock is not None else None
        r = self.loads[i]
        r.pending = self.pending(i, now) + uncached_tokens
        r.queued.append(uncached_tokens)
        self.tree.insert(i, blocks)
        if session is not None and self._max_sessions:
            self._sessions[session] = i
            self._sessions.move_to_end(session)
            while len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
        if prompt_tokens > 0:
            self._requests += 1
            k = min(self._requests, 256)
            self._mean_tokens += (prompt_tokens - self._mean_tokens) / k
            self._mean_uncached += (uncached_tokens - self._mean_uncached) / k

    def session_replica(self, session: str) -> int | None:
        """The replica a session was last sent to, if remembered."""
        return self._sessions.get(session)


def _spread(blocks: Sequence[int], n: int) -> list[bytes]:
    """Per replica, a rendezvous weight of the request's last block (which names the
    whole prompt), so that ties (a prefix nobody holds, equal loads) spread requests."""
    seed = str(blocks[-1] if blocks else 0).encode()
    return [hashlib.blake2b(seed + bytes([i % 256]), digest_size=8).digest() for i in range(n)]
