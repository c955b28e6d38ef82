"""``bench backends`` parts that need no server: the multi-process writer harness."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cache.bench.backends import _writes
from agent_cache.errors import ConfigurationError


def test_writes_on_one_path_lose_nothing(tmp_path: Path) -> None:
    texts = [f"question number {i} about invoices" for i in range(40)]
    rows = _writes({"sqlite": {"path": str(tmp_path)}}, ["sqlite"], texts, 2, 20, "hash", print)
    (row,) = rows
    assert (row["entries"], row["missing"], row["exact"], row["vectors"]) == (40, 0, 40, 40)
    assert row["errors"] == 0 and row["wall_s"] >= row["slowest_s"] > 0


def test_a_failing_writer_fails_the_run_instead_of_hanging(tmp_path: Path) -> None:
    texts = [f"question {i}" for i in range(6)]
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")  # the cache folder cannot be created
    with pytest.raises(ConfigurationError, match="writer process failed"):
        _writes({"sqlite": {"path": str(blocker)}}, ["sqlite"], texts, 2, 3, "hash", print)
