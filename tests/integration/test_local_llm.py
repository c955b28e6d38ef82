"""The real local model server (SmolLM2-135M on llama.cpp), reached through ``VllmRouter``
with one endpoint: the router speaks the OpenAI-compatible API that llama.cpp serves."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_cache.errors import BackendError
from agent_cache.local_llm import (
    DEFAULT_MODEL_ALIAS,
    LocalLlamaServer,
    LocalServerDied,
    find_smollm2_gguf,
)
from agent_cache.usage import response_usage
from agent_cache.vllm import VllmRouter

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalLlamaServer]:
    with LocalLlamaServer(n_ctx=1024) as srv:
        yield srv


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_gguf_ships_with_the_package() -> None:
    path = find_smollm2_gguf()
    assert path.suffix == ".gguf"
    assert path.stat().st_size > 50_000_000  # the real weights, not a pointer file
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"


def _router(url: str, **kwargs: object) -> VllmRouter:
    return VllmRouter([url], policy="round_robin", metrics_interval=None, **kwargs)  # type: ignore[arg-type]


def test_server_reports_its_model(server: LocalLlamaServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.base_url.endswith("/v1")
    with _router(server.base_url) as router:
        assert DEFAULT_MODEL_ALIAS in router.models()


def test_chat_answers_with_usage(server: LocalLlamaServer) -> None:
    with _router(server.base_url, model=server.model) as router:
        reply = router.chat(HELLO, max_tokens=16, temperature=0.0)
        stats = router.stats()[server.base_url]
    assert reply["choices"][0]["message"]["content"].strip()
    usage = response_usage(reply)
    assert usage is not None and usage.prompt_tokens > 0
    assert 0 < usage.completion_tokens <= 16
    assert usage.cached_tokens >= 0  # llama.cpp's server reports none: 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert stats.requests == 1 and stats.prompt_tokens == usage.prompt_tokens


def test_a_streamed_chat_is_accepted(server: LocalLlamaServer) -> None:
    """The one extra field a stream sends (``stream_options.include_usage``) is OpenAI's
    own: the server takes it (no 400), though llama-cpp-python's server sends no usage
    chunk (so no prompt tokens are recorded for a stream there)."""
    with _router(server.base_url, model=server.model) as router:
        chunks = list(router.stream_chat(HELLO, max_tokens=8))
        stats = router.stats()[server.base_url]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.strip()
    assert stats.requests == 1 and stats.failures == 0 and stats.in_flight == 0


async def test_async_chat(server: LocalLlamaServer) -> None:
    async with _router(server.base_url, model=server.model) as router:
        replies = await asyncio.gather(
            router.achat(HELLO, max_tokens=8),
            router.achat([{"role": "user", "content": "Say hello."}], max_tokens=8),
        )
        assert DEFAULT_MODEL_ALIAS in await router.amodels()
    for reply in replies:
        usage = response_usage(reply)
        assert reply["choices"][0]["message"]["content"].strip()
        assert usage is not None and usage.prompt_tokens > 0


def test_unreachable_server_is_a_backend_error_after_retries() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with (
        _router(url, connect_timeout=2, backoff_initial=0.0) as router,
        pytest.raises(BackendError, match="3 attempt") as info,
    ):
        router.chat(HELLO, max_tokens=4)
    assert info.value.endpoint == url


async def test_unreachable_server_is_a_backend_error_async() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    async with _router(url, connect_timeout=2, backoff_initial=0.0) as router:
        with pytest.raises(BackendError) as info:
            await router.achat(HELLO, max_tokens=4)
    assert info.value.endpoint == url


def test_server_process_is_gone_after_exit() -> None:
    with LocalLlamaServer(n_ctx=512) as srv:
        process = srv.process
        assert process is not None and process.poll() is None
        log_path = srv.log_path
        assert log_path is not None and log_path.exists()
    assert process.poll() is not None  # terminated (or killed) and reaped
    assert not srv.running
    assert not log_path.exists()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{srv.base_url}/models", timeout=2)


def test_startup_failure_reports_the_log_tail(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    server = LocalLlamaServer(bogus, startup_timeout=60)
    with pytest.raises(BackendError) as info:
        server.start()
    message = str(info.value)
    assert isinstance(info.value, LocalServerDied)
    assert info.value.returncode > 0 and info.value.signal_name is None
    assert "exited with code" in message
    assert "Log tail, last" in message
    assert str(bogus) in message  # the server's own log names the file it failed to load
    assert not server.running
    assert server.log_path is not None  # kept for a failed start; the test cleans up
    assert f"Server log (kept): {server.log_path}" in message
    server.log_path.unlink()


def test_the_installed_llama_cpp_build_is_portable() -> None:
    """scripts/check_llama_build.py, run with this venv's Python, finds no AVX-512 or AMX
    instruction in any installed libggml or libllama library (the build runs on any
    x86-64-v3 host)."""
    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.submodule_search_locations
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    libraries = sorted(p.resolve().name for p in lib.glob("lib*.so*") if p.is_file())
    assert any(n.startswith("libggml") for n in libraries), f"no libggml*.so under {lib}"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check_llama_build.py")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(proc.stdout.splitlines()) == sorted({f"portable {n}" for n in libraries})


def test_the_smoke_test_gets_one_token_from_the_real_model(server: LocalLlamaServer) -> None:
    server.check()
    reply = server.smoke_test()
    assert isinstance(reply["choices"][0]["message"]["content"], str)
    assert reply["usage"]["prompt_tokens"] > 0
    assert reply["usage"]["completion_tokens"] == 1
    server.raise_if_dead()  # still alive after it
    assert server.running


def test_a_killed_real_server_is_reported_with_its_signal_and_log() -> None:
    """The real llama.cpp server, killed as the OOM killer would: the next request's
    connection error comes with how the server died and its log."""
    with pytest.raises(LocalServerDied) as info, LocalLlamaServer(n_ctx=512) as srv:
        assert srv.process is not None
        os.kill(srv.process.pid, signal.SIGKILL)
        srv.smoke_test()
    message = str(info.value)
    assert info.value.signal_name == "SIGKILL" and info.value.phase == "after it was ready"
    assert "was killed by signal SIGKILL" in message and "out of memory" in message
    assert info.value.log_path is not None and info.value.log_path.is_file()
    assert "Uvicorn running on" in message  # the real server's log tail
    info.value.log_path.unlink()
