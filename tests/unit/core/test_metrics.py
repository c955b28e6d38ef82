"""Prometheus metrics: exact counts after scripted traffic, the adapters, two processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client import CollectorRegistry  # noqa: E402

from agent_cache import LayeredCache, TtlPolicy  # noqa: E402
from agent_cache.metrics import PrometheusMetrics  # noqa: E402
from agent_cache.testing import FakeClock, HashEmbedder  # noqa: E402

STORED = [
    "what is rag",
    "what is a vector database",
    "how do I reset my account password",
    "how do I change my billing address",
]
EXACT = STORED[:3]
SEMANTIC = ["how can I reset my password for my account", "how can I change the billing address"]
MISSES = [
    "totally unrelated cooking question",
    "best pizza dough recipe",
    "weather in paris tomorrow",
    "learn to play guitar chords",
]
USAGE = {"prompt_tokens": 100, "completion_tokens": 20}
ROOT = Path(__file__).resolve().parents[3]


def make(**kw: Any) -> LayeredCache:
    kw.setdefault("embedder", HashEmbedder())
    kw.setdefault("clock", FakeClock())
    kw.setdefault("threshold", 0.6)
    kw.setdefault("ttl_policy", TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()))
    return LayeredCache(path=None, **kw)


def scripted(cache: LayeredCache, namespace: str = "default") -> None:
    for q in STORED:
        cache.store(q, f"answer to {q}", namespace=namespace, tokens=USAGE)
    for q in EXACT + SEMANTIC + MISSES:
        cache.lookup(q, namespace=namespace)


def value(registry: Any, name: str, **labels: str) -> float:
    got = registry.get_sample_value(name, labels)
    return 0.0 if got is None else float(got)


def test_scripted_traffic_gives_exact_counts() -> None:
    registry = CollectorRegistry()
    cache = make(metrics=PrometheusMetrics(registry),
                 prices={"gpt-4o-mini": (0.15, 0.60)})  # fmt: skip
    for q in STORED:
        cache.store(q, f"answer to {q}", "openai/gpt-4o-mini", "faq", tokens=USAGE)
    for q in EXACT + SEMANTIC + MISSES:
        cache.lookup(q, "openai/gpt-4o-mini", "faq")
    req = "agent_cache_requests_total"
    assert value(registry, req, cache_namespace="faq", layer="exact", outcome="hit", reason="") == 3
    assert (
        value(registry, req, cache_namespace="faq", layer="semantic", outcome="hit", reason="") == 2
    )
    assert value(registry, req, cache_namespace="faq", layer="none", outcome="miss", reason="") == 4
    lat = "agent_cache_lookup_seconds_count"
    assert value(registry, lat, cache_namespace="faq", layer="exact") == 3
    assert value(registry, lat, cache_namespace="faq", layer="semantic") == 2
    assert value(registry, lat, cache_namespace="faq", layer="none") == 4
    # 5 hits x the usage the model reported for the stored answer
    assert (
        value(registry, "agent_cache_tokens_saved_total", cache_namespace="faq", kind="input")
        == 500
    )
    assert (
        value(registry, "agent_cache_tokens_saved_total", cache_namespace="faq", kind="output")
        == 100
    )
    cost = value(registry, "agent_cache_cost_saved_usd_total", cache_namespace="faq")
    assert cost == pytest.approx((500 * 0.15 + 100 * 0.60) / 1e6)
    assert value(registry, "agent_cache_events_total", cache_namespace="faq", event="stores") == 4
    # the same figures in stats(), per namespace
    st = cache.stats()
    assert st.hits == {"exact": 3, "template": 0, "semantic": 2} and st.misses == 4
    ns = st.namespaces["faq"]
    assert ns.hits["exact"] == 3 and ns.misses == 4 and ns.lookups == 9
    assert ns.tokens_saved == {"input": 500, "output": 100}
    assert ns.cost_saved == pytest.approx(cost) and st.cost_saved == pytest.approx(cost)
    assert ns.latency_ms["all"]["p99"] is not None


def test_refusals_bypass_control_and_errors_are_outcomes() -> None:
    registry = CollectorRegistry()
    cache = make(metrics=PrometheusMetrics(registry))
    cache.store("what is the status of order 1234", "shipped")
    assert cache.lookup("what is the status of order 1235") is None
    cache.lookup("what is the status of order 1234", policy="bypass")
    req = "agent_cache_requests_total"
    assert value(registry, req, cache_namespace="default", layer="semantic",
                 outcome="refused", reason="numbers") == 1  # fmt: skip
    assert (
        value(registry, req, cache_namespace="default", layer="none", outcome="bypass", reason="")
        == 1
    )
    assert cache.stats().namespaces["default"].refused == {"numbers": 1}
    control = make(metrics=PrometheusMetrics(registry), bypass_rate=1.0)
    control.lookup("anything")
    assert (
        value(registry, req, cache_namespace="default", layer="none", outcome="control", reason="")
        == 1
    )


def test_shadow_judgments_and_feedback_are_events() -> None:
    registry = CollectorRegistry()
    cache = make(metrics=PrometheusMetrics(registry), shadow=True)
    cache.store("how do I reset my account password", "Use the reset link.")
    assert cache.lookup("how can I reset my password for my account") is None
    cache.store("how can I reset my password for my account", "Use the reset link.")
    ev = "agent_cache_events_total"
    assert value(registry, ev, cache_namespace="default", event="shadow:would_hit") == 1
    assert value(registry, ev, cache_namespace="default", event="shadow:agreed") == 1
    assert value(registry, "agent_cache_requests_total", cache_namespace="default",
                 layer="semantic", outcome="shadow", reason="") == 1  # fmt: skip
    assert cache.stats().judged[0][1] is True


def test_model_calls_kv_tokens_and_entries() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    cache = make(metrics=metrics)
    cache.get_or_compute("what is rag", lambda: "retrieval", tokens=USAGE)
    cache.get_or_compute("what is rag", lambda: "never")
    assert value(registry, "agent_cache_model_call_seconds_count", cache_namespace="default") == 1
    cache.record_model_usage(1000, 800)  # what the vLLM router reports per call
    metrics.record_model_usage(10, None)  # the router may feed the metrics directly
    assert value(registry, "agent_cache_kv_prompt_tokens_total") == 1010
    assert value(registry, "agent_cache_kv_cached_tokens_total") == 800
    metrics.refresh_entries()
    assert value(registry, "agent_cache_entries", layer="semantic") == 1
    assert value(registry, "agent_cache_entries", layer="exact") >= 1
    cg = cache.stats().control_group
    assert cg["cached"]["requests"] == 2 and cg["cached"]["tokens_per_request"] == 60


def test_control_group_figures_beside_the_cached_traffic() -> None:
    cache = make(bypass_rate=0.5, seed=3)
    for i in range(40):
        cache.get_or_compute(f"question number {i % 4}", lambda: "an answer", tokens=USAGE)
    cg = cache.stats().control_group
    assert cg["control"]["requests"] + cg["cached"]["requests"] == 40
    assert cg["control"]["requests"] > 0
    # every control request paid the model; the cached traffic paid only its misses
    assert cg["control"]["tokens_per_request"] == 120
    assert cg["cached"]["tokens_per_request"] is not None
    assert cg["cached"]["tokens_per_request"] < 120


def test_default_registry_and_two_caches_share_the_families() -> None:
    a, b = PrometheusMetrics(), PrometheusMetrics()
    assert a.registry is prometheus_client.REGISTRY and a._m is b._m
    labels = {"cache_namespace": "default-registry-test", "layer": "none", "outcome": "miss",
              "reason": ""}  # fmt: skip
    before = value(prometheus_client.REGISTRY, "agent_cache_requests_total", **labels)
    make(metrics=True).lookup("x", namespace="default-registry-test")
    after = value(prometheus_client.REGISTRY, "agent_cache_requests_total", **labels)
    assert after - before == 1


def test_langchain_adapter_feeds_the_same_metrics() -> None:
    pytest.importorskip("langchain_core")
    from langchain_agent_cache import AgentCache
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration

    registry = CollectorRegistry()
    lc = AgentCache(make(metrics=PrometheusMetrics(registry)), namespace="lc")
    llm = "model=fake---[('stop', None)]"

    def gen(text: str) -> list[Any]:
        msg = AIMessage(text, usage_metadata={"input_tokens": 30, "output_tokens": 7,
                                              "total_tokens": 37})  # fmt: skip
        return [ChatGeneration(message=msg)]

    for q in STORED:
        lc.update(q, llm, gen(f"answer to {q}"))
    for q in EXACT + SEMANTIC + MISSES:
        lc.lookup(q, llm)
    req = "agent_cache_requests_total"
    assert value(registry, req, cache_namespace="lc", layer="exact", outcome="hit", reason="") == 3
    assert (
        value(registry, req, cache_namespace="lc", layer="semantic", outcome="hit", reason="") == 2
    )
    assert value(registry, req, cache_namespace="lc", layer="none", outcome="miss", reason="") == 4
    assert (
        value(registry, "agent_cache_tokens_saved_total", cache_namespace="lc", kind="input") == 150
    )
    assert (
        value(registry, "agent_cache_tokens_saved_total", cache_namespace="lc", kind="output") == 35
    )


_WORKER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [{root!r}, {root!r} + "/integrations", {tests!r}]
    from test_metrics import make, scripted
    make(metrics=True).get_or_compute("warm", lambda: "up")
    scripted(make(metrics=True), namespace="mp")
    """
)
_READER = textwrap.dedent(
    """
    import json
    from agent_cache.metrics import multiprocess_registry
    r = multiprocess_registry()
    out = {o: r.get_sample_value("agent_cache_requests_total",
                                  {"cache_namespace": "mp", "layer": l, "outcome": o2,
                                   "reason": ""})
            for o, l, o2 in [("exact", "exact", "hit"), ("semantic", "semantic", "hit"),
                             ("miss", "none", "miss")]}
    out["model"] = r.get_sample_value("agent_cache_model_call_seconds_count",
                                  {"cache_namespace": "default"})
    print(json.dumps(out))
    """
)


