"""An error bound that holds online: ``LayeredCache(max_error_rate=δ)``.

Each namespace keeps *evidence*: judged semantic candidates binned by their cosine
similarity, each judged right or wrong (a served hit reported through
``feedback(hit, correct=...)``, a shadow hit, an audited hit, or an explored candidate
below the threshold, whose stored answer is compared with the model's fresh one by
meaning). The namespace's threshold is the lowest one whose judged hits at or above it
have a Wilson upper 95 % bound on the wrong-hit rate ≤ δ:

- too many wrong hits above the threshold → the bound rises above δ → the threshold goes
  up to where the evidence is clean (tighten);
- clean evidence below the threshold (from exploration: a small share of the candidates
  that just missed it are judged in the background while the model answers) → the
  threshold comes down (loosen), so the hit rate recovers when the evidence allows.

Evidence lives in the shared store's atomic counters (``eb:{namespace}:{bin}:n|w``), so
every process on one SQLite file or one Redis shares it. The idea of learning where a
similarity stops being trustworthy from judged hits comes from vCache (Schroeder et al.,
"vCache: Verified Semantic Prompt Caching", arXiv 2502.03771), which learns it per cached
entry; this is our own per-namespace design (vCache's code is not licensed for reuse).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_cache import _fork
from agent_cache.errors import ConfigurationError
from agent_cache.protocols import KVStore

__all__ = ["ErrorBound", "wilson_lower", "wilson_upper"]

_Z95 = 1.959963984540054


def wilson_upper(failures: int, n: int, z: float = _Z95) -> float:
    """Upper bound of the Wilson score interval for a rate ``failures / n``.

    Example:
        >>> round(wilson_upper(0, 100), 3)
        0.037
    """
    if n <= 0:
        return 1.0
    p = failures / n
    denom = 1 + z * z / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / denom)


def wilson_lower(successes: int, n: int, z: float = _Z95) -> float:
    """Lower bound of the Wilson score interval for a rate ``successes / n``.

    Example:
        >>> round(wilson_lower(90, 100), 3)
        0.826
    """
    if n <= 0:
        return 0.0
    return 1.0 - wilson_upper(n - successes, n, z)


@dataclass
class _Evidence:
    judged: list[int]
    wrong: list[int]
    epoch: int = 0
    read_at: float = -math.inf
    threshold: float | None = None


class ErrorBound:
    """Per-namespace thresholds driven by judged hits (see the module docstring).

    Args:
        max_error_rate: δ, the wrong-hit rate to stay under.
        store: where the evidence counters live (the cache's exact-layer store).
        base: the configured threshold of a namespace (used until evidence decides).
        lowest / highest: the range the threshold moves in.
        min_judged: judged hits at or above a threshold before it counts as certified.
        confidence: one-sided level of the Wilson upper bound on the wrong-hit rate that
            must stay ≤ δ (certifying 5 % at 0.95 takes at least 55 clean judgments above
            the threshold; a lower level recovers the hit rate sooner and holds less).
        window: judgments per epoch; the evidence is the current and the previous epoch,
            so old traffic stops counting (the bound follows the traffic as it changes).
        refresh_s: how often a process re-reads the shared counters.
        clock: monotonic seconds (tests).

    Example:
        >>> from agent_cache.stores import MemoryStore
        >>> eb = ErrorBound(0.05, MemoryStore(), base=lambda ns: 0.9)
        >>> eb.threshold("faq")
        0.9
    """

    BIN = 0.01

    def __init__(
        self,
        max_error_rate: float,
        store: KVStore | Callable[[], KVStore],
        *,
        base: Callable[[str], float],
        lowest: float = 0.70,
        highest: float = 0.995,
        min_judged: int = 30,
        confidence: float = 0.95,
        window: int = 400,
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0.0 < max_error_rate < 1.0:
            raise ConfigurationError("max_error_rate must be in (0, 1)")
        if not 0.0 <= lowest < highest <= 1.0:
            raise ConfigurationError("need 0 <= lowest < highest <= 1")
        self.max_error_rate = max_error_rate
        self._store = store
        self.base = base
        self.lowest = lowest
        self.highest = highest
        self.min_judged = min_judged
        if not 0.5 <= confidence < 1.0:
            raise ConfigurationError("confidence must be in [0.5, 1)")
        self.confidence = confidence
        self._z = statistics.NormalDist().inv_cdf(confidence)
        self.window = window
        self.refresh_s = refresh_s
        self.clock = clock
        self._bins = round((1.0 - lowest) / self.BIN) + 1
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))
        self._ns: dict[str, _Evidence] = {}

    @property
    def store(self) -> KVStore:
        s = self._store
        return s if isinstance(s, KVStore) else s()

    # -- evidence ------------------------------------------------------------------------
    def _bin(self, similarity: float) -> int | None:
        if similarity < self.lowest:
            return None
        return min(self._bins - 1, int((similarity - self.lowest) / self.BIN + 1e-9))

    def _edge(self, b: int) -> float:
        return round(self.lowest + b * self.BIN, 4)

    def _counter(self, namespace: str, epoch: int, b: int, what: str) -> str:
        return f"eb:{namespace}:{epoch}:{b}:{what}"

    def record(self, namespace: str, similarity: float, *, wrong: bool) -> None:
        """Add one judged candidate (shared through the store's counters)."""
        b = self._bin(similarity)
        if b is None:
            return
        store = self.store
        total = store.incr(f"eb:{namespace}:total")
        epoch = (total - 1) // self.window
        store.incr(self._counter(namespace, epoch, b, "n"))
        if wrong:
            store.incr(self._counter(namespace, epoch, b, "w"))
        with self._lock:
            ev = self._ns.get(namespace)
            if ev is not None:
                if epoch != ev.epoch:
                    ev.read_at = -math.inf  # a new epoch: re-read both windows
                else:
                    ev.judged[b] += 1
                    ev.wrong[b] += int(wrong)
                    ev.threshold = None  # recompute from the updated counts

    def _evidence(self, namespace: str) -> _Evidence:
        now = self.clock()
        with self._lock:
            ev = self._ns.get(namespace)
            if ev is not None and now - ev.read_at < self.refresh_s:
                return ev
        store = self.store
        epoch = max(0, store.get_counter(f"eb:{namespace}:total") - 1) // self.window
        judged = [0] * self._bins
        wrong = [0] * self._bins
        for e in (epoch - 1, epoch):
            if e < 0:
                continue
            for b in range(self._bins):
                judged[b] += store.get_counter(self._counter(namespace, e, b, "n"))
                wrong[b] += store.get_counter(self._counter(namespace, e, b, "w"))
        fresh = _Evidence(judged, wrong, epoch, now)
        with self._lock:
            self._ns[namespace] = fresh
        return fresh

    def counts(self, namespace: str) -> tuple[Sequence[int], Sequence[int]]:
        """(judged, wrong) per bin, lowest similarity first."""
        ev = self._evidence(namespace)
        return tuple(ev.judged), tuple(ev.wrong)

    # -- the operating point -------------------------------------------------------------
    def threshold(self, namespace: str) -> float:
        """The threshold in force now: evidence-certified, else the configured one."""
        ev = self._evidence(namespace)
        if ev.threshold is not None:
            return ev.threshold
        ev.threshold = self._choose(namespace, ev)
        return ev.threshold

    def _choose(self, namespace: str, ev: _Evidence) -> float:
        base = min(self.highest, max(self.lowest, self.base(namespace)))
        if sum(ev.judged) < self.min_judged:
            return base
        n = w = 0
        certified: float | None = None
        failed = False
        best: tuple[float, float] | None = None  # (upper bound, threshold)
        # walk down from the top: cumulative evidence of "every hit at or above t"
        for b in range(self._bins - 1, -1, -1):
            n += ev.judged[b]
            w += ev.wrong[b]
            t = round(self.lowest + b * self.BIN, 4)
            upper = wilson_upper(w, n, self._z)
            # certify only where there is evidence (an unjudged range is not known to be
            # fine), and stop at the first threshold that fails: going on down would pick
            # the luckiest of many nested tests
            if n >= self.min_judged and ev.judged[b]:
                if upper > self.max_error_rate:
                    failed = True
                elif not failed:
                    certified = t
            if n and (best is None or upper < best[0]):
                best = (upper, t)
        if certified is not None:
            return certified
        # nothing certified yet: the threshold whose evidence looks cleanest, unless even
        # that is far off the bound; then just above the highest wrong judgment
        if best is not None and best[0] <= 2 * self.max_error_rate:
            n_t = sum(ev.judged[b] for b in range(self._bins) if self._edge(b) >= best[1])
            w_t = sum(ev.wrong[b] for b in range(self._bins) if self._edge(b) >= best[1])
            if n_t and w_t / n_t <= self.max_error_rate / 2:
                return best[1]
        top_wrong = max((b for b in range(self._bins) if ev.wrong[b]), default=None)
        if top_wrong is None:
            return base
        return min(self.highest, round(self.lowest + (top_wrong + 1) * self.BIN, 4))

    def estimate(self, namespace: str) -> dict[str, float | int]:
        """Judged hits at or above the current threshold: count, wrong, rate, upper bound."""
        t = self.threshold(namespace)
        judged, wrong = self.counts(namespace)
        n = sum(j for b, j in enumerate(judged) if self.lowest + b * self.BIN >= t - 1e-9)
        w = sum(x for b, x in enumerate(wrong) if self.lowest + b * self.BIN >= t - 1e-9)
        return {
            "threshold": t,
            "judged": n,
            "wrong": w,
            "wrong_rate": w / n if n else 0.0,
            "upper_bound": wilson_upper(w, n, self._z),
        }
