"""``agent-cache bench prefix`` on a tiny stream (a word-level tokenizer keeps it fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cache.bench.prefix import SECTION_END, SECTION_START, make_workload, run_prefix_bench
from agent_cache.bench.prefix_sweep import VARIANTS, make_stream
from agent_cache.bench.routing import CONTENDERS
from agent_cache.errors import ConfigurationError
from agent_cache.vllm.testing import FakeVllm


def test_workload_is_seeded_and_shaped() -> None:
    a, b = make_workload(50, seed=3), make_workload(50, seed=3)
    assert a == b
    assert all(len(set(r.docs)) == 5 for r in a.requests)
    assert len({r.question for r in a.requests}) == 50
    topics = [r.topic for r in make_workload(2000, seed=0).requests]
    assert topics.count(0) > topics.count(20) * 5  # Zipf-popular topics
    with pytest.raises(ConfigurationError):
        make_workload(1, k=20)


def test_bench_writes_its_section_and_keeps_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\nkept text\n", encoding="utf-8")
    tokenizer = ("word-level test tokenizer", lambda text: FakeVllm.tokenize_text(text, bos=False))
    results = run_prefix_bench(
        out=out,
        requests=120,
        batch=80,
        capacity_blocks=400,
        tokenizer=tokenizer,
        replicas=(2, 3),
        routing_scale=0.1,
        sweep_requests=60,
        sweep_batch=40,
        log=lambda _: None,
    )
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\nkept text\n")
    assert text.count(SECTION_START) == 1 and text.count(SECTION_END) == 1
    online = {row["contender"]: row for row in results["online"]}
    assert set(online) == {
        "retrieval order",
        "canonical (`order_documents`)",
        "popularity (`PopularityOrderer`)",
        "ContextPilot `reorder` (online)",
    }
    for row in results["online"] + results["batch"]:
        assert 0.0 <= row["capacity"] <= row["unbounded"] <= 1.0
    assert (
        online["canonical (`order_documents`)"]["unbounded"]
        > online["retrieval order"]["unbounded"]
    )
    batch = {row["contender"]: row for row in results["batch"]}
    scheduled = batch["`schedule_batch`, canonical"]
    assert scheduled["capacity"] > batch["arrival order, canonical"]["capacity"]
    routing = results["routing"]
    assert {r["contender"] for r in routing} == set(CONTENDERS)
    assert {(r["stream"], r["replicas"]) for r in routing} == {
        (s, n) for s in ("RAG", "multi-turn chat", "agent") for n in (2, 3)
    }
    for row in routing:
        assert 0.0 <= row["cached_share"] <= 1.0 and row["ttft_mean_ms"] > 0
        assert row["max_requests_vs_mean"] >= 1.0
    chat = {r["contender"]: r for r in routing if r["stream"] == "agent" and r["replicas"] == 3}
    assert chat["prefix tree"]["cached_share"] > chat["round-robin"]["cached_share"]
    assert "#### 3 replicas" in text and "KV-event routing within 5 %" in text
    assert "| ContextPilot `reorder` (online) |" in text
    refs = results["routing_reference"]
    assert {(x["stream"], x["replicas"]) for x in refs} == {
        (s, n) for s in ("RAG", "multi-turn chat", "agent") for n in (2, 3)
    }
    assert all(0.0 <= x["pooled"] <= 1.0 and x["chars_per_token"] > 0 for x in refs)
    assert "Reference, the same streams on one cache of 3 × 400 blocks" in text
    sweep = results["sweep"]
    assert [row["variant"] for row in sweep] == [v.name for v in VARIANTS]
    for row in sweep:
        for name, value in row.items():
            if name.startswith(("batch_", "online_")):
                assert 0.0 <= value <= 1.0, name
        assert row["batch_schedule_order_batch"] > row["batch_arrival_canonical"]
    assert "### Stream variants" in text and "ContextPilot offline" in text
    assert "reaches the count oracle" in text
    # a second run replaces the section instead of appending another
    run_prefix_bench(
        out=out,
        requests=60,
        batch=40,
        capacity_blocks=400,
        tokenizer=tokenizer,
        peer=False,
        replicas=(2,),
        routing_scale=0.05,
        sweep_requests=0,
        log=lambda _: None,
    )
    text = out.read_text(encoding="utf-8")
    assert text.count(SECTION_START) == 1 and "ContextPilot skipped" in text
    assert "| ContextPilot" not in text
    assert "### Stream variants" not in text  # no sweep asked


def test_bench_rejects_bad_sizes(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        run_prefix_bench(out=tmp_path / "x.md", requests=0, log=lambda _: None)


def test_stream_generator_is_seeded_shares_documents_and_varies_k() -> None:
    a, b = make_stream(300, seed=5), make_stream(300, seed=5)
    assert a == b
    assert make_stream(300, seed=6) != a
    sizes = {len(ids) for ids, _ in a.requests}
    assert min(sizes) >= 3 and max(sizes) <= 8 and len(sizes) > 3
    hubs = [d for ids, _ in a.requests for d in ids if d.startswith("hub-")]
    assert hubs  # documents shared across topics
    assert not [
        d
        for ids, _ in make_stream(300, seed=5, overlap=0.0).requests
        for d in ids
        if d.startswith("hub-")
    ]
    for bad in ({"k": (0, 3)}, {"k": (5, 3)}, {"overlap": 1.5}, {"doc_words": (0, 4)}):
        with pytest.raises(ConfigurationError):
            make_stream(10, **bad)
    with pytest.raises(ConfigurationError):
        run_prefix_bench(out=Path("unused.md"), sweep_requests=-1, log=lambda _: None)


def test_routing_reference_helpers() -> None:
    from agent_cache.bench.routing import (
        Session,
        Turn,
        measured_chars_per_token,
        pooled_cache_share,
    )
    from agent_cache.vllm.prefix_tree import render_for_prefix

    msgs = [{"role": "system", "content": "S" * 400}, {"role": "user", "content": "q" * 40}]
    sessions = [Session(f"s{i}", float(i), [Turn(list(msgs), "fine")]) for i in range(5)]

    def per_char(m: object) -> list[int]:  # one token per character of the rendering
        return [ord(c) for c in render_for_prefix(m)]  # type: ignore[arg-type]

    assert measured_chars_per_token(sessions, per_char) == 1.0
    big = pooled_cache_share(sessions, capacity_blocks=1000, tokens=per_char)
    # the same prompt five times: all but the first hit (up to the last full block)
    n = len(per_char(msgs))
    assert big == pytest.approx(4 * ((n - 1) // 16 * 16) / (5 * n))
    other = [{"role": "system", "content": "T" * 400}, msgs[1]]
    both = [Session(f"s{i}", float(i), [Turn(list((msgs, other)[i % 2]), "ok")]) for i in range(6)]
    assert pooled_cache_share(both, capacity_blocks=1000, tokens=per_char) > 0.5
    small = pooled_cache_share(both, capacity_blocks=40, tokens=per_char)  # one fits
    assert small < pooled_cache_share(both, capacity_blocks=1000, tokens=per_char)
