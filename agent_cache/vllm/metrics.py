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

__all__ = [
    "LoadMetrics",
    "PrefixCacheMetrics",
    "parse_load_metrics",
    "parse_prefix_cache_metrics",
    "parse_prometheus_text",
]

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


RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"
_OLD_KV_USAGE = "vllm:gpu_cache_usage_perc"
CACHE_CONFIG = "vllm:cache_config_info"
_LABEL = re.compile(r'(?P<k>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<v>(?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class LoadMetrics:
    """How busy one server is, and how big its KV cache is (from one ``/metrics`` page).

    Attributes:
        running: ``vllm:num_requests_running`` (in the running batch).
        waiting: ``vllm:num_requests_waiting`` (queued: each one waits for the batch).
        kv_usage: ``vllm:kv_cache_usage_perc``, a fraction in [0, 1].
        num_gpu_blocks: KV blocks of the cache (``vllm:cache_config_info``), if given.
        block_size: Tokens per block (``vllm:cache_config_info``), if given.
        kv_cache_tokens: The cache's capacity in tokens summed over the server's
            engines (vLLM 0.33's group-aware ``kv_cache_size_tokens`` label, right for
            hybrid models), if given.
        engines: Engines (data-parallel ranks) the page reports.

    Example:
        >>> LoadMetrics(running=3, waiting=1, kv_usage=0.5, num_gpu_blocks=100,
        ...             block_size=16).capacity_tokens
        1584
    """

    running: float
    waiting: float
    kv_usage: float
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    kv_cache_tokens: int | None = None
    engines: int = 1

    @property
    def capacity_tokens(self) -> int | None:
        """Tokens the cache holds: ``kv_cache_tokens`` when given, else per engine
        ``(num_gpu_blocks - 1) * block_size`` (one block is vLLM's null block); None
        when the page did not say."""
        if self.kv_cache_tokens is not None:
            return self.kv_cache_tokens
        if self.num_gpu_blocks is None or self.block_size is None:
            return None
        return max(0, self.num_gpu_blocks - 1) * self.block_size * self.engines


def _config_labels(text: str) -> list[dict[str, str]]:
    """The labels of every ``cache_config_info`` line (one per engine)."""
    out: list[dict[str, str]] = []
    for line in text.splitlines():
        if line.startswith(CACHE_CONFIG + "{"):
            inner = line[len(CACHE_CONFIG) + 1 : line.rindex("}")]
            out.append({m.group("k"): m.group("v") for m in _LABEL.finditer(inner)})
    return out


def _int_label(labels: dict[str, str], name: str) -> int | None:
    try:
        return int(float(labels[name]))
    except (KeyError, ValueError):
        return None


def parse_load_metrics(text: str) -> LoadMetrics | None:
    """Running and waiting requests, KV usage and the cache size in a ``/metrics`` page.

    Returns None when the page has none of the load gauges (not a vLLM server).

    Example:
        >>> page = ('vllm:num_requests_running{engine="0"} 2.0\\n'
        ...         'vllm:num_requests_waiting{engine="0"} 5.0\\n'
        ...         'vllm:kv_cache_usage_perc{engine="0"} 0.25\\n'
        ...         'vllm:cache_config_info{block_size="16",num_gpu_blocks="2049"} 1.0')
        >>> m = parse_load_metrics(page)
        >>> m.waiting, m.kv_usage, m.capacity_tokens
        (5.0, 0.25, 32768)
    """
    samples = parse_prometheus_text(text)
    if RUNNING not in samples and WAITING not in samples:
        return None
    engines = _config_labels(text)
    labels = engines[0] if engines else {}
    sizes = [_int_label(e, "kv_cache_size_tokens") for e in engines]
    usage = samples.get(KV_USAGE, samples.get(_OLD_KV_USAGE, 0.0))
    return LoadMetrics(
        running=samples.get(RUNNING, 0.0),
        waiting=samples.get(WAITING, 0.0),
        kv_usage=min(1.0, max(0.0, usage)),
        num_gpu_blocks=_int_label(labels, "num_gpu_blocks"),
        block_size=_int_label(labels, "block_size"),
        kv_cache_tokens=sum(s for s in sizes if s) if any(sizes) else None,
        engines=max(1, len(engines)),
    )
