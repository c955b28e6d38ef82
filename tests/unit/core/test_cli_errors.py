"""Every command-line error is one line on stderr and exit status 2, never a traceback;
``--debug`` (or ``AGENT_CACHE_DEBUG=1``) shows the traceback of a genuine bug."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_cache.cli import main


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("agent-cache: error: "), err
    assert "Traceback" not in err
    return lines[0]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_missing_stats_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "stats", str(tmp_path / "missing.json"))
    line = one_line_error(code, err)
    assert "missing.json" in line and "No such file" in line


def test_a_directory_as_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["stats", str(tmp_path)],
        ["replay", str(tmp_path), "--embedder", "hash", "--no-progress"],
        ["warmup", str(tmp_path), "--path", str(tmp_path / "c"), "--no-progress"],
    ):
        code, _, err = run(capsys, *argv)
        assert str(tmp_path) in one_line_error(code, err), argv


@pytest.mark.parametrize(
    "text",
    ["[1, 2]", '{"answer": 42}', '"a string"', "{not json", '{"lookups": 1}'],
)
def test_stats_refuses_what_is_not_a_stats_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = tmp_path / "other.json"
    path.write_text(text, encoding="utf-8")
    code, _, err = run(capsys, "stats", str(path))
    assert "other.json" in one_line_error(code, err)


def test_a_broken_snapshot_timeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agent_cache.stats import StatsRecorder

    path = tmp_path / "s.json"
    StatsRecorder().snapshot().save(path)
    data = json.loads(path.read_text())
    data["events"] = [["noon", "default", "exact", "hit"]]  # 4 fields, and no number
    path.write_text(json.dumps(data))
    code, _, err = run(capsys, "stats", str(path))
    assert "malformed stats snapshot" in one_line_error(code, err)


def test_malformed_jsonl_and_missing_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"prompt": "a", "response": "b"}\n{"prompt": \n', encoding="utf-8")
    code, _, err = run(capsys, "replay", str(log), "--embedder", "hash", "--no-progress")
    assert "log.jsonl:2" in one_line_error(code, err)
    code, _, err = run(capsys, "replay", str(tmp_path / "nope.jsonl"), "--embedder", "hash")
    assert "nope.jsonl" in one_line_error(code, err)
    good = tmp_path / "good.jsonl"
    good.write_text('{"prompt": "a", "response": "b"}\n', encoding="utf-8")
    code, _, err = run(
        capsys, "replay", str(good), "--embedder", "hash", "--prices", str(tmp_path / "p.json")
    )
    assert "p.json" in one_line_error(code, err)
    bad_utf8 = tmp_path / "latin1.jsonl"
    bad_utf8.write_bytes(b'{"prompt": "caf\xe9", "response": "b"}\n')
    code, _, err = run(capsys, "warmup", str(bad_utf8), "--path", str(tmp_path / "c"))
    one_line_error(code, err)


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["stats", "--no-such-option"])
    _, err = capsys.readouterr()
    assert "--no-such-option" in one_line_error(int(str(exit_.value.code)), err)


def test_debug_shows_the_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "missing.json")
    with pytest.raises(FileNotFoundError):
        main(["--debug", "stats", missing])
    monkeypatch.setenv("AGENT_CACHE_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        main(["stats", missing])
    monkeypatch.setenv("AGENT_CACHE_DEBUG", "0")
    assert main(["stats", missing]) == 2


def test_a_bug_is_not_swallowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # only the project's errors and bad input become one line: a TypeError stays visible
    def broken(path: str) -> None:
        raise TypeError("a genuine bug")

    monkeypatch.setattr("agent_cache.cli._load_stats", broken)
    with pytest.raises(TypeError, match="genuine bug"):
        main(["stats", str(tmp_path / "s.json")])
