"""A smoke test of ``agent-cache bench backends`` with tiny sizes: it starts its own
redis-server and Chroma server, measures every backend and writes its section."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cache.bench.backends import SECTION_END, SECTION_START, run_backends_bench

pytestmark = pytest.mark.integration


def test_bench_backends_smoke(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    out.write_text(f"# Benchmarks\n\nkept\n\n{SECTION_START}\nold\n{SECTION_END}\n\nafter\n")
    lines: list[str] = []
    results = run_backends_bench(
        out=out, entries=40, lookups=12, threads=(1, 3), writers=2, writes=15,
        embedder="hash", log=lines.append,
    )  # fmt: skip
    rows = results["lookups"]["rows"]
    assert {(r["backend"], r["mode"], r["threads"]) for r in rows} == {
        (b, m, n) for b in ("sqlite", "chroma", "redis") for m in ("exact", "semantic")
        for n in (1, 3)
    }  # fmt: skip
    assert all(r["n"] == 12 and r["p99_ms"] >= r["p50_ms"] > 0 for r in rows)
    assert all(r["hit_share"] == 1.0 for r in rows if r["mode"] == "exact")
    writes = {r["backend"]: r for r in results["writes"]}
    assert set(writes) == {"sqlite", "redis"}
    for r in writes.values():  # every entry of every writer process arrived, with its vector
        assert (r["entries"], r["missing"], r["exact"], r["vectors"]) == (30, 0, 30, 30)
    # vectors to the Chroma server went in batches, fewer upserts than entries
    assert writes["redis"]["batched"] <= 30 and 0 < writes["redis"]["batches"] < 30
    assert writes["sqlite"]["batches"] == 0
    calls = {r["call"]: r for r in results["lookups"]["breakdown"]}
    assert set(calls) == {"store()", "semantic lookup"}
    assert calls["semantic lookup"]["parts"]["Chroma: `query`"]["calls"] == 1.0
    store, lookup = calls["store()"]["parts"], calls["semantic lookup"]["parts"]
    # one round trip each on Redis: the version checked inside the write / read with the key
    assert store["Redis: version check and write, one script (`set_versioned`)"]["calls"] == 1.0
    assert lookup["Redis: version and record, one pipeline (`get_versioned`)"]["calls"] == 1.0
    assert "Redis: namespace version (`get_counter`)" not in store | lookup
    assert store["Redis round trips"]["calls"] < 1.5  # housekeeping now and then
    assert lookup["Redis round trips"]["calls"] < 1.5
    text = out.read_text()
    assert "Where the time goes on Redis + Chroma server" in text and "Targets" in text
    assert text.startswith("# Benchmarks\n\nkept\n") and text.endswith("\nafter\n")
    assert text.count(SECTION_START) == 1 and "\nold\n" not in text
    assert "| Redis + Chroma server |" in text and "Writes from 2 processes" in text