def test_two_processes_add_up_in_multiprocess_mode(tmp_path: Path) -> None:
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "integrations")]))  # fmt: skip
    worker = _WORKER.format(root=str(ROOT), tests=str(Path(__file__).parent))
    procs = [subprocess.Popen([sys.executable, "-c", worker], env=env) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    out = subprocess.run([sys.executable, "-c", _READER], env=env, check=True,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert json.loads(out.stdout) == {"exact": 6.0, "semantic": 4.0, "miss": 8.0, "model": 2.0}


def _exported() -> dict[str, set[str]]:
    """Every series name the metrics export after traffic that touches each family,
    with the labels its samples carry."""
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    cache = make(metrics=metrics, prices={"m": (1.0, 1.0)})
    cache.store("what is the status of order 1234", "shipped", "m", tokens=USAGE)
    cache.lookup("what is the status of order 1234", "m")
    cache.lookup("what is the status of order 1235", "m")  # refused: numbers
    cache.get_or_compute("a new question", lambda: "an answer")
    cache.record_model_usage(10, 5)
    metrics.refresh_entries()
    out: dict[str, set[str]] = {}
    for family in registry.collect():
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


def test_grafana_dashboard_queries_only_exported_names_and_labels() -> None:
    import re

    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v.get("type") == "query"]
    exported = _exported()
    used: set[str] = set()
    for expr in exprs:
        names = set(re.findall(r"agent_cache_[a-z_]+", expr))
        assert names, expr
        assert names <= set(exported), (expr, names - set(exported))
        used |= names
        labels = set().union(*(exported[n] for n in names))
        for matcher in re.findall(r"\{([^}]*)\}", expr):  # {label="x", ...}
            for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matcher):
                assert label in labels, (expr, label)
        for group in re.findall(r"\b(?:by|without|ignoring|on)\s*\(([^)]*)\)", expr):
            for label in filter(None, (g.strip() for g in group.split(","))):
                assert label in labels, (expr, label)
        for _, label in re.findall(r"label_values\((\w+),\s*(\w+)\)", expr):
            assert label in labels, (expr, label)
    # every family the docs list is on the dashboard
    for name in ("agent_cache_requests_total", "agent_cache_lookup_seconds_bucket",
                 "agent_cache_model_call_seconds_bucket", "agent_cache_tokens_saved_total",
                 "agent_cache_cost_saved_usd_total", "agent_cache_kv_cached_tokens_total",
                 "agent_cache_kv_prompt_tokens_total", "agent_cache_entries",
                 "agent_cache_events_total"):  # fmt: skip
        assert name in used, name


def test_no_label_collides_with_the_ones_kubernetes_scrapes_add() -> None:
    scrape_labels = {"namespace", "pod", "container", "job", "instance", "service", "node"}
    for name, labels in _exported().items():
        assert not labels & scrape_labels, (name, labels & scrape_labels)
    assert "reason" in _exported()["agent_cache_requests_total"]
