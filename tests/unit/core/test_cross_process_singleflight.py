"""Concurrent identical misses in different processes on one SQLite path make one call."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from agent_cache.stores import SQLiteStore

WORKER = textwrap.dedent(
    """
    import sys, time
    from agent_cache import LayeredCache
    from agent_cache.stores import SQLiteStore
    from agent_cache.testing import HashEmbedder
    from agent_cache.vectors import MemoryVectorStore
    path, log = sys.argv[1], sys.argv[2]

    def compute():
        with open(log, "a") as fh:
            fh.write("call\\n")
        time.sleep(1.0)
        return {"text": "the answer"}

    cache = LayeredCache(path=None, kv_store=SQLiteStore(path), vector_store=MemoryVectorStore(),
                         embedder=HashEmbedder())
    print(cache.get_or_compute("what is the answer?", compute)["text"])
    """
)


def test_two_processes_one_model_call(tmp_path: Path) -> None:
    db, log = tmp_path / "c.sqlite3", tmp_path / "calls.log"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), str(log)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert outs == ["the answer"] * 3
    assert log.read_text().count("call") == 1


def test_sqlite_lock_is_exclusive_and_expires(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "l.sqlite3")
    assert store.try_lock("x", "a", ttl=60)
    assert not store.try_lock("x", "b", ttl=60)
    store.unlock("x", "b")  # not the holder: no effect
    assert not store.try_lock("x", "b", ttl=60)
    store.unlock("x", "a")
    assert store.try_lock("x", "b", ttl=0.01)
    import time

    time.sleep(0.05)
    assert store.try_lock("x", "c", ttl=60)  # the expired holder lost it


# -- many processes x many threads, a crashed leader, a long call, the re-check ---------

HERD = textwrap.dedent(
    """
    import random, sys, threading, time
    from agent_cache import LayeredCache
    from agent_cache.testing import HashEmbedder
    where, log, proc = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if where.startswith("redis://"):
        cache = LayeredCache(path=None, redis_url=where, prefix=sys.argv[4],
                             embedder=HashEmbedder())
    else:
        cache = LayeredCache(path=where, embedder=HashEmbedder())
    keys = [f"missing question number {i}" for i in range(20)]
    lock = threading.Lock()

    def compute(key):
        def call():
            with lock, open(log, "a") as fh:
                fh.write(f"{proc} {key}\\n")
            time.sleep(0.2)
            return {"text": "answer to " + key}
        return call

    errors = []
    def worker(t):
        order = keys[:]
        random.Random(proc * 100 + t).shuffle(order)
        try:
            for key in order:
                got = cache.get_or_compute(key, compute(key))
                assert got == {"text": "answer to " + key}, got
        except BaseException as exc:
            errors.append(repr(exc))

    sys.stdin.readline()
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(16)]
    for th in threads: th.start()
    for th in threads: th.join()
    print("ERRORS" if errors else "ok", errors[:3])
    cache.close()
    """
)


def run_herd(where: str, tmp_path: Path, prefix: str = "herd") -> list[str]:
    """4 processes x 16 threads on 20 missing keys; returns the compute calls made."""
    log = tmp_path / "calls.log"
    log.touch()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HERD, where, str(log), str(p), prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(4)
    ]
    outs = [p.communicate(input="go\n", timeout=240) for p in procs]
    for proc, (out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0 and out.startswith("ok"), (out, err[-2000:])
    return log.read_text().splitlines()


def test_four_processes_sixteen_threads_twenty_keys_twenty_calls(tmp_path: Path) -> None:
    calls = run_herd(str(tmp_path / "cache"), tmp_path)
    assert sorted(c.split(" ", 1)[1] for c in calls) == sorted(
        f"missing question number {i}" for i in range(20)
    )


CRASHING_LEADER = textwrap.dedent(
    """
    import sys, time
    from agent_cache import LayeredCache
    from agent_cache.testing import HashEmbedder
    cache = LayeredCache(path=sys.argv[1], embedder=HashEmbedder(), singleflight_timeout=1.0)

    def compute():
        print("computing", flush=True)
        time.sleep(600)  # killed here

    cache.get_or_compute("what is the answer?", compute)
    """
)


def test_a_crashed_leaders_lease_expires(tmp_path: Path) -> None:
    import time

    from agent_cache import LayeredCache
    from agent_cache.testing import HashEmbedder

    leader = subprocess.Popen(
        [sys.executable, "-c", CRASHING_LEADER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert leader.stdout is not None and leader.stdout.readline().strip() == "computing"
    finally:
        leader.kill()
        leader.wait(timeout=30)
    import threading

    calls: list[int] = []
    caches = [
        LayeredCache(path=tmp_path, embedder=HashEmbedder(), singleflight_timeout=1.0)
        for _ in range(3)
    ]  # three followers (no in-process flight between them)
    got: list[str] = []

    def follow(cache: LayeredCache) -> None:
        def compute() -> str:
            calls.append(1)
            time.sleep(0.3)
            return "42"

        got.append(cache.get_or_compute("what is the answer?", compute))

    started = time.monotonic()
    threads = [threading.Thread(target=follow, args=(c,)) for c in caches]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    waited = time.monotonic() - started
    assert got == ["42"] * 3 and calls == [1]  # one follower took the expired lease
    assert waited < 4.0  # the dead leader's lease (1 s) expired; no 12-lease wait
    for cache in caches:
        cache.close()


def test_a_long_call_renews_its_lease_so_no_one_else_computes(tmp_path: Path) -> None:
    import threading
    import time

    from agent_cache import LayeredCache
    from agent_cache.testing import HashEmbedder

    calls: list[str] = []
    caches = [
        LayeredCache(path=tmp_path, embedder=HashEmbedder(), singleflight_timeout=0.3)
        for _ in range(2)
    ]  # two instances: no in-process flight between them

    def slow(who: str) -> str:
        calls.append(who)
        time.sleep(1.5)  # five lease periods
        return "slow answer"

    results: list[str] = []
    first = threading.Thread(
        target=lambda: results.append(caches[0].get_or_compute("q?", lambda: slow("a")))
    )
    first.start()
    time.sleep(0.2)
    results.append(caches[1].get_or_compute("q?", lambda: slow("b")))
    first.join()
    assert calls == ["a"] and results == ["slow answer", "slow answer"]
    for cache in caches:
        cache.close()


def test_the_lease_holder_rechecks_the_cache(tmp_path: Path) -> None:
    from agent_cache import LayeredCache
    from agent_cache.testing import HashEmbedder

    with LayeredCache(path=tmp_path, embedder=HashEmbedder()) as cache:
        cache.store("what is rag?", "stored by another process")
        cache.lookup = lambda *a, **k: None  # type: ignore[method-assign]  # a stale miss
        got = cache.get_or_compute("what is rag?", lambda: "computed again")
    assert got == "stored by another process"


def test_sqlite_lease_renewal_is_compare_and_extend(tmp_path: Path) -> None:
    import time

    store = SQLiteStore(tmp_path / "l.sqlite3")
    assert store.try_lock("x", "a", ttl=0.2)
    assert not store.renew_lock("x", "b", ttl=60)
    assert store.renew_lock("x", "a", ttl=60)
    time.sleep(0.3)
    assert not store.try_lock("x", "b", ttl=60)
    store.close()
