"""``calibrate`` that misses its target precision exits 1, writes no threshold looser than
the default, marks the file ``"target_met": false``; ``LayeredCache(config=...)`` refuses
such a file unless it is passed through ``allow_unmet_target``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_cache import DEFAULT_THRESHOLD, ConfigurationError, LayeredCache
from agent_cache.calibrate import allow_unmet_target, calibrate
from agent_cache.cli import main
from agent_cache.testing import HashEmbedder

TOPICS = "password invoice refund shipping account subscription order delivery payment login "
TOPICS += "profile email address warranty coupon ticket license backup upload download"


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    """20 paraphrases at cosine 0.89 (hash embedder): every one a correct hit up to 0.89,
    none above; the best lower 95% bound is 0.839, reached at 0.89 (looser than 0.92)."""
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        "".join(
            json.dumps({"a": f"how do i change my {t} settings today",
                        "b": f"how do i change my {t} settings today please quickly",
                        "label": 1}) + "\n"
            for t in TOPICS.split()
        ),
        encoding="utf-8",
    )  # fmt: skip
    return path


def calibrate_cli(pairs: Path, out: Path, target: str) -> int:
    return main(["calibrate", str(pairs), "--embedder", "hash", "--out", str(out),
                 "--target-precision", target, "--no-progress"])  # fmt: skip


def test_a_missed_target_exits_1_and_loosens_nothing(
    pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cfg.json"
    assert calibrate_cli(pairs, out, "0.95") == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "0.839" in lines[0] and "not met" in lines[0], captured.err
    assert captured.out == ""
    cfg = json.loads(out.read_text())
    assert cfg["target_met"] is False
    assert cfg["threshold"] >= DEFAULT_THRESHOLD  # the best bound was at 0.89: not written
    assert cfg["best_threshold"] == 0.89 and cfg["best_precision_bound"] == pytest.approx(
        0.839, abs=1e-3
    )
    assert cfg["chosen"]["threshold"] == cfg["threshold"]


def test_the_cache_refuses_an_unmet_config_unless_told(
    pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cfg.json"
    assert calibrate_cli(pairs, out, "0.95") == 1
    with pytest.raises(ConfigurationError, match="allow_unmet_target") as err:
        LayeredCache(path=None, config=out, embedder=HashEmbedder())
    assert str(out) in str(err.value) and "0.95" in str(err.value)
    cache = LayeredCache(path=None, config=allow_unmet_target(out), embedder=HashEmbedder())
    assert cache.threshold == json.loads(out.read_text())["threshold"]
    capsys.readouterr()
    log = tmp_path / "log.jsonl"
    log.write_text('{"prompt": "a", "response": "b"}\n')
    assert main(["replay", str(log), "--embedder", "hash", "--config", str(out)]) == 2
    err_line = capsys.readouterr().err.strip()
    assert len(err_line.splitlines()) == 1 and "missed its target" in err_line


def test_a_met_target_is_written_and_used(
    pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cfg.json"
    assert calibrate_cli(pairs, out, "0.8") == 0
    assert "promised" in capsys.readouterr().out
    cfg = json.loads(out.read_text())
    assert cfg["target_met"] is True and cfg["threshold"] == 0.70  # the lowest that meets it
    assert LayeredCache(path=None, config=out, embedder=HashEmbedder()).threshold == 0.70


def test_the_library_never_returns_a_looser_threshold_for_a_missed_target(pairs: Path) -> None:
    result = calibrate(pairs, HashEmbedder(256), target_precision=0.95)
    assert result["target_met"] is False and result["threshold"] == DEFAULT_THRESHOLD
    assert result["precision_bound"] == 0.0  # nothing is served at 0.92 on these pairs
