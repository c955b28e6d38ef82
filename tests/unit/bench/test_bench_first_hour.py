"""``bench first-hour`` parts that run nothing: parsing, the questions, the tables and
the verdicts against the targets, and the CLI wiring."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_cache.bench import first_hour as fh
from agent_cache.cli import main
from agent_cache.errors import ConfigurationError

STATUS = "Name:\tpython\nVmPeak:\t  300000 kB\nVmRSS:\t  102400 kB\nThreads:\t3\n"


def test_proc_status_reads_rss_in_mb_and_threads() -> None:
    assert fh.proc_status(STATUS) == {"rss_mb": 100.0, "threads": 3.0}
    assert fh.proc_status("") == {}


def test_parse_result_takes_the_last_tagged_line() -> None:
    out = f"noise\n{fh.RESULT_TAG}{json.dumps({'a': 1})}\n{fh.RESULT_TAG}{json.dumps({'a': 2})}\n"
    assert fh.parse_result(out) == {"a": 2}
    with pytest.raises(ValueError, match="no result"):
        fh.parse_result("Traceback ...\n")


def test_heavy_packages_normalizes_names() -> None:
    names = ["numpy", "Torch", "nvidia_cublas_cu12", "triton", "torchvision", "onnxruntime"]
    assert fh.heavy_packages(names) == ["nvidia-cublas-cu12", "torch", "torchvision", "triton"]
    assert fh.heavy_packages(["sentence-transformers", "tokenizers", "nvidia"]) == []


def test_questions_are_distinct_and_paraphrases_unseen() -> None:
    stored = fh.questions(1000)
    assert len(set(stored)) == 1000
    asked = fh.paraphrases(200, 1000)
    assert len(set(asked)) == 200 and not set(asked) & set(stored)
    assert len(fh.paraphrases(10, 50)) == 10
    with pytest.raises(ValueError):
        fh.questions(1001)


def test_pct_and_median() -> None:
    assert fh.pct([], 50) == 0.0
    assert fh.pct([3.0, 1.0, 2.0], 50) == 2.0
    assert fh.pct([0.0, 10.0], 95) == pytest.approx(9.5)
    assert fh.median([1.0, 5.0, 2.0]) == 2.0


def _first(first_s: float, warm: bool) -> dict[str, Any]:
    return {
        "warm": warm,
        "import_s": 0.4,
        "construct_s": 0.001,
        "warm_s": 0.9 if warm else 0.0,
        "store_s": first_s / 2,
        "lookup_s": first_s / 2,
        "first_s": first_s,
        "hit": True,
    }


def _results(*, growth: float = 2.0, end_threads: float = 3.0) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [
        {"after": "interpreter start", "rss_mb": 10.0, "threads": 1.0},
        {"after": "import agent_cache", "rss_mb": 40.0, "threads": 2.0, "py_threads": 1},
        {"after": "import onnxruntime", "rss_mb": 60.0, "threads": 3.0, "py_threads": 1},
    ]
    for n, rss in ((1, 160.0), (10, 161.0), (100, 160.0 + growth)):
        rows.append(
            {"after": n, "rss_mb": rss, "threads": end_threads, "py_threads": 1, "shared": 0}
        )
    install_rows: list[dict[str, Any]] = [
        {
            "label": label,
            "install_s": 20.0,
            "packages": 30,
            "site_mb": 150.0,
            "heavy": [],
            "largest": [("onnxruntime", 60.0), ("numpy", 40.0)],
            "pip": "23.2.1",
        }
        for label in ("agent-cache", "agent-cache[langchain]", "agent-cache[llamaindex]")
    ]
    install_rows.append(
        {
            "label": "agent-cache[all]",
            "heavy": ["torch"],
            "required_by": {"torch": ["some-package"]},
            "error": "would install torch (not installed)",
        }
    )
    return {
        "environment": {
            "date": "2026-12-02 06:00 UTC",
            "cpus": 2,
            "cpu": "AMD EPYC",
            "platform": "Linux",
            "python": "3.11.7",
            "agent-cache": "0.1.0",
        },
        "load": [("start", 1.0), ("end", 1.5)],
        "elapsed_s": 300.0,
        "install": {
            "wheel": "agent_cache-0.1.0-py3-none-any.whl",
            "wheel_mb": 0.5,
            "wheel_s": 9.0,
            "rows": install_rows,
        },
        "caches": {"rows": rows, "hits": 100, "caches": 100, "import_s": 0.4},
        "first": {
            "warm": [_first(0.03, True), _first(0.04, True), _first(0.2, True)],
            "cold": [_first(0.8, False), _first(0.9, False), _first(1.0, False)],
        },
        "embed": {
            "calls": 200,
            "p50_ms": {"onnx": 3.0, "torch": 9.0, "torch-1": 6.0},
            "p95_ms": {"onnx": 4.0, "torch": 12.0, "torch-1": 8.0},
            "threads": {"onnx": 1, "torch": 2},
            "notes": [],
        },
        "lookup": {
            "entries": 1000,
            "lookups": 200,
            "fill_s": 4.0,
            "p50_ms": 7.5,
            "p95_ms": 11.0,
            "hits": 190,
        },
    }


def test_render_is_one_section_with_every_table() -> None:
    text = fh.render(_results())
    assert text.startswith(fh.SECTION_START) and text.rstrip().endswith(fh.SECTION_END)
    assert "| `agent-cache` | 20.0 | 30 | 150 | none | onnxruntime 60, numpy 40 |" in text
    assert "`agent-cache[all]` would bring torch: required by torch ← some-package." in text
    assert "| 100 caches closed | 162.0 | 3 | 1 | 0 |" in text
    assert "| with `warm()` | 400 | 1.0 | 900 | 20.0 | 20.0 | **40.0** |" in text  # medians
    assert "| torch, as it comes (2 threads) / ONNX (p50) | 3.00× | |" in text
    assert "| torch, 1 thread / ONNX (p50) | 2.00× | |" in text
    assert "with a warm pip cache" in text.replace("**", "")
    for line in text.splitlines():  # every table row has as many cells as its header
        assert not line.startswith("|") or line.count("|") >= 4


def test_verdicts_say_which_targets_are_met() -> None:
    good = " ".join(fh.verdicts(_results()))
    assert "`nvidia-*` package in any of the four installs: **not met** (agent-cache[all])" in good
    assert "+2.0 MB (target < 50 MB): met" in good
    assert "at the start 3 " in good and "once per process): met." in good
    assert "40.0 ms (target < 150 ms): met" in good
    assert "7.50 ms (target ~8 ms): met" in good
    assert "the busy machine" not in good and "slower per question" not in good
    slow = _results()
    slow["lookup"]["p50_ms"] = 40.0
    slow["embed"]["p50_ms"].update(onnx=20.0, torch=200.0)
    slow["embed"]["p50_ms"]["torch-1"] = 50.0
    said = " ".join(fh.verdicts(slow))
    assert "40.00 ms (target ~8 ms): **not met**. One lookup embeds one question" in said
    assert "took 20.0 ms p50" in said and "load up to 1.5 on 2 CPUs" in said
    assert "torch on its default 2 threads is 4.0x slower per question" in said
    bad = " ".join(fh.verdicts(_results(growth=80.0, end_threads=5.0)))
    assert "+80.0 MB (target < 50 MB): **not met**" in bad
    assert "once per process): **not met**." in bad


def test_render_without_the_install_part() -> None:
    results = _results()
    results["install"] = None
    text = fh.render(results)
    assert "not measured in this run (`--skip-install`)" in text
    assert "bench first-hour --skip-install`" in text
    assert "four installs" not in text


def test_cli_runs_the_suite(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(fh, "run_first_hour_bench", lambda **kw: seen.append(kw) or {})
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "first-hour", "--skip-install", "--runs", "3"]) == 0
    assert seen == [{"out": Path("benchmarks.md"), "skip_install": True, "runs": 3}]


def test_install_part_needs_the_repository(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="--skip-install"):
        fh.run_first_hour_bench(out=tmp_path / "b.md", repo=tmp_path)
