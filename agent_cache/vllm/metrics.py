"""Reading vLLM's Prometheus ``/metrics`` for the prefix-cache counters.

vLLM V1 exports ``vllm:prefix_cache_queries_total`` (prompt tokens looked up) and
``vllm:prefix_cache_hits_total`` (of those, tokens found in the cache); the hit rate over
an interval is Δhits / Δqueries. Older servers exported ``vllm:gpu_prefix_cache_*``
(deprecated), read here when the new names are absent.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["PrefixCacheMetrics", "parse_prefix_cache_metrics", "parse_prometheus_text"]

HITS = "vllm:prefix_cache_hits_total"
QUERIES = "vllm:prefix_cache_queries_total"
_OLD_HITS = "vllm:gpu_prefix_cache_hits_total"
_OLD_QUERIES = "vllm:gpu_prefix_cache_queries_total"

_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$"
)


def parse_prometheus_text(text: str) -> dict[str, float]:
    """Sum every sample of the Prometheus text format by metric name (labels summed over).

    Example:
        >>> parse_prometheus_text('a_total{model="m",engine="0"} 2\\na_total{engine="1"} 3')
        {'a_total': 5.0}
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        out[m.group("name")] = out.get(m.group("name"), 0.0) + value
    return out


@dataclass(frozen=True)
class PrefixCacheMetrics:
    """The prefix-cache counters of one server (cumulative, in tokens).

    Example:
        >>> m = PrefixCacheMetrics(hits=30, queries=100)
        >>> m.hit_rate, (m - PrefixCacheMetrics(hits=10, queries=50)).hit_rate
        (0.3, 0.4)
    """

    hits: float
    queries: float

    @property
    def hit_rate(self) -> float:
        """hits / queries (0.0 before any query)."""
        return self.hits / self.queries if self.queries else 0.0

    def __sub__(self, earlier: PrefixCacheMetrics) -> PrefixCacheMetrics:
        """The counters over the interval since ``earlier``."""
        return PrefixCacheMetrics(self.hits - earlier.hits, self.queries - earlier.queries)


def parse_prefix_cache_metrics(text: str) -> PrefixCacheMetrics | None:
    """The prefix-cache counters in a ``/metrics`` page; None if it has none.

    Example:
        >>> page = "vllm:prefix_cache_hits_total 64.0\\nvllm:prefix_cache_queries_total 256.0"
        >>> parse_prefix_cache_metrics(page).hit_rate
        0.25
    """
    samples = parse_prometheus_text(text)
    if QUERIES in samples:
        return PrefixCacheMetrics(samples.get(HITS, 0.0), samples[QUERIES])
    if _OLD_QUERIES in samples:
        return PrefixCacheMetrics(samples.get(_OLD_HITS, 0.0), samples[_OLD_QUERIES])
    return None
