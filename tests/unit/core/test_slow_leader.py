"""Followers of a live but slow leader wait for it: one model call, however long it takes.

Before: an in-process follower gave up after ``singleflight_timeout`` (5 s) and, on a
store without leases (memory), called the model itself; a follower in another process
(here: another cache instance on the same SQLite file) gave up after 12 lease periods
(60 s) and made an extra call. Now a follower waits as long as the leader is alive (a
thread in its call; a process renewing its lease, its heartbeat) and takes over only
from a dead one: the crashed-leader case is
``tests/unit/core/test_cross_process_singleflight.py::test_a_crashed_leaders_lease_expires``.
Timings are shortened: a 0.1 s lease, a leader 30 lease periods long.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from agent_cache import LayeredCache
from agent_cache.singleflight import SingleFlight
from agent_cache.testing import HashEmbedder

LEASE = 0.1
SLOW = 3.0  # 30 lease periods, 2.5 x the old 12-lease give-up


def _slow(calls: list[str], who: str) -> str:
    calls.append(who)
    time.sleep(SLOW)
    return "slow answer"


def test_threads_of_one_cache_wait_for_a_slow_leader_without_a_lease() -> None:
    calls: list[str] = []
    with LayeredCache(path=None, embedder=HashEmbedder(), singleflight_timeout=LEASE) as cache:
        results: list[str] = []

        def ask(who: str) -> None:
            results.append(cache.get_or_compute("a slow question?", lambda: _slow(calls, who)))

        threads = [threading.Thread(target=ask, args=(str(i),)) for i in range(4)]
        for th in threads:
            th.start()
            time.sleep(0.05)
        for th in threads:
            th.join(timeout=30)
        assert len(calls) == 1, calls
        assert results == ["slow answer"] * 4
        assert cache.stats().counters.get("coalesced", 0) == 3


def test_other_caches_on_one_file_wait_for_a_renewing_leader(tmp_path: Path) -> None:
    calls: list[str] = []
    caches = [
        LayeredCache(path=tmp_path, embedder=HashEmbedder(), singleflight_timeout=LEASE)
        for _ in range(3)
    ]  # separate instances: only the lease on the file links them, as processes
    results: list[str] = []

    def ask(i: int) -> None:
        results.append(caches[i].get_or_compute("a slow question?", lambda: _slow(calls, str(i))))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    started = time.monotonic()
    for th in threads:
        th.start()
        time.sleep(0.05)
    for th in threads:
        th.join(timeout=30)
    waited = time.monotonic() - started
    for cache in caches:
        cache.close()
    assert calls == ["0"], calls
    assert results == ["slow answer"] * 3
    assert waited < SLOW + 1.0  # served when the leader stored, not a lease period later


def test_async_followers_wait_for_a_slow_async_leader() -> None:
    calls: list[str] = []

    async def slow() -> str:
        calls.append("x")
        await asyncio.sleep(SLOW / 3)  # 10 lease periods
        return "slow answer"

    async def main() -> list[str]:
        with LayeredCache(path=None, embedder=HashEmbedder(), singleflight_timeout=LEASE) as c:
            return list(
                await asyncio.gather(
                    *(c.aget_or_compute("an async question?", slow) for _ in range(5))
                )
            )

    assert asyncio.run(main()) == ["slow answer"] * 5
    assert calls == ["x"]


def test_a_follower_of_a_leader_whose_loop_stopped_computes_itself() -> None:
    """A leader task whose event loop no longer runs is gone: its follower (another
    thread, another loop) waits one ``timeout`` more, not forever."""
    flight = SingleFlight(timeout=LEASE)
    leader_in = threading.Event()

    async def never() -> str:
        leader_in.set()
        await asyncio.Event().wait()  # finishes only if its loop runs
        return "never"

    loop = asyncio.new_event_loop()
    leader = loop.create_task(flight.ado("k", never))
    loop.run_until_complete(asyncio.wait((leader,), timeout=0.2))  # then the loop stops
    assert leader_in.is_set() and not leader.done()

    got: list[tuple[str, bool]] = []
    follower = threading.Thread(target=lambda: got.append(flight.do("k", lambda: "own")))
    started = time.monotonic()
    follower.start()
    follower.join(timeout=10)
    assert got == [("own", True)]
    assert time.monotonic() - started < 1.0
    leader.cancel()
    loop.run_until_complete(asyncio.wait((leader,)))
    loop.close()


SLOW_WORKER = textwrap.dedent(
    """
    import sys, time
    from agent_cache import LayeredCache
    from agent_cache.testing import HashEmbedder
    where, log, slow = sys.argv[1], sys.argv[2], float(sys.argv[3])
    if where.startswith("redis://"):
        cache = LayeredCache(path=None, redis_url=where, prefix=sys.argv[4],
                             embedder=HashEmbedder(), singleflight_timeout=0.2)
    else:
        cache = LayeredCache(path=where, embedder=HashEmbedder(), singleflight_timeout=0.2)

    def compute():
        with open(log, "a") as fh:
            fh.write("call\\n")
        time.sleep(slow)
        return "slow answer"

    print(cache.get_or_compute("a slow question for processes?", compute), flush=True)
    cache.close()
    """
)


PROC_SLOW = 6.0  # 30 leases of 0.2 s: 2.5 x the old 12-lease give-up, after start-up


def run_slow_leader(where: str, tmp_path: Path, prefix: str = "slow") -> list[str]:
    """A leader process 30 leases long (6 s at 0.2 s), two followers started once it
    computes; returns the model calls made (one line each) after checking every
    process printed the answer."""
    log = tmp_path / "calls.log"
    log.touch()

    def start() -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", SLOW_WORKER, where, str(log), str(PROC_SLOW), prefix]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    procs = [start()]
    deadline = time.monotonic() + 60
    while not log.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    procs += [start(), start()]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.strip() == "slow answer", (out, err[-2000:])
    return log.read_text().splitlines()


def test_processes_on_one_file_wait_for_a_slow_leader(tmp_path: Path) -> None:
    assert run_slow_leader(str(tmp_path / "cache"), tmp_path) == ["call"]


def test_a_compute_asking_for_its_own_key_does_not_wait_on_itself(tmp_path: Path) -> None:
    """Waiting for a live leader must not mean waiting for oneself: before, the inner
    call waited ``singleflight_timeout`` and then 12 leases (on SQLite) for its own
    outer call."""
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(), singleflight_timeout=LEASE) as c:

        def outer() -> str:
            return "outer:" + c.get_or_compute("the same question?", lambda: "inner")

        started = time.monotonic()
        got = c.get_or_compute("the same question?", outer)
        assert time.monotonic() - started < 1.0
    assert got == "outer:inner"


def test_an_async_compute_asking_for_its_own_key_does_not_wait_on_itself(
    tmp_path: Path,
) -> None:
    async def main() -> tuple[str, float]:
        with LayeredCache(path=tmp_path, embedder=HashEmbedder(), singleflight_timeout=LEASE) as c:

            async def inner() -> str:
                return "inner"

            async def outer() -> str:
                return "outer:" + await c.aget_or_compute("the async question?", inner)

            started = time.monotonic()
            got = await c.aget_or_compute("the async question?", outer)
            return got, time.monotonic() - started

    got, took = asyncio.run(main())
    assert got == "outer:inner" and took < 1.0


def test_a_leader_whose_loop_stopped_lets_its_lease_expire(tmp_path: Path) -> None:
    """An async leader stuck under a stopped event loop stops renewing its lease: a
    follower in another cache (another process) takes over after about one lease."""
    leader_cache = LayeredCache(path=tmp_path, embedder=HashEmbedder(), singleflight_timeout=LEASE)
    started_computing = threading.Event()

    async def never() -> str:
        started_computing.set()
        await asyncio.Event().wait()
        return "never"

    loop = asyncio.new_event_loop()
    leader = loop.create_task(leader_cache.aget_or_compute("a stuck question?", never))
    loop.run_until_complete(asyncio.wait((leader,), timeout=0.5))  # then the loop stops
    assert started_computing.is_set() and not leader.done()

    follower = LayeredCache(path=tmp_path, embedder=HashEmbedder(), singleflight_timeout=LEASE)
    got: list[str] = []
    thread = threading.Thread(
        target=lambda: got.append(follower.get_or_compute("a stuck question?", lambda: "mine"))
    )
    t0 = time.monotonic()
    thread.start()
    thread.join(timeout=20)
    took = time.monotonic() - t0
    follower.close()
    leader.cancel()
    loop.run_until_complete(asyncio.wait((leader,)))
    loop.close()
    leader_cache.close()
    assert got == ["mine"]
    assert took < 2.0, took
