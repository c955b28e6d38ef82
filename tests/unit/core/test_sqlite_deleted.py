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
    root = Path(__file__).resolve().parents[3]
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


_NEW_PROCESS = """
import sys
from agent_cache.stores import SQLiteStore
s = SQLiteStore(sys.argv[1])
errors = 0
for i in range(20):
    try:
        s.set(f"{sys.argv[2]}{i}", '"v"', namespace="default", expires_at=None, now=0.0)
    except Exception:
        errors += 1
print(errors, sum(s.get(f"{p}{i}", 0.0) is not None for p in sys.argv[2:] for i in range(20)))
"""


def test_only_the_main_file_deleted_new_processes_start_a_working_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Only ``exact.sqlite3`` deleted, its ``-wal`` / ``-shm`` left (a running process
    still uses them): before, a new process failed every call ("disk I/O error")."""
    monkeypatch.setattr(sqlite_mod, "INODE_CHECK_S", 0.0, raising=False)
    caplog.set_level(logging.WARNING, logger="agent_cache")
    path = tmp_path / "exact.sqlite3"
    running = SQLiteStore(path)
    for i in range(50):
        running.set(f"old{i}", '"v"', namespace="default", expires_at=None, now=0.0)
    path.unlink()
    assert Path(f"{path}-wal").exists()
    root = Path(__file__).resolve().parents[3]

    def new_process(*prefixes: str) -> tuple[int, int]:
        done = subprocess.run(
            [sys.executable, "-c", _NEW_PROCESS, str(path), *prefixes],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, PYTHONPATH=str(root)),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        errors, seen = done.stdout.split()
        return int(errors), int(seen)

    assert new_process("b") == (0, 20)  # 0 failed writes, all 20 read back
    for i in range(20):  # the running process moves over to the new file
        running.set(f"a{i}", '"v"', namespace="default", expires_at=None, now=0.0)
    running.close()
    assert new_process("c", "b", "a") == (0, 60)  # nothing of the others was lost
