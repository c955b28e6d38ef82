from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_cache import ConfigurationError, LayeredCache
from agent_cache.calibrate import Pair, curve, evaluate_pairs, load_pairs, pick_threshold
from agent_cache.cli import main
from agent_cache.testing import HashEmbedder

PAIRS = [
    Pair("how do i reset my password", "how can i reset my password", 1),
    Pair("what is the capital of france", "which city is the capital of france", 1),
    Pair("status of order 12345", "status of order 12346", 0),
    Pair("how do i bake bread", "how do i bake a cake", 0),
    Pair("best laptop for students", "which laptop is best for students", 1),
    Pair("can i cancel my plan online", "can't i cancel my plan online", 0),
]


def test_clusters_guards_and_curve() -> None:
    scores, verdicts, positives = evaluate_pairs(PAIRS, HashEmbedder())
    assert positives == 3
    # the order-number and negation pairs never reach a hit: the guards refuse them
    assert verdicts[2] in ("none", "correct") and verdicts[5] in ("none", "correct")
    points = curve(scores, verdicts, [p.label for p in PAIRS], [0.0, 0.5, 0.99])
    assert points[0].hits >= points[1].hits >= points[2].hits
    assert all(0.0 <= p.precision <= 1.0 and 0.0 <= p.hit_rate <= 1.0 for p in points)
    _, verdicts_ng, _ = evaluate_pairs(PAIRS, HashEmbedder(), guards=False)
    assert verdicts_ng.count("wrong") + verdicts_ng.count("unknown") >= verdicts.count("wrong")


def test_pick_threshold_is_the_lowest_that_keeps_precision() -> None:
    from agent_cache.calibrate import CurvePoint

    pts = [
        CurvePoint(t, 100, int(100 * p), 100 - int(100 * p), 0, 0.5, p, p)
        for t, p in ((0.8, 0.7), (0.85, 0.88), (0.9, 0.93), (0.95, 0.97))
    ]
    assert pick_threshold(pts, 0.9).threshold == 0.9
    assert pick_threshold(pts, 0.85).threshold == 0.85


def test_load_pairs_validates(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": "x", "b": "y", "label": 3}\n')
    with pytest.raises(ConfigurationError, match="label"):
        load_pairs(bad)
    with pytest.raises(ConfigurationError):
        load_pairs(tmp_path / "missing.jsonl")


def test_calibrated_config_is_read_by_the_cache(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"threshold": 0.93, "thresholds": {"code": 0.98}}))
    cache = LayeredCache(path=None, config=cfg, embedder=HashEmbedder())
    assert cache.threshold_for("default") == 0.93 and cache.threshold_for("code") == 0.98
    assert LayeredCache(path=None, config=cfg, threshold=0.9).threshold == 0.9
    cfg.write_text("[1, 2]")
    with pytest.raises(ConfigurationError):
        LayeredCache(path=None, config=cfg)


def test_warmup_cli_bulk_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "warm.jsonl"
    src.write_text(
        "\n".join(json.dumps({"prompt": f"question {i}", "response": f"a{i}"}) for i in range(5))
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    assert main(["warmup", str(bad), "--path", str(tmp_path / "c")]) == 2
    assert "need 'prompt' and 'response'" in capsys.readouterr().err
