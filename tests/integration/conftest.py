"""Fixtures that start real services on loopback for the integration tests.

The local model (SmolLM2 on llama.cpp) is checked once, before the first test: when any
collected test needs it, the shared server is started and asked for one real one-token
completion. A server that dies there (llama.cpp built for another CPU dies with SIGSEGV
or SIGILL) stops the whole run with exit status 3 and one message saying how it died,
the likely cause and its log, instead of a connection traceback from every test. If it
dies later, each test that uses it fails with that message.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_cache.bench.servers import free_port, redis_answers, redis_argv, stop
from agent_cache.errors import AgentCacheError
from agent_cache.local_llm import LocalLlamaServer

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


# Tests that use these fixtures need the shared local model; so do those in modules that
# start a server of their own (names from these modules in their globals).
_LOCAL_MODEL_FIXTURES = frozenset({"llm_server", "local_llm"})
_LOCAL_MODEL_MODULES = ("agent_cache.local_llm", "agent_cache.demo")
_LOCAL_MODEL = pytest.StashKey[LocalLlamaServer]()
#: The exit status of a run stopped because the local model does not work.
LOCAL_MODEL_EXIT_STATUS = 3


def _needs_local_model(item: pytest.Item) -> bool:
    if _LOCAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    names = vars(module).values() if module is not None else ()
    return any(
        str(getattr(value, "__module__", "")).startswith(_LOCAL_MODEL_MODULES) for value in names
    )


def _start_local_model(config: pytest.Config) -> LocalLlamaServer:
    """Start the shared server and run one real one-token completion on it; stop the
    whole run (exit status 3) with the server's own error if that fails."""
    server = LocalLlamaServer(n_ctx=2048)
    config.add_cleanup(server.stop)
    try:
        server.start()
        server.smoke_test()
    except AgentCacheError as exc:  # LocalServerDied, a timeout, a missing package
        server.stop()  # a dead server's log is kept: the message names it
        pytest.exit(
            "the local model (llama.cpp) failed its one-token check before the tests that "
            f"need it; stopping the run.\n{exc}\n",
            returncode=LOCAL_MODEL_EXIT_STATUS,
        )
    config.stash[_LOCAL_MODEL] = server
    return server


def pytest_collection_finish(session: pytest.Session) -> None:
    """Check the local model once, before any test runs, when a collected test needs it."""
    if session.config.option.collectonly or _LOCAL_MODEL in session.config.stash:
        return
    if any(_needs_local_model(item) for item in session.items):
        _start_local_model(session.config)


@pytest.fixture(scope="session")
def local_llm(request: pytest.FixtureRequest) -> LocalLlamaServer:
    """The shared real local model server (SmolLM2-135M on llama.cpp's OpenAI-compatible
    server), started and checked before the first test; stopped at the end of the run."""
    server = request.config.stash.get(_LOCAL_MODEL, None)
    return server if server is not None else _start_local_model(request.config)


@pytest.fixture(scope="session")
def llm_server(local_llm: LocalLlamaServer) -> str:
    """The shared local model's base URL (``http://127.0.0.1:PORT/v1``)."""
    return local_llm.base_url


def _fail_if_dead(server: LocalLlamaServer, when: str) -> None:
    death = server.died()
    if death is not None:
        pytest.fail(f"the shared local model server is dead {when}:\n{death}", pytrace=False)


@pytest.fixture(autouse=True)
def _local_model_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that uses the shared local model fails with the server's own error when the
    server has died (before the test, or during it: then its connection errors come with
    this error at teardown, which says why)."""
    if not _LOCAL_MODEL_FIXTURES & set(request.fixturenames):
        yield
        return
    server: LocalLlamaServer = request.getfixturevalue("local_llm")
    _fail_if_dead(server, "before this test")
    yield
    _fail_if_dead(server, "after this test")
