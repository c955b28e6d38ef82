"""A worker forked while the parent is busy never hangs (issue 19, point 4).

The parent runs 4 threads inside cache calls (store / lookup / get_or_compute on the
embedded SQLite cache) and forks 8 children at once, several rounds; each child does a
store and a lookup of its own and must finish within ``CHILD_TIMEOUT_S``. Before the
fix, children hung on a lock a parent thread held at the fork (``SQLiteVectorStore._lock``,
an RLock copied locked) or inside SQLite (``PRAGMA journal_mode`` at open).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

CHILD_TIMEOUT_S = 20.0
ROUNDS = 4
CHILDREN = 8
THREADS = 4


def _child(cache: LayeredCache, n: int) -> int:
    """0: the child's store + lookup worked; 1: a wrong answer; 2: an exception."""
    try:
        signal.alarm(int(CHILD_TIMEOUT_S) + 5)  # a hung child ends itself (SIGALRM)
        faulthandler.dump_traceback_later(CHILD_TIMEOUT_S - 5)  # where it hangs, if it does
        prompt = f"child {os.getpid()} question {n} about forking"
        cache.store(prompt, f"answer {n}")
        hit = cache.lookup(prompt)
        if hit is None or hit.response != f"answer {n}":
            return 1
        cache.get_or_compute(f"{prompt} again", lambda: "computed")
        return 0 if cache.stats().errors == 0 else 3
    except BaseException:
        import traceback

        traceback.print_exc()
        return 2


def test_children_forked_from_a_busy_parent_finish(tmp_path: Path) -> None:
    cache = LayeredCache(path=tmp_path / "cache", embedder=HashEmbedder(64))
    cache.store("warm question about the forking topic", "warm answer")  # stores open
    cache.lookup("a warm question about the forking topic")  # the analysis' data loaded
    stop = threading.Event()

    def busy(t: int) -> None:
        i = 0
        while not stop.is_set():
            q = f"thread {t} question number {i % 50} on the topic"
            cache.store(q, f"a{i}")
            cache.lookup(q)
            cache.lookup(f"a paraphrase of thread {t} question {i % 7}")
            cache.get_or_compute(f"thread {t} computes {i}", lambda: "x")
            i += 1

    threads = [threading.Thread(target=busy, args=(t,), daemon=True) for t in range(THREADS)]
    for th in threads:
        th.start()
    outcomes: list[str] = []
    try:
        for _round in range(ROUNDS):
            time.sleep(0.2)
            pids = []
            for n in range(CHILDREN):
                pid = os.fork()
                if pid == 0:  # the child: never returns into pytest
                    code = 2
                    try:
                        code = _child(cache, n)
                    finally:
                        sys.stdout.flush()
                        sys.stderr.flush()
                        os._exit(code)
                pids.append(pid)
            deadline = time.monotonic() + CHILD_TIMEOUT_S
            for pid in pids:
                while True:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        if os.WIFSIGNALED(status):
                            outcomes.append(f"signal {os.WTERMSIG(status)}")
                        else:
                            outcomes.append(f"exit {os.WEXITSTATUS(status)}")
                        break
                    if time.monotonic() > deadline:
                        os.kill(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)
                        outcomes.append("hung")
                        break
                    time.sleep(0.01)
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=30)
        cache.close()
    bad = [o for o in outcomes if o != "exit 0"]
    assert len(outcomes) == ROUNDS * CHILDREN
    assert not bad, f"{len(bad)} of {len(outcomes)} children failed: {bad}"
