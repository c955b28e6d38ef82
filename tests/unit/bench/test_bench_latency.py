"""`agent-cache bench latency` end to end on fakes: its section is written, the rest kept."""

from __future__ import annotations

import json
import time
from pathlib import Path

from agent_cache.bench.latency import SECTION_END, SECTION_START, run_latency_bench
from agent_cache.testing import HashEmbedder


def test_latency_bench_writes_its_own_section(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\nkept\n", encoding="utf-8")
    trap = tmp_path / "trap.jsonl"
    rows = [
        {
            "query": "How do I cancel an order?",
            "stored": "How do I create an order?",
            "label": "refuse",
            "kind": "action",
        },
        {
            "query": "How do I reset my password?",
            "stored": "how do I reset my password",
            "label": "serve",
            "kind": "paraphrase",
        },
    ]
    trap.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    raws = {name: HashEmbedder(dim=32) for name in ("torch", "fp32", "int8")}
    raws["int8"].name = "int8-model"  # another identity: a scope of its own
    result = run_latency_bench(
        out=out,
        data=tmp_path / "absent.jsonl",
        trap=trap,
        sizes=(40,),
        callers=(1, 2),
        pairs=0,
        peer=False,
        raws=raws,
        time_scale=0.01,
        log=lambda _: None,
    )
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\nkept\n")
    assert SECTION_START in text and SECTION_END in text
    assert result["trap"]["fp32"]["changed"] == 0  # identical fakes: identical decisions
    assert result["agreement"]["int8"]["min"] > 0.9999
    cells = {(r["contender"], r["callers"]) for r in result["latency"]["rows"]}
    assert ("fp32|on", 2) in cells and ("fp32|off", 1) in cells and ("int8|on", 1) in cells
    assert not any(c[0].startswith("torch") for c in cells)  # the vector checks only
    assert result["latency"]["exact"]["embedded"] == 0  # exact hits never embed
    stages = {(b["size"], b["callers"]): b for b in result["latency"]["breakdown"]}
    assert set(stages) == {(40, 1), (40, 2)}
    one = stages[(40, 1)]
    assert one["lookups"] > 0
    assert one["calls"]["lookup"] == one["lookups"]  # every lookup timed, once
    assert one["calls"]["embed (caller)"] == one["lookups"]  # distinct queries: all embed
    assert one["calls"]["k-NN pass"] >= 1 and one["calls"]["analysis"] >= 1
    assert one["total"]["lookup"] >= one["total"]["embed (caller)"]
    assert "Where the time goes" in text and "| k-NN pass |" in text
    # every contender searched a filled scope: 40 entries in each of the two scopes
    assert result["latency"]["entries_by_scope"] == [40, 40]


def test_ceiling_is_measured_on_the_model_and_bounds_the_gain() -> None:
    """The ceiling line: cores × (one text alone / one text of a batch), in CPU time."""
    from agent_cache.bench.latency import _ceiling, _render_ceiling

    class Costly(HashEmbedder):
        def embed(self, texts):  # a fixed CPU cost per call plus one per text
            end = time.thread_time() + 0.002 + 0.001 * len(texts)
            while time.thread_time() < end:
                pass
            return super().embed(texts)

    texts = [f"question number {i} about something" for i in range(40)]
    c = _ceiling(Costly(dim=8), texts, cores=2, batch=8)
    assert c["texts"] == 40 and c["batch"] == 8
    assert c["alone_ms"] > c["batched_ms"] > 0  # the per-call cost is shared in a batch
    assert 2.0 < c["ceiling"] < 2 * 3.0 / 1.25 + 0.5  # 2 × (3 ms / 1.25 ms), loosely
    line = "\n".join(_render_ceiling(c, 1, 8))
    assert f"{c['ceiling']:.2f}×" in line and "2 cores" in line
    # with the rest of a lookup (3 ms outside the model, at one caller) the bound shrinks
    cells = [{"callers": 1, "lookups": 10, "total": {"lookup": 0.05, "embed (caller)": 0.02}}]
    whole = 2 * (c["alone_ms"] + 3.0) / (c["batched_ms"] + 3.0)
    line = "\n".join(_render_ceiling(c, 1, 8, cells))
    assert f"**{whole:.2f}×**" in line and whole < c["ceiling"]
    assert _ceiling(Costly(dim=8), texts[:3], cores=2) == {}  # too few texts: no claim
