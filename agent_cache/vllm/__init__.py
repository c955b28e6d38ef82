"""vLLM routing: replicas, retries, failover, prefix-tree and load-aware replica choice,
sessions, ``cache_salt``, usage.

Example (needs vLLM servers)::

    from agent_cache.vllm import VllmRouter
    router = VllmRouter(["http://gpu-1:8000/v1", "http://gpu-2:8000/v1"])
    reply = router.chat([{"role": "user", "content": "Hi"}], max_tokens=8)
"""

from __future__ import annotations

from agent_cache.vllm._endpoint import EndpointStats
from agent_cache.vllm.affinity import affinity_key
from agent_cache.vllm.command import ServeFlag, vllm_command, vllm_flags
from agent_cache.vllm.metrics import (
    LoadMetrics,
    PrefixCacheMetrics,
    parse_load_metrics,
    parse_prefix_cache_metrics,
    parse_prometheus_text,
)
from agent_cache.vllm.router import NAMESPACE_HEADER, SESSION_HEADER, VllmRouter
from agent_cache.vllm.transport import AsyncRoutingTransport, RoutingTransport

__all__ = [
    "NAMESPACE_HEADER",
    "SESSION_HEADER",
    "AsyncRoutingTransport",
    "EndpointStats",
    "LoadMetrics",
    "PrefixCacheMetrics",
    "RoutingTransport",
    "ServeFlag",
    "VllmRouter",
    "affinity_key",
    "parse_load_metrics",
    "parse_prefix_cache_metrics",
    "parse_prometheus_text",
    "vllm_command",
    "vllm_flags",
]
