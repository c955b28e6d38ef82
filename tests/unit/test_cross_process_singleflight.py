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
