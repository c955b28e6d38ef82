from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cache import DEFAULT_THRESHOLD, ConfigurationError, LayeredCache
from agent_cache.calibrate import allow_unmet_target

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


TOPICS = (
    "password invoice refund shipping account subscription order delivery payment login "
    "profile email address warranty coupon ticket license backup upload download printer "
    "router calendar contacts playlist wallpaper keyboard microphone camera battery"
).split()


def _pairs(path: Path, rows: list[tuple[str, str, int]]) -> Path:
    path.write_text("\n".join(json.dumps({"a": a, "b": b, "label": lab}) for a, b, lab in rows))
    return path


def test_calibrate_writes_a_config_the_cache_reads(tmp_path: Path) -> None:
    # 30 questions asked again in other case and punctuation: hits with any model, enough
    # of them for a lower 95% bound above 0.8
    rows = [(f"How do I change my {t} settings?", f"how do i change my {t} settings", 1)
            for t in TOPICS]  # fmt: skip
    data = _pairs(tmp_path / "pairs.jsonl", rows + ROWS)
    out = tmp_path / "cfg.json"
    res = _cli("calibrate", str(data), "--out", str(out), "--target-precision", "0.8",
               "--no-progress")  # fmt: skip
    assert res.returncode == 0, res.stderr
    cfg = json.loads(out.read_text())
    assert cfg["target_met"] is True and cfg["precision_bound"] >= 0.8
    assert 0.7 <= cfg["threshold"] <= 0.99 and cfg["pairs"] == len(rows) + len(ROWS)
    assert len(cfg["curve"]) == 30
    assert LayeredCache(path=None, config=out).threshold == cfg["threshold"]


def test_calibrate_that_misses_its_target_exits_1(tmp_path: Path) -> None:
    data = _pairs(tmp_path / "pairs.jsonl", ROWS)  # 6 pairs: no bound reaches 0.95
    out = tmp_path / "cfg.json"
    res = _cli("calibrate", str(data), "--out", str(out), "--target-precision", "0.95",
               "--no-progress")  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    last = res.stderr.strip().splitlines()[-1]  # after whatever the model logs
    assert "not met" in last and "best lower 95% bound" in last and "Traceback" not in res.stderr
    cfg = json.loads(out.read_text())
    assert cfg["target_met"] is False and cfg["threshold"] >= DEFAULT_THRESHOLD
    with pytest.raises(ConfigurationError, match="missed its target"):
        LayeredCache(path=None, config=out)
    assert LayeredCache(path=None, config=allow_unmet_target(out)).threshold == cfg["threshold"]


def test_errors_are_one_line_in_a_real_process(tmp_path: Path) -> None:
    typo = tmp_path / ".agent_cahce"
    for args in (
        ("stats", str(tmp_path / "missing.json")),
        ("stats", str(tmp_path)),
        ("stats", "--path", str(typo)),
        ("export", str(tmp_path / "out.jsonl"), "--path", str(typo)),
        ("stats", "--no-such-option"),
    ):
        res = _cli(*args)
        assert res.returncode == 2, (args, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("agent-cache: error: "), res.stderr
    assert not typo.exists() and not (tmp_path / "out.jsonl").exists()
    res = _cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("agent-cache 0."), res.stderr


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
