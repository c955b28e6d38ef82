"""Faults on real servers: a stalled Redis, a stalled Chroma server, a vanished collection."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder
from tests.integration.conftest import _free_port, _redis_answers, _stop, redis_argv

pytestmark = pytest.mark.integration


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of this test's own (it gets SIGSTOPped)."""
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is needed"
    port = _free_port()
    proc = subprocess.Popen(
        redis_argv(binary, port, tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while not _redis_answers(port):
        assert time.monotonic() < deadline and proc.poll() is None, "redis did not start"
        time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0", proc
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        _stop(proc)


def test_a_stalled_redis_is_a_bounded_miss_and_hits_resume(
    own_redis: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = own_redis
    with LayeredCache(
        path=None, redis_url=url, embedder=HashEmbedder(), backend_timeout=0.5, circuit_reset=0.5
    ) as cache:
        cache.store("What is RAG?", "retrieval")
        assert cache.lookup("What is RAG?") is not None
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            assert cache.lookup("What is RAG?") is None  # a miss, not an exception
            cache.store("What is KV?", "key value")  # a logged failure, not an exception
            assert cache.get_or_compute("What is new?", lambda: "computed") == "computed"
            elapsed = time.monotonic() - started
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert elapsed < 8 * 0.5 + 2.0, elapsed  # each call bounded by the timeout
        assert cache.stats().errors >= 2
        time.sleep(0.6)  # the circuit opened: its probe is due after circuit_reset
        hit = cache.lookup("What is RAG?")  # the same instance recovers by itself
        assert hit is not None and hit.response == "retrieval"


def test_a_stalled_chroma_server_is_a_bounded_miss() -> None:
    with socket.socket() as server:  # accepts connections, never answers: a stalled server
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        with LayeredCache(
            path=None, chroma_url=url, embedder=HashEmbedder(), backend_timeout=0.5
        ) as cache:
            started = time.monotonic()
            cache.store("How do I reset my password?", "use the link")
            assert cache.lookup("how do I reset my password !") is None
            elapsed = time.monotonic() - started
            assert cache.lookup("How do I reset my password?") is not None  # exact: memory
    assert elapsed < 6.0, elapsed
    assert cache.stats().errors == 2


def test_a_vanished_chroma_collection_is_recreated(chroma_url: str) -> None:
    import chromadb

    prefix = f"gone.{uuid.uuid4().hex[:8]}"
    with LayeredCache(
        path=None, chroma_url=chroma_url, embedder=HashEmbedder(), prefix=prefix
    ) as cache:
        cache.store("How do I reset my password?", "use the link")
        assert cache.lookup("how do I reset my password !") is not None
        host, port = chroma_url.rsplit(":", 1)
        admin = chromadb.HttpClient(host=host.split("//")[1], port=int(port))
        admin.delete_collection(prefix)  # e.g. the server restarted on an empty folder
        assert cache.lookup("how do I reset my password !") is None  # no exception
        cache.store("How do I cancel my order?", "in the orders page")
        hit = cache.lookup("how do I cancel my order !")
        assert hit is not None and hit.layer == "semantic"
        assert cache.stats().errors == 0
        cache.clear()
