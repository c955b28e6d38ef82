"""Many processes opening one NEW SQLite path at once (issue 17, point 4).

Switching a new file to WAL takes an exclusive lock the busy timeout does not wait for:
before the first-open lock, processes that opened one fresh path together got
``database is locked`` (a store error served as a miss). Long-lived worker processes
(started once) open a new path per round, released together, and each stores an entry
with its vector and reads both back.

:func:`run_rounds` is the harness, shared with the integration stress test.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent_cache.stores import SQLiteStore
from agent_cache.stores import _sqlite_open as so
from agent_cache.vectors import SQLiteVectorStore

ROOT = Path(__file__).resolve().parents[3]

WORKER = r"""
import json, sys, threading
import numpy as np
from agent_cache.errors import BackendError
from agent_cache.stores import SQLiteStore
from agent_cache.vectors import SQLiteVectorStore

me = int(sys.argv[1])

def vec(i):
    v = np.full(16, 0.01, dtype=np.float32)
    v[i % 16] += 1.0
    v[(i // 16 + 3) % 16] += 0.5
    return v

def one_thread(store, vectors, key, v, check):
    try:
        store.set(key, json.dumps(key), namespace="default", expires_at=None, now=0.0,
                  vector=v, vector_meta={"scope": "s", "expires_at": 1e12})
    except BackendError as exc:
        check.append(f"store: {exc}")
    try:
        got = store.get(key, now=0.0)
        if got != json.dumps(key):
            check.append(f"read back {got!r}")
        ids = [m.id for m in vectors.query(v, k=256, scope="s", now=0.0)]
        if key not in ids:
            check.append(f"own vector not found among {len(ids)}")
    except BackendError as exc:
        check.append(f"read: {exc}")

def stores_round(path, check, threads):
    store = SQLiteStore(path)  # nothing touches the disk before the first call
    vectors = SQLiteVectorStore(store)
    workers = [
        threading.Thread(target=one_thread,
                         args=(store, vectors, f"k{me}-{t}", vec(me * threads + t), check))
        for t in range(threads)
    ]  # each thread opens a connection of its own
    print("ready", flush=True)
    sys.stdin.readline()  # go: every worker is released at once
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    store.close()

def cache_round(path, check, threads):
    from agent_cache import LayeredCache
    from agent_cache.testing import HashEmbedder
    cache = LayeredCache(path=path, embedder=HashEmbedder())
    print("ready", flush=True)
    sys.stdin.readline()
    cache.store(f"question number {me} about invoices", f"answer {me}")
    hit = cache.lookup(f"question number {me} about invoices")
    if hit is None or hit.response != f"answer {me}":
        check.append(f"lookup gave {hit!r}")
    if cache.stats().errors:
        check.append(f"{cache.stats().errors} store errors served as misses")
    cache.close()

print("started", flush=True)
for line in sys.stdin:
    task = json.loads(line)
    check = []
    try:
        run = stores_round if task["mode"] == "stores" else cache_round
        run(task["path"], check, task["threads"])
    except Exception as exc:  # reported, the worker lives on
        check.append(f"{type(exc).__name__}: {exc}")
    print(json.dumps(check), flush=True)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


class Workers:
    """``n`` long-lived worker processes, each running :data:`WORKER`."""

    def __init__(self, n: int) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(i)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(),
                cwd=ROOT,
            )
            for i in range(n)
        ]
        for proc in self.procs:
            self._expect(proc, "started")

    def _expect(self, proc: subprocess.Popen[str], word: str) -> None:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != word:
            proc.kill()
            _, err = proc.communicate(timeout=30)
            raise AssertionError(f"worker said {line!r}, not {word!r}: {err[-2000:]}")

    def round(self, path: Path, mode: str, threads: int = 1) -> list[list[str]]:
        """Every worker builds its store on ``path``, then all are released together
        (``threads`` threads each, every one opening its own connection)."""
        task = json.dumps({"path": str(path), "mode": mode, "threads": threads}) + "\n"
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(task)
            proc.stdin.flush()
        for proc in self.procs:
            self._expect(proc, "ready")
        for proc in self.procs:  # one short write each: the workers wake within ~1 ms
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        out = []
        for proc in self.procs:
            assert proc.stdout is not None
            out.append(list(json.loads(proc.stdout.readline())))
        return out

    def close(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run_rounds(
    workers: Workers, base: Path, rounds: int, mode: str = "stores", threads: int = 4
) -> dict[str, Any]:
    """``rounds`` rounds, each on a new path; the problems seen, counted."""
    problems: list[str] = []
    lost = 0
    for r in range(rounds):
        folder = base / f"round-{r}"
        path = folder / "exact.sqlite3" if mode == "stores" else folder
        problems += [p for worker in workers.round(path, mode, threads) for p in worker]
        if mode == "stores":  # every entry and vector written is there afterwards
            with SQLiteStore(path) as store:
                n = len(workers.procs) * threads
                keys = [f"k{i}-{t}" for i in range(len(workers.procs)) for t in range(threads)]
                found = store.get_many(keys, now=0.0)
                lost += n - len(found)
                lost += n - SQLiteVectorStore(store).count()
    return {
        "problems": problems,
        "locked": sum("locked" in p for p in problems),
        "lost": lost,
    }


_WORKERS = 8  # the integration test runs 16 x 20; starting a worker costs ~1 s of CPU


@pytest.fixture(scope="module")
def workers() -> Iterator[Workers]:
    pool = Workers(_WORKERS)
    yield pool
    pool.close()


def test_processes_open_one_new_path_at_once(workers: Workers, tmp_path: Path) -> None:
    result = run_rounds(workers, tmp_path, rounds=8, threads=4)
    assert result["problems"] == [] and result["locked"] == 0
    assert result["lost"] == 0


def test_caches_open_one_new_folder_at_once(workers: Workers, tmp_path: Path) -> None:
    result = run_rounds(workers, tmp_path, rounds=1, mode="cache")
    assert result["problems"] == []
    with SQLiteStore(tmp_path / "round-0" / "exact.sqlite3") as store:
        assert store.count() == _WORKERS  # one exact entry per worker, none lost


def test_an_open_while_another_process_is_mid_switch_waits(tmp_path: Path) -> None:
    # What a second opener meets while the first switches the file to WAL: a write lock
    # held on a rollback-journal file. The WAL switch cannot wait for it (SQLite gives
    # up at once rather than deadlock); before the retry, this failed in under 1 ms.
    path = tmp_path / "exact.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE other (x)")
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.2, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        with SQLiteStore(path) as store:
            t0 = time.monotonic()
            store.set("k", "1", namespace="n", expires_at=None, now=0.0)
            waited = time.monotonic() - t0
            assert store.get("k", now=0.0) == "1"
    finally:
        release.join()
        holder.close()
    assert waited >= 0.1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


