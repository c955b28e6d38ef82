"""pytest imports test files by basename (no packages under tests/): two files of one
name in tests/unit and tests/integration stop the whole `make test` at collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def test_no_two_test_files_share_a_basename() -> None:
    root = Path(__file__).resolve().parents[2]
    names = Counter(p.name for p in root.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
