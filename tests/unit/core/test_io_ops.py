"""Typed ops (issue 21): an ``Op`` carries its function and optionally its async twin;
the drivers call what they are given, and the flows build ops only through ``_io``."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent_cache import _io as io
from agent_cache._flow import Flow, Op, run_async, run_sync
from agent_cache.singleflight import SingleFlight


class _Embedder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(("sync", threading.get_ident()))
        return np.ones((len(texts), 2), dtype=np.float32)

    async def aembed(self, texts: Sequence[str]) -> Any:
        self.calls.append(("async", threading.get_ident()))
        return np.zeros((len(texts), 2), dtype=np.float32)


class _SyncOnly:
    def __init__(self) -> None:
        self.threads: list[int] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.threads.append(threading.get_ident())
        return np.ones((len(texts), 2), dtype=np.float32)


def test_the_sync_driver_calls_the_function_and_the_async_one_its_twin() -> None:
    emb = _Embedder()
    assert run_sync(io.embed(emb, ["a"]))[0, 0] == 1.0
    assert asyncio.run(run_async(io.embed(emb, ["a"])))[0, 0] == 0.0
    assert [kind for kind, _ in emb.calls] == ["sync", "async"]


def test_without_a_twin_the_async_driver_runs_the_call_in_a_worker_thread() -> None:
    emb = _SyncOnly()

    async def main() -> int:
        await run_async(io.embed(emb, ["a"]))
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert emb.threads and emb.threads[0] != loop_thread


def test_a_nested_flow_runs_with_the_callers_driver() -> None:
    emb = _Embedder()

    def inner() -> Flow[float]:
        vectors = yield from io.embed(emb, ["q"])
        return float(vectors[0, 0])

    def outer() -> Flow[tuple[float, bool]]:
        return (yield from io.single_flight(SingleFlight(5.0), "k", inner))

    assert run_sync(outer()) == (1.0, True)
    assert asyncio.run(run_async(outer())) == (0.0, True)
    assert [kind for kind, _ in emb.calls] == ["sync", "async"]


def test_compute_is_called_or_awaited() -> None:
    assert run_sync(io.compute(lambda: 41 + 1)) == 42

    async def answer() -> int:
        await asyncio.sleep(0)
        return 7

    assert asyncio.run(run_async(io.compute(answer))) == 7


def test_an_exception_is_thrown_into_the_flow_and_its_cleanup_still_runs() -> None:
    released: list[str] = []

    def fail() -> None:
        raise KeyboardInterrupt

    def flow() -> Flow[None]:
        try:
            yield from io.call(fail)
        finally:
            yield from io.call(released.append, "done")

    with pytest.raises(KeyboardInterrupt):
        run_sync(flow())
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run_async(flow()))
    assert released == ["done", "done"]


def test_spawn_starts_a_thread_or_a_task_without_waiting() -> None:
    started = threading.Event()

    def background() -> Flow[None]:
        yield from io.call(started.set)

    run_sync(io.spawn(background()))
    assert started.wait(5.0)

    async def main() -> None:
        done = asyncio.Event()

        def flow() -> Flow[None]:
            yield from io.sleep(0)
            done.set()

        await run_async(io.spawn(flow()))
        await asyncio.wait_for(done.wait(), 5.0)

    asyncio.run(main())


def test_ops_are_built_only_in_io() -> None:
    """No flow yields an ``Op`` by hand (a method named by a string, a private method):
    every step goes through a typed helper of ``agent_cache._io``."""
    root = Path(__file__).resolve().parents[3] / "agent_cache"
    built = {
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if re.search(r"\bOp\(", p.read_text(encoding="utf-8"))
    }
    assert built == {"_io.py"}
    assert Op(print).afn is None and Op(print).args == ()
