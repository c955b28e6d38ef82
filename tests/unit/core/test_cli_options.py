"""``--version``, ``--no-progress`` on every subcommand that shows a progress bar, and the
calibration input documented in ``calibrate --help``."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

import agent_cache
from agent_cache.cli import build_parser, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    try:
        expected = importlib.metadata.version("agent-cache")
    except importlib.metadata.PackageNotFoundError:
        expected = agent_cache.__version__
    assert capsys.readouterr().out.strip() == f"agent-cache {expected}"


def test_version_without_installed_metadata(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"agent-cache {agent_cache.__version__}"


@pytest.mark.parametrize(
    "argv",
    [
        ["warmup", "f.jsonl"],
        ["export", "out.jsonl"],
        ["replay", "log.jsonl"],
        ["calibrate", "pairs.jsonl"],
        ["train-verifier", "pairs.jsonl", "--out", "dir"],
    ],
)
def test_every_command_with_a_bar_takes_no_progress(argv: list[str]) -> None:
    assert build_parser().parse_args([*argv, "--no-progress"]).no_progress is True
    assert build_parser().parse_args(argv).no_progress is False


def test_calibrate_no_progress_draws_no_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "".join(
            json.dumps({"a": f"How do I renew passport number {i}?", "b": f"how do i renew "
                        f"passport number {i}", "label": 1}) + "\n"
            for i in range(60)
        )
    )  # fmt: skip
    out = tmp_path / "cfg.json"
    argv = ["calibrate", str(pairs), "--embedder", "hash", "--out", str(out), "--no-progress"]
    assert main([*argv, "--target-precision", "0.8"]) == 0
    captured = capsys.readouterr()
    assert "it/s" not in captured.err and "%|" not in captured.err
    assert "threshold" in captured.out and json.loads(out.read_text())["target_met"] is True


def test_calibrate_help_documents_the_input(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    text = capsys.readouterr().out
    for needle in ('"a"', '"b"', '"label"', '"namespace"', "JSON object a line", "--no-progress"):
        assert needle in text, needle
    assert "target_met" in text and "allow_unmet_target" in text