HOLDER = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


@pytest.mark.skipif(so.fcntl is None, reason="no fcntl: the first open relies on retries")
def test_the_first_open_lock_waits_for_another_process(tmp_path: Path) -> None:
    db = tmp_path / "exact.sqlite3"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(so.lock_path(db)), "0.3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    t0 = time.monotonic()
    with so.first_open_lock(db, wait=0.05) as held:
        assert held is False  # gave up after 0.05 s: the caller relies on retries
    with so.first_open_lock(db) as held:
        assert held is True
        waited = time.monotonic() - t0
    child.wait(timeout=30)
    assert 0.15 <= waited < 5.0


# -- the pieces, in one process ---------------------------------------------------


def test_threads_opening_one_new_path_at_once_all_succeed(tmp_path: Path) -> None:
    path = tmp_path / "t" / "exact.sqlite3"
    stores = [SQLiteStore(path) for _ in range(12)]
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def work(i: int) -> None:
        barrier.wait()
        try:
            stores[i].set(f"k{i}", str(i), namespace="n", expires_at=None, now=0.0)
        except BaseException as exc:  # collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert stores[0].count() == len(stores)
    for store in stores:
        store.close()


def test_the_fast_path_does_not_touch_the_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "exact.sqlite3"
    with SQLiteStore(path) as first:
        first.set("k", "1", namespace="n", expires_at=None, now=0.0)
    lock = so.lock_path(path)
    assert lock.exists()  # the first open took it
    lock.unlink()
    with SQLiteStore(path) as again:
        assert again.get("k", now=0.0) == "1"
    assert not lock.exists()  # an open of a ready file never needed it


def test_a_file_missing_a_table_is_completed_under_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "exact.sqlite3"
    with SQLiteStore(path) as store:
        store.set("k", "1", namespace="n", expires_at=None, now=0.0)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE locks")  # as if written by an older version
    so.lock_path(path).unlink()
    with SQLiteStore(path) as store:
        assert store.try_lock("name", "token", ttl=10.0)
    assert so.lock_path(path).exists()


def test_opening_a_ready_file_costs_under_a_millisecond(tmp_path: Path) -> None:
    path = tmp_path / "exact.sqlite3"
    with SQLiteStore(path) as store:
        store.set("k", "1", namespace="n", expires_at=None, now=0.0)
    with sqlite3.connect(path) as conn:
        conn.execute("SELECT 1").fetchone()
    store = SQLiteStore(path)
    store.get("k", now=0.0)  # the schema read, once per store and process
    best = float("inf")
    for _ in range(50):  # a new connection (as for a new thread): header read, pragmas
        store.close()
        t0 = time.perf_counter()
        store.get("k", now=0.0)
        best = min(best, time.perf_counter() - t0)
    store.close()
    assert best < 1e-3


def test_the_first_open_lock_excludes_threads_and_falls_back_without_the_file(
    tmp_path: Path,
) -> None:
    db = tmp_path / "exact.sqlite3"
    inside: list[int] = []
    overlap: list[int] = []

    def work() -> None:
        with so.first_open_lock(db) as held:
            assert held
            inside.append(1)
            overlap.append(len(inside))
            time.sleep(0.01)
            inside.pop()

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlap == [1] * 6
    missing = tmp_path / "no-such-folder" / "exact.sqlite3"
    with so.first_open_lock(missing) as held:  # the lock file cannot be created
        assert held is False


def test_retry_locked_retries_only_locked_errors_and_gives_up() -> None:
    calls: list[int] = []
    pauses: list[float] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 4:
            raise sqlite3.OperationalError("database is locked")
        return "done"

    assert so.retry_locked(flaky, sleep=pauses.append) == "done"
    assert len(calls) == 4 and len(pauses) == 3

    def broken() -> None:
        raise sqlite3.OperationalError("no such table: nope")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        so.retry_locked(broken, sleep=pauses.append)

    def always_locked() -> None:
        raise sqlite3.OperationalError("database is locked")

    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        so.retry_locked(always_locked, budget=0.05)
    assert time.monotonic() - t0 < 1.0


def test_the_vectors_see_the_same_ready_file(tmp_path: Path) -> None:
    path = tmp_path / "exact.sqlite3"
    vs = SQLiteVectorStore(path)
    vs.add(
        ["a"],
        np.array([[1.0, 0.0]], dtype=np.float32),
        [{"scope": "s", "namespace": "n", "expires_at": 1e12}],
    )
    assert [m.id for m in vs.query(np.array([1.0, 0.0]), k=1, scope="s", now=0.0)] == ["a"]
    vs.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
