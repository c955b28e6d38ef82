from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_cache import ConfigurationError, LayeredCache
from agent_cache.calibrate import (
    CurvePoint,
    Pair,
    curve,
    load_pairs,
    pick,
    pick_threshold,
    question_split,
    score_queries,
    served,
)
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


def test_scored_queries_refuse_traps_and_curve_is_monotone() -> None:
    queries = score_queries(PAIRS, HashEmbedder())
    assert sum(q.label for q in queries) == 3
    by_query = {q.query: q for q in queries}
    # the order-number and negation pairs never reach a hit: the analysis refuses them
    for trap in ("status of order 12346", "can't i cancel my plan online"):
        assert served(by_query[trap], 0.0) is None
        assert served(by_query[trap], 0.0, "static") is not None  # the static design serves
    points = curve(queries, [0.0, 0.5, 0.99])
    assert points[0].hits >= points[1].hits >= points[2].hits
    assert all(0.0 <= p.precision <= 1.0 and 0.0 <= p.hit_rate <= 1.0 for p in points)
    assert all(p.precision_lower <= p.precision for p in points)


def test_pick_uses_the_lower_bound_not_the_point_estimate() -> None:
    # 0.85 reads 0.93 precision on 30 hits; 0.90 reads 0.94 on 500: only the latter's
    # lower bound clears 0.9 (the 71-hit point estimate is the trap)
    from agent_cache.errorbound import wilson_lower

    def point(t: float, hits: int, correct: int) -> CurvePoint:
        return CurvePoint(
            t,
            hits,
            correct,
            hits - correct,
            0,
            0.5,
            correct / hits,
            correct / hits,
            wilson_lower(correct, hits),
        )

    pts = [
        point(0.80, 1000, 850),
        point(0.85, 30, 28),
        point(0.90, 500, 470),
        point(0.95, 200, 196),
    ]
    assert pick(pts, 0.9).threshold == 0.90  # type: ignore[union-attr]
    assert pick(pts, 0.99) is None
    assert pick_threshold(pts, 0.99).threshold == 0.95  # the best bound when none meets it


def test_question_split_keeps_duplicates_on_one_side() -> None:
    pairs = [Pair(f"q{i} a", f"q{i} b", i % 2) for i in range(200)]
    pairs += [Pair("q3 b", "q7 a", 1)]  # links two groups: they must land together
    left, right = question_split(pairs, seed=3)
    assert left and right
    texts_left = {t for p in left for t in (p.a, p.b)}
    texts_right = {t for p in right for t in (p.a, p.b)}
    assert not texts_left & texts_right
    assert ({"q3 b", "q7 a"} <= texts_left) or ({"q3 b", "q7 a"} <= texts_right)


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
