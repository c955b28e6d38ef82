"""The full first-open stress run: 16 processes x 20 new paths, then caches on new folders.

The harness (long-lived workers released together on each new path) lives in
``tests/unit/core/test_sqlite_open_race.py``, which runs a few rounds of it; this runs the
full count (issue 17, point 4: ``database is locked`` from ``PRAGMA journal_mode = WAL``).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agent_cache.stores import SQLiteStore


def _harness() -> ModuleType:
    source = Path(__file__).resolve().parents[1] / "unit" / "core" / "test_sqlite_open_race.py"
    spec = importlib.util.spec_from_file_location("_sqlite_open_race_harness", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


harness = _harness()
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def workers() -> Iterator[Any]:
    pool = harness.Workers(16)
    yield pool
    pool.close()


def test_sixteen_processes_on_twenty_new_paths_lose_nothing(workers: Any, tmp_path: Path) -> None:
    t0 = time.monotonic()
    result = harness.run_rounds(workers, tmp_path, rounds=20)
    elapsed = time.monotonic() - t0
    print(
        f"16 x 20 rounds in {elapsed:.1f} s: {len(result['problems'])} problems, "
        f"{result['locked']} locked, {result['lost']} lost"
    )
    assert result["problems"] == [] and result["locked"] == 0
    assert result["lost"] == 0


def test_sixteen_caches_on_new_folders_lose_nothing(workers: Any, tmp_path: Path) -> None:
    result = harness.run_rounds(workers, tmp_path, rounds=3, mode="cache")
    assert result["problems"] == []
    for r in range(3):
        with SQLiteStore(tmp_path / f"round-{r}" / "exact.sqlite3") as store:
            assert store.count() == 16
