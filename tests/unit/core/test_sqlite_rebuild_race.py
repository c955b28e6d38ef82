"""``on_corrupt="rebuild"`` with 4 worker processes starting at once on a corrupt file.

Before: each worker that met the corrupt file moved it aside itself, two in the same
second (the second move replaced the first copy, or moved aside the file another worker
had just rebuilt, with its entries). Now the move runs under the cross-process
first-open lock and only while the file at the path is still corrupt: one copy (the
corrupt file, byte for byte), one warning, every worker on the one rebuilt file.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from agent_cache.stores import SQLiteStore

WORKERS = 4


def _corrupt_file(path: Path) -> bytes:
    """A real SQLite file with entries, its header then overwritten: not a database."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(2000)])
    conn.commit()
    conn.close()
    data = bytearray(path.read_bytes())
    data[:100] = os.urandom(100)
    path.write_bytes(bytes(data))
    return bytes(data)


def _worker(path: str, me: int, start_at: float, out: Any) -> None:
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        while time.time() < start_at:  # released together, not at spawn speed
            time.sleep(0.0005)
        store = SQLiteStore(path, on_corrupt="rebuild")
        error = ""
        try:
            store.set(f"w{me}", json.dumps(me), namespace="default", expires_at=None, now=0.0)
        except Exception as exc:  # reported, not raised: the parent checks
            where = traceback.format_exception(exc.__cause__) if exc.__cause__ else []
            error = repr(exc) + "".join(where[-4:])  # where SQLite failed, if it does
        moved = sum("moved to" in str(w.message) for w in seen)
        store.close()
    out.put((me, moved, error))


def test_four_workers_meeting_a_corrupt_file_move_it_aside_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(3):
        folder = tmp_path / f"round{round_}"
        folder.mkdir()
        db = folder / "exact.sqlite3"
        corrupt = _corrupt_file(db)
        out = ctx.Queue()
        start_at = time.time() + 3.0  # after every interpreter has started
        procs = [
            ctx.Process(target=_worker, args=(str(db), i, start_at, out)) for i in range(WORKERS)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=30)
        assert [r[2] for r in results] == [""] * WORKERS, results
        assert sum(r[1] for r in results) == 1, f"round {round_}: moves {results}"
        aside = sorted(p for p in folder.glob("exact.sqlite3.corrupt-*") if "-wal" not in p.name)
        assert [p.read_bytes() for p in aside if not p.name.endswith("-shm")] == [corrupt]
        with SQLiteStore(db) as store:  # every worker wrote into the one rebuilt file
            got = [store.get(f"w{i}", now=0.0) for i in range(WORKERS)]
        assert got == [json.dumps(i) for i in range(WORKERS)]


def test_a_cannot_open_met_during_a_move_aside_is_retried_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # make check failed once: a worker's first open met another worker's move aside
    # ("unable to open database file"), and its set failed while the file was fine.
    store = SQLiteStore(tmp_path / "exact.sqlite3", on_corrupt="rebuild")
    real, calls = store._open, []

    def flaky(local: Any, pid: int) -> sqlite3.Connection:
        calls.append(pid)
        if len(calls) == 1:
            exc = sqlite3.OperationalError("unable to open database file")
            exc.sqlite_errorcode = 14  # type: ignore[attr-defined]
            raise exc
        return real(local, pid)

    monkeypatch.setattr(store, "_open", flaky)
    store.set("k", json.dumps(1), namespace="default", expires_at=None, now=0.0)
    assert len(calls) == 2
    assert store.get("k", now=0.0) == json.dumps(1)
    store.close()


def test_a_cannot_open_that_stays_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_cache.errors import BackendError

    store = SQLiteStore(tmp_path / "exact.sqlite3", on_corrupt="rebuild")
    calls: list[int] = []

    def never(local: Any, pid: int) -> sqlite3.Connection:
        calls.append(pid)
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(store, "_open", never)
    with pytest.raises(BackendError, match="unable to open"):
        store.set("k", json.dumps(1), namespace="default", expires_at=None, now=0.0)
    assert len(calls) == 2  # one retry, not a loop
