"""`agent-cache bench semantic` end to end on generated pairs and a fake embedder."""

from __future__ import annotations

import json
from pathlib import Path

from agent_cache.bench.semantic import SECTION_END, SECTION_START, run_semantic_bench
from agent_cache.testing import HashEmbedder

TOPICS = ["cat", "dog", "car", "tax return", "loan", "phone", "visa", "job", "python", "diet"]


def _pairs(path: Path) -> Path:
    rows = []
    for i in range(300):
        t = f"{TOPICS[i % len(TOPICS)]} {i}"
        rows += [
            {
                "a": f"How do I care for my {t}?",
                "b": f"How should I look after my {t}?",
                "label": 1,
            },
            {"a": f"How do I care for my {t}?", "b": f"How do I sell my {t}?", "label": 0},
        ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_semantic_bench_writes_its_section_and_plot(tmp_path: Path) -> None:
    data = _pairs(tmp_path / "pairs.jsonl")
    traps = tmp_path / "traps.jsonl"
    traps.write_text(
        json.dumps(
            {
                "query": "Is Rome bigger than Madrid?",
                "stored": "Is Madrid bigger than Rome?",
                "label": "refuse",
                "kind": "order",
            }
        )
        + "\n"
        + json.dumps(
            {
                "query": "How do I reset my pasword?",
                "stored": "How do I reset my password?",
                "label": "serve",
                "kind": "typo",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "docs" / "benchmarks.md"
    result = run_semantic_bench(
        out=out,
        data=data,
        pairs=200,
        calibration_pairs=200,
        peer=False,
        traps=traps,
        embedder=HashEmbedder(),
        log=lambda _m: None,
        smollm2=False,
        judges={"always yes": lambda _prompt: "yes"},
    )
    text = out.read_text(encoding="utf-8")
    assert text.count(SECTION_START) == 1 and text.count(SECTION_END) == 1
    assert "| static |" in text and "| ours |" in text
    ours = result["traps"]["contenders"]["ours (default)"]
    assert ours["by_kind"]["refuse:order"] == [0, 1]  # the swapped pair is refused
    assert ours["by_kind"]["serve:typo"] == [1, 1]  # the typo is served
    png = (tmp_path / "docs" / "img" / "semantic.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert result["error_bound"]["windows"] and result["latency"]["default"]["p50"] > 0
    kinds = result["kinds"]["contenders"]
    assert set(kinds) == {"judge off (default)", "judge: always yes"}
    off = kinds["judge off (default)"]["by_kind"]
    assert off["refuse:order"][1] >= 1 and off["refuse:suite:grammar"][1] > 0
    judged = kinds["judge: always yes"]["judge"]
    assert judged["seen"] > 0 and judged["asked"] <= 0.2 * judged["seen"] + 1
    assert "### By kind, and the request judge" in text and "| judge: always yes |" in text
