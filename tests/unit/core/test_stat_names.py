"""Counter names and lookup outcomes are enums (issue 21) whose values are the strings
``stats()``, the sinks and the Prometheus labels always used: nothing a dashboard reads
changed, and what reaches them is a plain ``str``."""

from __future__ import annotations

from typing import Any

from agent_cache import LayeredCache
from agent_cache.stats import HIT, REFUSED, Count, LookupOutcome, StatsRecorder, StatsSink
from agent_cache.testing import HashEmbedder


class _Seen(StatsSink):
    def __init__(self) -> None:
        self.requests: list[tuple[Any, ...]] = []
        self.counters: list[tuple[Any, ...]] = []

    def request(self, namespace: str, layer: str, outcome: str, seconds: float) -> None:
        self.requests.append((namespace, layer, outcome))

    def counter(self, namespace: str, name: str, n: int) -> None:
        self.counters.append((namespace, name, n))


def test_the_enum_values_are_the_names_stats_always_used() -> None:
    assert (HIT, REFUSED) == ("hit", "refused") and type(HIT) is str
    assert [o.value for o in LookupOutcome] == [
        "hit", "miss", "bypass", "control", "error", "shadow", "audit", "refused"
    ]  # fmt: skip
    assert Count.RECORD_MISMATCH == "record_mismatch"
    assert Count.SHADOW_WOULD_HIT == "shadow:would_hit"
    assert Count.REFUSED_PREFIX + "numbers" == "refused:numbers"


def test_sinks_and_the_snapshot_get_plain_strings() -> None:
    seen = _Seen()
    rec = StatsRecorder(sinks=[seen])
    rec.incr(Count.COALESCED, namespace="faq")
    rec.request("faq", "none", LookupOutcome.MISS, 0.001)
    snap = rec.snapshot()
    assert snap.counters == {"coalesced": 1} and snap.misses == 1
    assert all(type(k) is str for k in snap.counters)
    assert seen.counters == [("faq", "coalesced", 1)] and type(seen.counters[0][1]) is str
    assert seen.requests == [("faq", "none", "miss")] and type(seen.requests[0][2]) is str
    assert type(snap.events[0].outcome) is str


def test_a_cache_counts_under_the_same_names() -> None:
    seen = _Seen()
    cache = LayeredCache(embedder=HashEmbedder(), path=None, metrics=seen)
    cache.store("What is RAG?", "Retrieval.")
    assert cache.lookup("What is RAG?") is not None
    cache.lookup("What is RAG?", policy="bypass")
    assert [r[1:] for r in seen.requests] == [("exact", "hit"), ("none", "bypass")]
    assert all(type(r[2]) is str for r in seen.requests)
    assert ("default", "stores", 1) in seen.counters
    assert all(type(c[1]) is str for c in seen.counters)
    stats = cache.stats().as_dict()
    assert (stats["stores"], stats["bypassed"], stats["hits"]["exact"]) == (1, 1, 1)
