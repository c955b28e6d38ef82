"""Real Redis and a real Chroma server, SIGSTOPped and killed mid-run under 8 threads.

No exception reaches a caller, every call is bounded by the timeout (after the first
few, a circuit breaker makes them instant misses), and hits resume in the same
``LayeredCache`` once the server is back, without restarting anything.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder
from tests.integration.conftest import _free_port, _redis_answers, _stop, redis_argv

pytestmark = pytest.mark.integration

TIMEOUT = 0.4
RESET = 1.0


class _Server:
    """A server process of this test's own, restartable on the same port and data."""

    def __init__(
        self,
        argv: Callable[[int], list[str]],
        ready: Callable[[int], bool],
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = _free_port()
        self._argv, self._ready, self._env = argv, ready, env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self._argv(self.port),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self._env,
        )
        deadline = time.monotonic() + 60
        while not self._ready(self.port):
            assert time.monotonic() < deadline and self.proc.poll() is None, "no start"
            time.sleep(0.1)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            _stop(self.proc)


def _chroma_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[_Server]:
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is needed"
    server = _Server(
        lambda port: redis_argv(binary, port, tmp_path),
        _redis_answers,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[_Server]:
    binary = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False", CHROMA_TELEMETRY="False")
    server = _Server(
        lambda port: [
            binary,
            "run",
            "--path",
            str(tmp_path / "chroma"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        _chroma_answers,
        env,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _hammer(
    call: Callable[[int], object], seconds: float, threads: int = 8
) -> tuple[list[float], list[BaseException]]:
    """``call(i)`` from ``threads`` threads for ``seconds``; per-call latencies, errors."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker(n: int) -> None:
        i = 0
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                call(n * 100_000 + i)
            except BaseException as exc:
                with lock:
                    errors.append(exc)
            with lock:
                latencies.append(time.perf_counter() - started)
            i += 1

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return latencies, errors


def _p(values: list[float], q: float) -> float:
    data = sorted(values)
    return data[min(len(data) - 1, round(q * (len(data) - 1)))]


def _traffic(cache: LayeredCache) -> Callable[[int], object]:
    def call(i: int) -> object:
        if i % 3 == 0:
            return cache.get_or_compute(f"new question {i}?", lambda: f"answer {i}")
        if i % 3 == 1:
            return cache.store(f"stored question {i}?", f"answer {i}")
        return cache.lookup("What is RAG?")

    return call


def _wait_for_hit(cache: LayeredCache, prompt: str, layer: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < 4 * RESET + 5:
        hit = cache.lookup(prompt)
        if hit is not None and hit.layer == layer:
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"no {layer} hit for {prompt!r} after the server came back")


def test_a_stalled_then_killed_redis_never_raises_and_recovers(redis_server: _Server) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    with LayeredCache(
        path=None,
        redis_url=url,
        embedder=HashEmbedder(),
        backend_timeout=TIMEOUT,
        circuit_reset=RESET,
    ) as cache:
        cache.store("What is RAG?", "retrieval")
        assert cache.lookup("What is RAG?") is not None

        redis_server.signal(signal.SIGSTOP)
        try:
            stalled, errors = _hammer(_traffic(cache), 3.0)
            assert cache.health()["exact"] in ("open", "half_open")
        finally:
            redis_server.signal(signal.SIGCONT)
        assert not errors, errors[:3]
        # a get_or_compute makes up to 3 store calls before the circuit opens
        assert _p(stalled, 0.99) < 3 * TIMEOUT + 0.5, _p(stalled, 0.99)
        assert _p(stalled, 0.5) < 0.05, _p(stalled, 0.5)  # fast misses, not timeouts
        assert len(stalled) > 200  # 8 threads were not stuck waiting
        _wait_for_hit(cache, "What is RAG?", "exact")  # the same instance, by itself

        redis_server.kill()  # mid-run: connection refused / reset
        killed, errors = _hammer(_traffic(cache), 1.5)
        assert not errors, errors[:3]
        assert _p(killed, 0.99) < 3 * TIMEOUT + 0.5
        redis_server.start()  # same port, empty (no persistence)
        started = time.monotonic()
        while cache.health()["exact"] != "closed" or cache.lookup("What is RAG?") is None:
            cache.store("What is RAG?", "retrieval")
            assert time.monotonic() - started < 4 * RESET + 5, "no recovery"
            time.sleep(0.05)
        assert cache.stats().errors > 0


def test_a_stalled_then_killed_chroma_server_never_raises_and_recovers(
    chroma_server: _Server, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{chroma_server.port}"
    with LayeredCache(
        path=tmp_path / "cache",
        chroma_url=url,
        embedder=HashEmbedder(),
        backend_timeout=TIMEOUT,
        circuit_reset=RESET,
    ) as cache:
        paraphrase = "how do I reset my password !"
        # healthy first; a first connect on a loaded machine may still exceed 0.4 s (TLS
        # context, server warm-up): that is a miss, and the next store connects again
        started = time.monotonic()
        while (hit := cache.lookup(paraphrase)) is None or hit.layer != "semantic":
            assert time.monotonic() - started < 4 * RESET + 5, "never healthy"
            cache.store("How do I reset my password?", "use the link")
            time.sleep(0.05)

        def call(i: int) -> object:
            if i % 2:
                return cache.store(f"question number {i}?", f"answer {i}")
            return cache.lookup(paraphrase)

        chroma_server.signal(signal.SIGSTOP)
        try:
            stalled, errors = _hammer(call, 3.0)
            assert cache.health()["semantic"] in ("open", "half_open")
            # the exact layer (SQLite) still answers while the vectors are away
            hit = cache.lookup("How do I reset my password?")
            assert hit is not None and hit.layer == "exact"
        finally:
            chroma_server.signal(signal.SIGCONT)
        assert not errors, errors[:3]
        assert _p(stalled, 0.99) < 2 * TIMEOUT + 0.5, _p(stalled, 0.99)
        assert _p(stalled, 0.5) < 0.05, _p(stalled, 0.5)
        _wait_for_hit(cache, paraphrase, "semantic")

        chroma_server.kill()
        killed, errors = _hammer(call, 1.5)
        assert not errors, errors[:3]
        assert _p(killed, 0.99) < 2 * TIMEOUT + 0.5
        chroma_server.start()  # same port, same data folder
        _wait_for_hit(cache, paraphrase, "semantic")
