"""Fine-tune the verifier for a few steps on a tiny generated file; load it as a reranker."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("datasets")
pytest.importorskip("accelerate")

from agent_cache.rerankers import CrossEncoderReranker
from agent_cache.verifier import train_verifier

pytestmark = pytest.mark.integration

TOPICS = ["cat", "dog", "car", "tax return", "loan", "phone", "visa", "job", "python", "diet"]


def _write_pairs(path: Path) -> None:
    rows = []
    for t in TOPICS:  # 40 pairs, half duplicates
        rows += [
            {
                "a": f"How do I care for a {t}?",
                "b": f"What is the best way to look after a {t}?",
                "label": 1,
            },
            {"a": f"How do I care for a {t}?", "b": f"How do I sell a {t}?", "label": 0},
            {"a": f"What does a {t} cost?", "b": f"How much is a {t}?", "label": 1},
            {"a": f"What does a {t} cost?", "b": f"Where can I buy a {t}?", "label": 0},
        ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")


@pytest.mark.timeout(300)
def test_train_save_and_load_as_reranker(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    _write_pairs(data)
    started = time.perf_counter()
    said: list[str] = []
    out = train_verifier(
        data,
        tmp_path / "verifier",
        limit=None,
        exclude={"how much is a cat?"},
        max_length=32,
        batch_size=8,
        max_steps=3,
        log=said.append,
    )
    # 40 pairs leave too few held-out candidates for a combiner: it says so, and the model
    # is saved as a veto-only verifier
    assert any("no combiner" in line for line in said)
    assert time.perf_counter() - started < 240  # ~25 s on 2 idle cores
    assert out == tmp_path / "verifier" and (out / "config.json").is_file()
    reranker = CrossEncoderReranker(str(out))
    assert reranker.combiner is None
    scores = reranker.score("How much is a dog?", ["What does a dog cost?", "How do I sell a dog?"])
    assert len(scores) == 2
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert reranker.score("How much is a dog?", []) == []
