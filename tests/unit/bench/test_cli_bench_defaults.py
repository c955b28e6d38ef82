"""``agent-cache bench`` defaults work outside the repository: no default reaches into
``../shared``, ``tests/`` or ``docs/`` from the installed package; a file a suite needs
and does not have is a one-line error naming it and the option to pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agent_cache
from agent_cache.cli import main

SUITES = {
    "core": "agent_cache.bench.core.run_core_bench",
    "semantic": "agent_cache.bench.semantic.run_semantic_bench",
    "latency": "agent_cache.bench.latency.run_latency_bench",
    "backends": "agent_cache.bench.backends.run_backends_bench",
    "prefix": "agent_cache.bench.prefix.run_prefix_bench",
}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Each suite's entry point records its arguments instead of running; the cwd is an
    empty directory (an installed package, run from anywhere)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    for suite, target in SUITES.items():

        def record(suite: str = suite, **kw: Any) -> dict[str, Any]:
            seen.append((suite, kw))
            return {}

        monkeypatch.setattr(target, record)
    monkeypatch.chdir(tmp_path)
    return seen


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("agent-cache: error: "), err
    return err


def test_out_defaults_to_the_current_directory(
    calls: list[tuple[str, dict[str, Any]]], tmp_path: Path
) -> None:
    assert main(["bench", "core"]) == 0
    assert calls[-1][1]["out"] == Path("benchmarks.md")  # not docs/ of a repository
    assert calls[-1][1]["data"] is None  # generated questions; no ../shared lookup
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text("# Benchmarks\n")
    assert main(["bench", "prefix"]) == 0  # at a repository root: its file
    assert calls[-1][1]["out"] == Path("docs") / "benchmarks.md"
    assert main(["bench", "prefix", "--out", "x.md"]) == 0
    assert calls[-1][1]["out"] == Path("x.md")


def test_semantic_names_the_missing_files(
    calls: list[tuple[str, dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "semantic"]) == 2
    assert "--data" in one_line(capsys)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"a": "x", "b": "y", "label": 1}\n')
    assert main(["bench", "semantic", "--data", str(pairs)]) == 2
    err = one_line(capsys)
    assert "tests/data/trap_pairs.jsonl" in err and "--trap" in err
    traps = tmp_path / "traps.jsonl"
    traps.write_text("{}\n")
    assert main(["bench", "semantic", "--data", str(pairs), "--trap", str(traps)]) == 0
    assert calls == [("semantic", calls[0][1])]
    assert calls[0][1]["data"] == pairs and calls[0][1]["traps"] == traps


@pytest.mark.parametrize("suite", ["core", "semantic", "latency", "backends"])
def test_a_missing_given_file_is_one_line(
    calls: list[tuple[str, dict[str, Any]]], suite: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", suite, "--data", "nope.jsonl"]) == 2
    assert "--data nope.jsonl: no such file" in one_line(capsys)
    assert calls == []


def test_latency_trap_default_is_the_cwd_only(
    calls: list[tuple[str, dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_cache.bench.core import default_trap_path

    assert default_trap_path() is None  # the repository's file is not found from here
    assert main(["bench", "latency", "--trap", "nope.jsonl"]) == 2
    assert "--trap nope.jsonl" in one_line(capsys)
    (tmp_path / "tests" / "data").mkdir(parents=True)
    (tmp_path / "tests" / "data" / "trap_pairs.jsonl").write_text("{}\n")
    assert default_trap_path() == Path("tests") / "data" / "trap_pairs.jsonl"


def test_no_source_file_points_at_shared() -> None:
    root = Path(agent_cache.__file__).resolve().parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "../shared" in (text := p.read_text(encoding="utf-8")) or "shared/data" in text
    ]
    assert offenders == []
