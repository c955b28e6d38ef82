"""Prometheus metrics for the cache (``pip install 'agent-cache[metrics]'``).

Names (the Grafana dashboard in ``docs/grafana-dashboard.json`` uses exactly these; a
test checks every name and label it queries). The cache's namespace is the label
``cache_namespace``, never ``namespace``: Kubernetes scrape configurations add a
``namespace`` label of their own (Prometheus would rename ours ``exported_namespace``).

==========================================================  ===================================
``agent_cache_requests_total``                              one per lookup; ``outcome``:
``{cache_namespace,layer,outcome,reason}``                  ``hit`` (``layer``
                                                            exact/template/semantic), ``miss``,
                                                            ``refused`` (a miss whose candidate
                                                            the difference analysis or the
                                                            verifier refused; ``reason`` says
                                                            why, ``""`` for every other
                                                            outcome), ``shadow``, ``audit``,
                                                            ``bypass``, ``control``, ``error``
``agent_cache_lookup_seconds{cache_namespace,layer}``       histogram of lookup latency
``agent_cache_model_call_seconds{cache_namespace}``         histogram of model calls on misses
``agent_cache_tokens_saved_total{cache_namespace,kind}``    ``kind``: input / output (reported
                                                            split), total (reported as one
                                                            int), estimated (nothing reported)
``agent_cache_cost_saved_usd_total{cache_namespace}``       US dollars, from the cache's
                                                            ``prices`` (USD per million tokens)
``agent_cache_kv_cached_tokens_total``                      prompt tokens vLLM served from its
                                                            KV cache (the router's usage)
``agent_cache_kv_prompt_tokens_total``                      prompt tokens vLLM saw
``agent_cache_entries{layer}``                              entries stored (exact: records,
                                                            semantic: vectors)
``agent_cache_events_total{cache_namespace,event}``         everything else: stores, coalesced,
                                                            shadow judgments, feedback,
                                                            evictions
==========================================================  ===================================

Use them in ``prometheus_client``'s default registry (``LayeredCache(metrics=True)``),
or pass a registry of your own (``PrometheusMetrics(registry=...)``) when the app already
exposes ``/metrics``; :func:`start_metrics_server` serves one for apps that have none.

**Several worker processes** (gunicorn, uvicorn workers, Celery): set the environment
variable ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory *before* the workers start
(``prometheus_client``'s multiprocess mode); every process then writes its samples there
and :func:`multiprocess_registry` (what :func:`start_metrics_server` uses in that mode)
adds them up. Gauges (``agent_cache_entries``) report the most recent live value.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from agent_cache import _fork
from agent_cache.errors import ConfigurationError, MissingDependencyError
from agent_cache.stats import Count, LookupOutcome, StatsSink, split_outcome

__all__ = [
    "LOOKUP_BUCKETS",
    "MODEL_BUCKETS",
    "PrometheusMetrics",
    "multiprocess_registry",
    "start_metrics_server",
]

LOOKUP_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                  0.25, 0.5, 1.0, 2.5)  # fmt: skip
MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
_ENTRIES_EVERY_S = 10.0
#: The label naming the cache's namespace (``namespace`` is Kubernetes').
NS = "cache_namespace"
_families: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_families_lock = threading.Lock()


def _renew_families_lock() -> None:  # a forked child: a free lock
    global _families_lock
    _families_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_families_lock)


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise MissingDependencyError(
            "prometheus-client", "metrics", feature="Prometheus metrics"
        ) from exc
    return prometheus_client


def _make(registry: Any) -> dict[str, Any]:
    """The metric families of ``registry``, created once (a name registers only once)."""
    pc = _prometheus()
    with _families_lock:
        fam = _families.get(registry)
        if fam is None:
            kw = {"registry": registry}
            fam = {
                "requests": pc.Counter("agent_cache_requests", "Lookups by layer and outcome",
                                       [NS, "layer", "outcome", "reason"], **kw),
                "lookup": pc.Histogram("agent_cache_lookup_seconds", "Lookup latency",
                                       [NS, "layer"], buckets=LOOKUP_BUCKETS, **kw),
                "model": pc.Histogram("agent_cache_model_call_seconds",
                                      "Model calls made on misses", [NS],
                                      buckets=MODEL_BUCKETS, **kw),
                "tokens": pc.Counter("agent_cache_tokens_saved", "Tokens hits saved",
                                     [NS, "kind"], **kw),
                "cost": pc.Counter("agent_cache_cost_saved_usd",
                                   "US dollars hits saved (prices: USD per million tokens)",
                                   [NS], **kw),
                "kv_cached": pc.Counter("agent_cache_kv_cached_tokens",
                                        "Prompt tokens the model server served from KV cache",
                                        **kw),
                "kv_prompt": pc.Counter("agent_cache_kv_prompt_tokens",
                                        "Prompt tokens the model server saw", **kw),
                "entries": pc.Gauge("agent_cache_entries", "Entries stored", ["layer"],
                                    multiprocess_mode="livemostrecent", **kw),
                "events": pc.Counter("agent_cache_events", "Other cache events",
                                     [NS, "event"], **kw),
            }  # fmt: skip
            _families[registry] = fam
    return fam


class PrometheusMetrics(StatsSink):
    """A :class:`~agent_cache.stats.StatsSink` writing the cache's Prometheus metrics.

    Args:
        registry: a ``prometheus_client.CollectorRegistry``; ``None``: the default
            ``REGISTRY`` (what ``start_http_server`` and most frameworks expose).

    It is also a usage sink for the vLLM router: ``VllmRouter(..., cache=metrics)``
    feeds ``agent_cache_kv_*_tokens_total`` without a cache (with one, the cache forwards
    the router's usage here itself).

    Example:
        >>> from prometheus_client import CollectorRegistry
        >>> from agent_cache import LayeredCache
        >>> from agent_cache.testing import HashEmbedder
        >>> registry = CollectorRegistry()
        >>> cache = LayeredCache(None, embedder=HashEmbedder(),
        ...                      metrics=PrometheusMetrics(registry))
        >>> cache.lookup("What is RAG?", namespace="faq") is None
        True
        >>> registry.get_sample_value("agent_cache_requests_total", {"cache_namespace":
        ...     "faq", "layer": "none", "outcome": "miss", "reason": ""})
        1.0
    """

    def __init__(self, registry: Any = None) -> None:
        pc = _prometheus()
        self.registry = registry if registry is not None else pc.REGISTRY
        self._m = _make(self.registry)
        self._caches: weakref.WeakSet[Any] = weakref.WeakSet()
        self._entries_at = 0.0
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))

    # ------------------------------------------------------------------ StatsSink
    def request(self, namespace: str, layer: str, outcome: str, seconds: float) -> None:
        kind, reason = split_outcome(outcome)
        self._m["requests"].labels(namespace, layer, kind, reason).inc()
        if kind not in (LookupOutcome.BYPASS, LookupOutcome.CONTROL):
            self._m["lookup"].labels(namespace, layer).observe(seconds)

    def saved(self, namespace: str, kind: str, tokens: int, cost: float) -> None:
        self._m["tokens"].labels(namespace, kind).inc(tokens)
        if cost:
            self._m["cost"].labels(namespace).inc(cost)

    def model_call(self, namespace: str, seconds: float) -> None:
        self._m["model"].labels(namespace).observe(seconds)

    def counter(self, namespace: str, name: str, n: int) -> None:
        if name.startswith(Count.REFUSED_PREFIX):
            name = "refused_candidate:" + name[len(Count.REFUSED_PREFIX) :]
        self._m["events"].labels(namespace, name).inc(n)
        if name in (Count.STORES, Count.EVICTED):
            self._maybe_refresh_entries()

    def kv_tokens(self, prompt_tokens: int, cached_tokens: int) -> None:
        self._m["kv_prompt"].inc(prompt_tokens)
        self._m["kv_cached"].inc(cached_tokens)

    def record_model_usage(self, prompt_tokens: int, cached_tokens: int | None) -> None:
        """The vLLM router's usage sink protocol."""
        self.kv_tokens(max(0, int(prompt_tokens)), max(0, int(cached_tokens or 0)))

    def entries(self, counts: Mapping[str, int]) -> None:
        for layer, n in counts.items():
            self._m["entries"].labels(layer).set(n)

    # ------------------------------------------------------------------ entries gauge
    def watch(self, cache: Any) -> None:
        """Report ``cache``'s entry counts in ``agent_cache_entries`` (refreshed at most
        every 10 s after writes, and by :meth:`refresh_entries`); no I/O now."""
        self._caches.add(cache)

    def refresh_entries(self) -> None:
        """Count the watched caches' entries now (one ``count()`` per store)."""
        totals: dict[str, int] = {}
        for cache in list(self._caches):
            try:
                for layer, n in cache.entry_counts().items():
                    totals[layer] = totals.get(layer, 0) + n
            except Exception:  # a store down: keep the last value
                return
        self.entries(totals)

    def _maybe_refresh_entries(self) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._entries_at < _ENTRIES_EVERY_S and self._entries_at:
                return
            self._entries_at = now
        self.refresh_entries()


def multiprocess_registry() -> Any:
    """A registry adding up every process's samples in ``PROMETHEUS_MULTIPROC_DIR``.

    Needs ``PROMETHEUS_MULTIPROC_DIR`` set before the workers start (an error says so).
    """
    pc = _prometheus()
    from prometheus_client import multiprocess

    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        raise ConfigurationError(
            "multiprocess mode needs PROMETHEUS_MULTIPROC_DIR set to a directory"
        )
    registry = pc.CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry


def start_metrics_server(port: int = 9464, addr: str = "0.0.0.0", registry: Any = None) -> Any:
    """Serve ``/metrics`` on ``port`` in a daemon thread, for apps with no endpoint.

    ``registry``: what to serve; ``None``: the default registry, or in multiprocess mode
    (``PROMETHEUS_MULTIPROC_DIR`` set) the sum over every process. Returns what
    ``prometheus_client.start_http_server`` returns (the server and its thread).
    """
    pc = _prometheus()
    if registry is None:
        registry = (
            multiprocess_registry() if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else pc.REGISTRY
        )
    return pc.start_http_server(port, addr=addr, registry=registry)
