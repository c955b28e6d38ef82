"""`agent-cache bench core` on tiny sizes with the HashEmbedder: fast, no model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent_cache.bench.core import SECTION_END, SECTION_START, run_core_bench, write_section
from agent_cache.testing import HashEmbedder

pytest.importorskip("chromadb")

_TOPICS = ["python", "java", "rust", "go", "cooking", "travel", "music", "chess", "tennis", "math"]


def _pairs_file(path: Path, n: int = 200) -> Path:
    rows = []
    for i in range(n):
        topic = _TOPICS[i % len(_TOPICS)]
        v = i // len(_TOPICS)
        a = f"how do i learn {topic} fast as a beginner variant {v}"
        if i % 3 == 0:  # a paraphrase: positive
            b = f"what is the fastest way to learn {topic} for a beginner variant {v}"
            label = 1
        else:  # a near miss: negative
            b = f"how do i teach {topic} to kids variant {v}"
            label = 0
        rows.append({"a": a, "b": b, "label": label, "source": "test"})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _table(section: str, header_start: str) -> list[list[str]]:
    """The body rows of the markdown table whose header line starts with ``header_start``."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _numbers(cell: str) -> list[float]:
    return [float(m.replace(",", "")) for m in _NUMBER.findall(cell.replace("`", ""))]


def test_core_bench_writes_and_replaces_its_section(tmp_path: Path) -> None:
    out = tmp_path / "docs" / "benchmarks.md"
    data = _pairs_file(tmp_path / "pairs.jsonl")
    logs: list[str] = []
    kwargs = dict(
        out=out,
        data=data,
        sizes=(200,),
        embedder=HashEmbedder(dim=384),
        time_scale=0.02,
        log=logs.append,
    )
    result = run_core_bench(**kwargs)  # type: ignore[arg-type]
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks")
    assert text.count(SECTION_START) == 1 and text.count(SECTION_END) == 1
    section = text[text.index(SECTION_START) : text.index(SECTION_END)]
    assert result["markdown"].strip().startswith(SECTION_START)

    exact = _table(section, "| contender | p50 µs | p95 µs |")
    names = [r[0] for r in exact]
    assert any("LayeredCache(path=None)" in n for n in names)
    assert any("SQLiteStore.get" in n for n in names)
    assert any("InMemoryCache" in n for n in names)
    assert any("SQLiteCache" in n for n in names)
    for row in exact:
        p50, p95 = _numbers(row[1])[0], _numbers(row[2])[0]
        assert p50 > 0 and p95 >= p50 * 0.99

    fill = _table(section, "| entries | fill memory s |")
    assert [_numbers(r[0])[0] for r in fill] == [200]
    semantic = _table(section, "| entries | embed p50 / p95 ms |")
    assert len(semantic) == 1
    for cell in semantic[0][1:7]:
        values = _numbers(cell)
        assert values and all(v > 0 for v in values), cell
    diagnostics = _table(section, "| entries | Chroma without `where` p50 ms |")
    assert len(diagnostics) == 1 and _numbers(diagnostics[0][1])[0] > 0

    # Keep what others wrote around the section; a second run replaces, never duplicates.
    out.write_text(text + "\n## Other suite\n\nkept\n", encoding="utf-8")
    run_core_bench(**kwargs)  # type: ignore[arg-type]
    again = out.read_text(encoding="utf-8")
    assert again.count(SECTION_START) == 1 and again.count(SECTION_END) == 1
    assert again.count("### Exact hits") == 1
    assert again.startswith("# Benchmarks") and again.rstrip().endswith("kept")


def test_write_section_appends_then_replaces(tmp_path: Path) -> None:
    out = tmp_path / "b.md"
    out.write_text("# Benchmarks\n\nintro\n", encoding="utf-8")
    write_section(out, f"{SECTION_START}\none\n{SECTION_END}\n")
    write_section(out, f"{SECTION_START}\ntwo\n{SECTION_END}\n")
    text = out.read_text(encoding="utf-8")
    assert text == f"# Benchmarks\n\nintro\n\n{SECTION_START}\ntwo\n{SECTION_END}\n"
