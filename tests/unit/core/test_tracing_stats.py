"""OpenTelemetry spans (SDK in-memory exporter) and the stats renderings."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_cache import CacheStats, LayeredCache, TtlPolicy, tracing
from agent_cache.testing import FakeClock, HashEmbedder


class HalfReranker:
    def score(self, query: str, candidates: Sequence[str]) -> list[float]:
        return [0.9] * len(candidates)


def make(**kw: Any) -> LayeredCache:
    kw.setdefault("embedder", HashEmbedder())
    kw.setdefault("clock", FakeClock())
    kw.setdefault("threshold", 0.6)
    kw.setdefault("ttl_policy", TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()))
    return LayeredCache(path=None, **kw)


@pytest.fixture
def exporter() -> Iterator[Any]:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # set once per process
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    memory.shutdown()


def test_spans_around_lookup_layers_verify_model_and_store(exporter: Any) -> None:
    cache = make(reranker=HalfReranker())
    cache.get_or_compute("how do I reset my account password", lambda: "link", namespace="faq")
    exporter.clear()
    hit = cache.lookup("how can I reset my password for my account", namespace="faq")
    assert hit is not None and hit.layer == "semantic"
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {
        "agent_cache.lookup",
        "agent_cache.exact",
        "agent_cache.semantic",
        "agent_cache.verify",
    }
    lookup = spans["agent_cache.lookup"]
    assert dict(lookup.attributes) == {
        "agent_cache.namespace": "faq",
        "agent_cache.layer": "semantic",
        "agent_cache.outcome": "hit",
        "agent_cache.score": pytest.approx(hit.score),
    }
    for child in ("agent_cache.exact", "agent_cache.semantic"):
        assert spans[child].parent.span_id == lookup.context.span_id
    verify, semantic = spans["agent_cache.verify"], spans["agent_cache.semantic"]
    assert verify.parent.span_id == semantic.context.span_id
    assert verify.attributes["agent_cache.score"] == pytest.approx(0.9)
    assert spans["agent_cache.exact"].attributes["agent_cache.outcome"] == "miss"
    exporter.clear()
    cache.get_or_compute("a brand new question", lambda: "new answer", namespace="faq")
    names = [s.name for s in exporter.get_finished_spans()]
    assert "agent_cache.model_call" in names and "agent_cache.store" in names


async def test_async_lookup_spans(exporter: Any) -> None:
    cache = make()
    await cache.astore("what is rag", "retrieval")
    exporter.clear()
    await cache.alookup("what is rag")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["agent_cache.lookup"].attributes["agent_cache.layer"] == "exact"
    assert spans["agent_cache.exact"].parent.span_id == spans["agent_cache.lookup"].context.span_id


def test_without_opentelemetry_spans_cost_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "_trace", None)
    assert tracing.span("lookup") is tracing.span("store")  # one shared nullcontext
    assert not tracing.enabled()
    cache = make()
    cache.store("q", "v")
    assert cache.lookup("q") is not None


def traffic() -> LayeredCache:
    cache = make(prices={"*": (1.0, 2.0)})
    cache.store("what is rag", "retrieval", namespace="faq", tokens={"input": 10, "output": 5})
    cache.store("how do I reset my account password", "link", namespace="support")
    cache.lookup("what is rag", namespace="faq")
    cache.lookup("how can I reset my password for my account", namespace="support")
    cache.lookup("the status of order 1234", namespace="support")
    cache.get_or_compute("q", lambda: "v", namespace="faq")
    cache.get_or_compute("q", lambda: "v", namespace="faq")
    return cache


def test_stats_per_namespace_render_as_text_html_and_rich(tmp_path: Path) -> None:
    st = traffic().stats()
    assert set(st.namespaces) == {"faq", "support"}
    assert st.namespaces["faq"].hits["exact"] == 2 and st.namespaces["faq"].cost_saved == 2e-5
    assert st.namespaces["support"].tokens_saved == {"estimated": 1}
    assert st.tokens == {"input": 10, "output": 5, "estimated": 2}
    html = st._repr_html_()
    assert html.count("<table>") == 2 and "<td>support</td>" in html
    text = str(st)
    assert "tokens saved: estimated" in text and "namespace" in text
    rich = pytest.importorskip("rich.console")
    console = rich.Console(record=True, width=200)
    console.print(st)
    out = console.export_text()
    assert "per namespace" in out and "support" in out and "hits: exact" in out
    json.dumps(st.as_dict())
    st.save(tmp_path / "s.json")
    back = CacheStats.load(tmp_path / "s.json")
    assert back.as_dict() == st.as_dict() and len(back.events) == len(st.events) == 5


def test_counters_recorded_are_shown() -> None:
    cache = make()
    cache.recorder.incr("coalesced", 2, namespace="faq")
    cache.recorder.incr("threshold_raised", namespace="faq")
    cache.recorder.incr("feedback:wrong", namespace="faq")
    cache.recorder.incr("evicted", namespace="faq")
    st = cache.stats()
    assert st.coalesced == 2 and st.counters == {"coalesced": 2, "threshold_raised": 1}
    text = str(st)
    for row in ("coalesced", "threshold raised", "feedback: wrong", "evicted by feedback"):
        assert row in text
