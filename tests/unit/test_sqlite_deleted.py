"""The database files deleted under a running process: it notices, warns and reopens,
so later writes land in the file other processes open (not in the unlinked one)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cache.stores import SQLiteStore
from agent_cache.stores import sqlite as sqlite_mod


def test_writes_after_the_files_are_deleted_reach_a_new_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sqlite_mod, "INODE_CHECK_S", 0.0, raising=False)
    caplog.set_level(logging.WARNING, logger="agent_cache")
    path = tmp_path / "exact.sqlite3"
    store = SQLiteStore(path)
    for i in range(10):
        store.set(f"old{i}", '"v"', namespace="default", expires_at=None, now=0.0)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    for i in range(20):
        store.set(f"new{i}", '"v"', namespace="default", expires_at=None, now=0.0)
    code = (
        "import sys; from agent_cache.stores import SQLiteStore; "
        "s = SQLiteStore(sys.argv[1]); "
        "print(sum(s.get(f'new{i}', 0.0) is not None for i in range(20)))"
    )
    root = Path(__file__).resolve().parents[2]
    seen = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )
    store.close()
    assert seen.returncode == 0, seen.stderr[-2000:]
    assert int(seen.stdout.strip()) == 20  # every write after the delete is visible
    assert any("deleted under this process" in r.getMessage() for r in caplog.records)
