from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cache import LayeredCache

pytestmark = pytest.mark.integration

ROWS = [
    ("How do I reset my password?", "How can I reset my password?", 1),
    ("What is the capital of France?", "What's the capital city of France?", 1),
    ("How do I learn Python quickly?", "What is the fastest way to learn Python?", 1),
    ("What is the status of order 12345?", "What is the status of order 12346?", 0),
    ("How do I bake bread?", "How do I bake a chocolate cake?", 0),
    ("Is coffee bad for you?", "Is coffee good for your health?", 0),
]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_cache.cli", *args],
        text=True,
        capture_output=True,
        timeout=600,
    )


def test_calibrate_writes_a_config_the_cache_reads(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text("\n".join(json.dumps({"a": a, "b": b, "label": lab}) for a, b, lab in ROWS))
    out = tmp_path / "cfg.json"
    res = _cli("calibrate", str(data), "--out", str(out), "--target-precision", "0.8")
    assert res.returncode == 0, res.stderr
    cfg = json.loads(out.read_text())
    assert 0.7 <= cfg["threshold"] <= 0.99 and cfg["pairs"] == len(ROWS)
    assert len(cfg["curve"]) == 30
    assert LayeredCache(path=None, config=out).threshold == cfg["threshold"]


def test_warmup_then_lookup(tmp_path: Path) -> None:
    src = tmp_path / "warm.jsonl"
    src.write_text(
        "\n".join(
            json.dumps({"prompt": a, "response": f"answer {i}"}) for i, (a, _, _) in enumerate(ROWS)
        )
    )
    res = _cli("warmup", str(src), "--path", str(tmp_path / "cache"))
    assert res.returncode == 0 and "stored 6 entries" in res.stdout, res.stderr
    with LayeredCache(path=tmp_path / "cache") as cache:
        hit = cache.lookup("How can I reset my password?")
        assert hit is not None and hit.response == "answer 0"


def test_bad_input_file_is_a_clear_error(tmp_path: Path) -> None:
    res = _cli("calibrate", str(tmp_path / "nope.jsonl"))
    assert res.returncode == 2 and "cannot read labeled pairs" in res.stderr
