"""Read-only commands (``stats --path``, ``export``) and ``clear`` refuse a path that
holds no cache, and create nothing there: a typo must not make an empty cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.cli import main
from agent_cache.testing import HashEmbedder


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], path: Path) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("agent-cache: error: no cache at")
    assert str(path) in err
    return err


def test_a_typo_path_is_refused_and_nothing_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / ".agent_cahce"
    out = tmp_path / "out.jsonl"
    for argv in (
        ["stats", "--path", str(typo)],
        ["stats", "--path", str(typo), "--json"],
        ["export", str(out), "--path", str(typo), "--no-progress"],
        ["clear", "--path", str(typo), "--yes"],
        # Redis holds the entries: the vectors are the local part, and absent as well
        ["stats", "--path", str(typo), "--redis-url", "redis://127.0.0.1:9"],
    ):
        assert "no such directory" in refused(capsys, argv, typo), argv
        assert not typo.exists(), argv
        assert not out.exists(), argv


def test_an_empty_directory_or_a_file_holds_no_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no exact.sqlite3" in refused(capsys, ["stats", "--path", str(empty)], empty)
    assert list(empty.iterdir()) == []
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    assert "not a directory" in refused(capsys, ["stats", "--path", str(afile)], afile)


def test_a_real_cache_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cache"
    with LayeredCache(path=path, embedder=HashEmbedder(256)) as cache:
        cache.store("what is the capital of france", "Paris")
    before = sorted(p.name for p in path.iterdir())
    assert main(["stats", "--path", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"]["exact"] == 1
    out = tmp_path / "out.jsonl"
    assert main(["export", str(out), "--path", str(path), "--no-progress"]) == 0
    assert "exported 1 entries" in capsys.readouterr().out
    assert sorted(p.name for p in path.iterdir()) == before


def test_bad_options_are_reported_before_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", "--path", str(tmp_path / "nope"), "--timeout", "0"]) == 2
    assert "backend_timeout must be > 0" in capsys.readouterr().err
    assert not (tmp_path / "nope").exists()
