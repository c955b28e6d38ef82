"""Replay of request logs, the CLI around it (replay, stats, warmup) and the plots."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from agent_cache import LayeredCache, TtlPolicy
from agent_cache.cli import main
from agent_cache.replay import parse_record, read_log, replay
from agent_cache.testing import FakeClock, HashEmbedder

FAQ = [
    "how do I reset my account password",
    "which payment methods do you accept",
    "where is your warehouse located",
    "can I return shoes after thirty days",
    "do you ship internationally to canada",
]


def make(**kw: Any) -> LayeredCache:
    kw.setdefault("embedder", HashEmbedder(256))
    kw.setdefault("clock", FakeClock())
    kw.setdefault("ttl_policy", TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()))
    return LayeredCache(path=None, **kw)


def generated_log(path: Path, seed: int = 7) -> dict[str, int]:
    """FAQ questions asked 1-4 times each and order-status questions that differ only in
    the order number, shuffled; returns the repeats it contains."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    repeats = 0
    for q in FAQ:
        n = rng.randint(1, 4)
        repeats += n - 1
        rows += [
            {
                "prompt": q,
                "response": f"The answer to: {q}.",
                "model": "m",
                "tokens": {"prompt_tokens": 40, "completion_tokens": 10},
            }
            for _ in range(n)
        ]
    for order in range(1001, 1013):
        rows.append(
            {
                "prompt": f"what is the status of order {order}",
                "response": f"Order {order} shipped on day {order - 1000}.",
                "model": "m",
                "tokens": {"prompt_tokens": 40, "completion_tokens": 10},
            }
        )
    rng.shuffle(rows)
    for i, row in enumerate(rows):
        row["timestamp"] = 1_700_000_000 + 60 * i
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {"requests": len(rows), "repeats": repeats}


def test_replay_reports_exactly_the_repeats_and_no_order_number_hit(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    known = generated_log(log)
    report = replay(read_log(log), make())
    d = report.as_dict()
    assert d["requests"] == known["requests"]
    assert d["exact_hits"] == known["repeats"] and d["template_hits"] == 0
    assert d["semantic_hits"] == 0  # order 1001 vs 1002: refused, never served
    assert d["refused"].get("numbers", 0) > 0
    assert d["misses"] == known["requests"] - known["repeats"]
    assert d["tokens_saved"] == 50 * known["repeats"]
    assert d["tokens_saved_by_kind"] == {
        "input": 40 * known["repeats"],
        "output": 10 * known["repeats"],
    }
    assert d["estimated_wrong_hits"] == 0 and d["estimated_wrong_rate"] == 0.0
    assert report.stats is not None and len(report.stats.events) == known["requests"]
    assert report.stats.events[0].t == 1_700_000_000  # the log's time, for the plots


def test_wrong_hits_are_estimated_by_meaning_and_live_mode_keeps_the_first(
    tmp_path: Path,
) -> None:
    rows = [
        {"prompt": "is the store open on sunday", "response": "Yes, it is open on Sunday."},
        {"prompt": "is the store open on sunday", "response": "No, it is closed on Sunday."},
        {"prompt": "is the store open on sunday", "response": "No, it is closed on Sunday."},
    ]
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    live = replay(read_log(log), make(), mode="live").as_dict()
    assert live["exact_hits"] == 2 and live["estimated_wrong_hits"] == 2
    shadow = replay(read_log(log), make(), mode="shadow").as_dict()  # stores every answer
    assert shadow["exact_hits"] == 2 and shadow["estimated_wrong_hits"] == 1
    assert shadow["wrong_by_layer"] == {"exact": 1}


def test_openai_style_records_use_the_last_user_turn_and_scope() -> None:
    rec = parse_record({
        "request": {"model": "gpt-4o-mini", "temperature": 0, "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "What is RAG?"}]}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "Retrieval."}}],
                     "usage": {"prompt_tokens": 12, "completion_tokens": 3}},
        "timestamp": "2024-05-01T12:00:00Z", "namespace": "faq",
    })  # fmt: skip
    assert rec.prompt == "What is RAG?" and rec.response == "Retrieval."
    assert rec.context == [{"role": "system", "content": "Be brief."}]
    assert rec.usage is not None and (rec.usage.input, rec.usage.output) == (12, 3)
    assert rec.namespace == "faq" and rec.timestamp == 1714564800.0
    assert "gpt-4o-mini" in rec.llm_string and "temperature" in rec.llm_string


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_cli_replay_json_plot_save_and_stats(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("matplotlib")
    log = tmp_path / "log.jsonl"
    known = generated_log(log)
    png, snap = tmp_path / "replay.png", tmp_path / "stats.json"
    assert main(["replay", str(log), "--embedder", "hash", "--json", "--no-progress",
                 "--plot", str(png), "--save", str(snap)]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    for key in ("requests", "exact_hits", "template_hits", "semantic_hits", "misses",
                "tokens_saved", "estimated_wrong_hits"):  # fmt: skip
        assert key in out
    assert out["exact_hits"] == known["repeats"] and out["semantic_hits"] == 0
    assert png_size(png) == (1500, 450)
    stats_png = tmp_path / "stats.png"
    assert main(["stats", str(snap), "--plot", str(stats_png), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["hits"]["exact"] == known["repeats"] and st["lookups"] == known["requests"]
    assert png_size(stats_png) == (1500, 450)
    assert main(["stats", str(snap)]) == 0
    assert "per namespace" in capsys.readouterr().out


def test_cli_warmup_is_resumable(tmp_path: Path, capsys: Any) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"question": q, "answer": f"a {i}"}) + "\n"
                             for i, q in enumerate(FAQ[:3])), encoding="utf-8")  # fmt: skip
    path = tmp_path / "cache"
    args = ["warmup", str(pairs), "--path", str(path), "--embedder", "hash", "--no-progress"]
    assert main(args) == 0
    assert "stored 3 entries" in capsys.readouterr().out
    with pairs.open("a", encoding="utf-8") as fh:  # the run was cut short: two more lines
        for q in FAQ[3:]:
            fh.write(json.dumps({"prompt": q, "response": "more"}) + "\n")
    assert main(args) == 0
    assert "stored 2 entries" in (out := capsys.readouterr().out) and "3 already there" in out
    with LayeredCache(path=path, embedder=HashEmbedder(256)) as cache:
        assert cache.entry_counts() == {"exact": 5, "semantic": 5}
        assert all(cache.contains(q) for q in FAQ)
