"""The WAL never takes the space a small or nearly full disk has left.

SQLite checkpoints its WAL at 1,000 pages (4 MB) and never truncates it: on a 3 MiB disk
it filled the disk with old copies of a few pages (67 entries fit) and the checkpoint
that would free it could no longer grow the database. Here the disk is simulated
(``_free_bytes`` says what a 3 MiB disk holding these files would have left), so this
runs without root; ``tests/integration/test_disk_full_real.py`` fills a real tmpfs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_cache.stores import SQLiteStore
from agent_cache.stores import sqlite as sqlite_module

BUDGET = 3 * 1024 * 1024


def _used(db: Path) -> int:
    return sum(
        os.stat(f"{db}{suffix}").st_size
        for suffix in ("", "-wal", "-shm")
        if os.path.exists(f"{db}{suffix}")
    )


def test_the_wal_stays_within_what_a_small_disk_has_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "exact.sqlite3"
    monkeypatch.setattr(
        sqlite_module, "_free_bytes", lambda folder: max(0, BUDGET - _used(db)), raising=False
    )
    peak = 0
    with SQLiteStore(db) as store:
        for i in range(1500):  # ~1.6 MB of values: fits the disk, not beside a 4 MB WAL
            store.set(f"k{i}", "v" * 1000, namespace="default", expires_at=None, now=0.0)
            peak = max(peak, _used(db))
        assert store.count() == 1500
        wal = os.stat(f"{db}-wal").st_size
    assert peak <= BUDGET, f"the files reached {peak} bytes on a {BUDGET}-byte disk"
    assert wal <= BUDGET // 4


def test_a_big_disk_leaves_sqlite_its_own_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No early checkpoint where the space is plenty: the commit path is unchanged."""
    calls: list[object] = []
    monkeypatch.setattr(sqlite_module, "_free_bytes", lambda folder: 10**12)
    monkeypatch.setattr(SQLiteStore, "_checkpoint", lambda self, conn: calls.append(conn))
    with SQLiteStore(tmp_path / "exact.sqlite3") as store:
        for i in range(300):
            store.set(f"k{i}", "v" * 1000, namespace="default", expires_at=None, now=0.0)
    assert calls == []


def test_a_checkpoint_that_cannot_run_is_not_the_callers_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader holding a snapshot blocks the truncating checkpoint: the write that
    triggered it still succeeds at once (no busy wait), and the WAL is truncated later."""
    db = tmp_path / "exact.sqlite3"
    monkeypatch.setattr(sqlite_module, "_free_bytes", lambda folder: 0)
    with SQLiteStore(db) as writer, SQLiteStore(db) as reader:
        writer.set("k", "v" * 100_000, namespace="default", expires_at=None, now=0.0)
        with reader.snapshot() as conn:  # an open read transaction pins the WAL
            conn.execute("SELECT COUNT(*) FROM entries").fetchone()
            writer.set("k2", "v" * 100_000, namespace="default", expires_at=None, now=0.0)
            assert os.stat(f"{db}-wal").st_size > 0
        writer.set("k3", "v" * 100_000, namespace="default", expires_at=None, now=0.0)
        assert os.stat(f"{db}-wal").st_size == 0
        assert writer.count() == 3
