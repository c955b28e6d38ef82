"""``replay --plot`` and ``stats --plot`` on logs whose timestamps are missing, shuffled or
absent: the time axis starts at the earliest lookup, lines without a timestamp never get
the wall clock, and the report is printed before the plot is drawn."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from agent_cache.cli import main
from agent_cache.errors import MissingDependencyError
from agent_cache.stats import Event, StatsRecorder

pytest.importorskip("matplotlib")  # agent-cache[plot]: part of the dev environment

T0 = 1_714_564_800.0  # 2024-05-01T12:00:00Z


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def write_log(path: Path, stamps: list[float | str | None]) -> None:
    lines = []
    for i, ts in enumerate(stamps):
        row: dict[str, Any] = {"prompt": f"question number {i % 4}", "response": f"a{i % 4}"}
        if ts is not None:
            row["timestamp"] = ts
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def replay(tmp_path: Path, log: Path, *extra: str) -> int:
    return main(["replay", str(log), "--embedder", "hash", "--no-progress", *extra])


def test_missing_and_shuffled_timestamps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, png, snap = tmp_path / "log.jsonl", tmp_path / "replay.png", tmp_path / "s.json"
    # the first line has none; the times are out of order; an ISO one among them
    stamps: list[float | str | None] = [None, T0 + 600, T0 + 60, None, "2024-05-01T12:05:00Z"]
    stamps += [T0 + 300, None, T0, T0 + 900, None]
    write_log(log, stamps)
    code = replay(tmp_path, log, "--json", "--plot", str(png), "--save", str(snap))
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["requests"] == len(stamps)
    assert png_size(png) == (1500, 450)
    times = [e[0] for e in json.loads(snap.read_text())["events"]]
    # every lookup is on the log's clock: no wall clock mixed in
    assert len(times) == len(stamps) and min(times) == T0 and max(times) == T0 + 900
    # a line without one takes the time of the line before it (the first one: the
    # first timestamp of the log)
    assert times[0] == T0 + 600 and times[3] == T0 + 60 and times[9] == T0 + 900
    stats_png = tmp_path / "stats.png"
    assert main(["stats", str(snap), "--plot", str(stats_png)]) == 0
    assert "lookups" in capsys.readouterr().out
    assert png_size(stats_png) == (1500, 450)


def test_a_log_without_any_timestamp_is_plotted_in_log_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_cache.plots as plots

    seen: list[dict[str, Any]] = []
    real = plots.plot_stats

    def spy(stats: Any, path: Any = None, **kw: Any) -> Any:
        seen.append(kw)
        fig = real(stats, path, **kw)
        seen[-1]["xlabel"] = fig.axes[0].get_xlabel()
        return fig

    monkeypatch.setattr(plots, "plot_stats", spy)
    log, png = tmp_path / "log.jsonl", tmp_path / "replay.png"
    write_log(log, [None] * 12)
    assert replay(tmp_path, log, "--plot", str(png)) == 0
    assert "requests" in capsys.readouterr().out
    assert png_size(png) == (1500, 450)
    assert seen and seen[0]["axis"] == "order" and seen[0]["xlabel"] == "lookups, in order"


def test_the_report_comes_before_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_matplotlib(*args: Any, **kw: Any) -> Any:
        raise MissingDependencyError("matplotlib", "plot", feature="plots")

    monkeypatch.setattr("agent_cache.plots.plot_stats", no_matplotlib)
    log, snap = tmp_path / "log.jsonl", tmp_path / "s.json"
    write_log(log, [T0 + 5, T0])
    assert replay(tmp_path, log, "--json", "--save", str(snap), "--plot", "x.png") == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["requests"] == 2  # printed before the plot failed
    assert err.strip().splitlines() == [
        "agent-cache: error: matplotlib is required for plots: pip install 'agent-cache[plot]'"
    ]
    assert main(["stats", str(snap), "--json", "--plot", "x.png"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["lookups"] == 2 and "agent-cache[plot]" in err


def test_plot_stats_starts_at_the_earliest_event() -> None:
    from agent_cache.plots import plot_stats

    snap = StatsRecorder().snapshot()
    events = [Event(T0 + dt, "default", "exact", "hit", 1.0) for dt in (300, 0, 120, 60, 240)]
    events += [Event(T0 + dt, "default", "semantic", "miss", 2.0) for dt in (30, 90, 10)]
    import dataclasses

    snap = dataclasses.replace(snap, events=tuple(events))
    fig = plot_stats(snap)  # the first event is not the earliest: no IndexError
    ax = fig.axes[0]
    assert ax.get_xlabel() == "minutes since the first lookup"
    lefts = [p.get_x() for p in ax.patches]
    rights = [p.get_x() + p.get_width() for p in ax.patches]
    assert lefts and min(lefts) >= 0.0 and max(rights) <= 300 / 60.0
    order = plot_stats(snap, axis="order")
    assert order.axes[0].get_xlabel() == "lookups, in order"
    with pytest.raises(ValueError, match="axis"):
        plot_stats(snap, axis="wall")  # type: ignore[arg-type]
