"""Fixtures that start real services on loopback for the integration tests."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_cache.bench.servers import free_port, redis_answers, redis_argv, stop

# one definition of the loopback servers, shared with `agent-cache bench backends`
_free_port, _redis_answers, _stop = free_port, redis_answers, stop


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``redis-server`` on a free loopback port, no persistence; stopped at the end.

    Fails (never skips) when the binary is missing: the Redis tests are part of the suite.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "redis-server is not on PATH; the Redis integration tests need a real server: "
            "install it (`apt-get install redis-server`, or `make services`)",
            pytrace=False,
        )
    workdir: Path = tmp_path_factory.mktemp("redis")
    log = workdir / "redis.log"
    last_error = ""
    for _attempt in range(3):  # the free port may be taken between probe and bind
        port = _free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                redis_argv(binary, port, workdir),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            if _redis_answers(port):
                try:
                    yield f"redis://127.0.0.1:{port}/0"
                finally:
                    _stop(proc)
                return
            time.sleep(0.05)
        _stop(proc)
        last_error = log.read_text(errors="replace")[-2000:]
    pytest.fail(f"redis-server did not start on loopback:\n{last_error}", pytrace=False)


@pytest.fixture(scope="session")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Chroma server (`chroma run`, from the chromadb package) on loopback."""
    import os
    import sys
    import urllib.request

    binary = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    if not Path(binary).exists():
        pytest.fail("the `chroma` command (package chromadb) is missing", pytrace=False)
    workdir: Path = tmp_path_factory.mktemp("chroma")
    port = _free_port()
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False", CHROMA_TELEMETRY="False")
    log = (workdir / "chroma.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            "run",
            "--path",
            str(workdir / "data"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                break
        except OSError:
            time.sleep(0.3)
    else:
        _stop(proc)
        pytest.fail(f"chroma server did not start: {(workdir / 'chroma.log').read_text()[-2000:]}")
    if proc.poll() is not None:
        pytest.fail(f"chroma server exited: {(workdir / 'chroma.log').read_text()[-2000:]}")
    try:
        yield url
    finally:
        _stop(proc)
        log.close()


@pytest.fixture(scope="session")
def minilm():  # type: ignore[no-untyped-def]
    """The real bundled all-MiniLM-L6-v2 (loaded once per session, offline)."""
    from agent_cache.embedders import embedder_from

    return embedder_from("sentence-transformers/all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def llm_server() -> Iterator[str]:
    """A real local model (SmolLM2-135M on llama.cpp's OpenAI-compatible server) for the
    whole session; yields its base URL (``http://127.0.0.1:PORT/v1``)."""
    from agent_cache.local_llm import LocalLlamaServer

    with LocalLlamaServer(n_ctx=2048) as srv:
        yield srv.base_url
