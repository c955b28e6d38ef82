"""The real local model server (SmolLM2-135M on llama.cpp) and the OpenAI-compatible client."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_cache.errors import BackendError
from agent_cache.local_llm import DEFAULT_MODEL_ALIAS, LocalLlamaServer, find_smollm2_gguf
from agent_cache.openai_compat import ChatClient

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


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


def test_server_reports_its_model(server: LocalLlamaServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.base_url.endswith("/v1")
    with ChatClient(server.base_url) as client:
        assert DEFAULT_MODEL_ALIAS in client.list_models()


def test_chat_answers_with_usage(server: LocalLlamaServer) -> None:
    with ChatClient(server.base_url, model=server.model) as client:
        result = client.chat(HELLO, max_tokens=16)
    assert result.text.strip()
    assert result.prompt_tokens > 0
    assert 0 < result.completion_tokens <= 16
    assert result.cached_tokens >= 0
    assert result.latency_s > 0
    assert result.usage()["prompt_tokens"] == result.prompt_tokens


async def test_async_chat(server: LocalLlamaServer) -> None:
    async with ChatClient(server.base_url, model=server.model) as client:
        results = await asyncio.gather(
            client.achat(HELLO, max_tokens=8),
            client.achat([{"role": "user", "content": "Say hello."}], max_tokens=8),
        )
        assert DEFAULT_MODEL_ALIAS in await client.alist_models()
    assert all(r.text.strip() and r.prompt_tokens > 0 for r in results)
    assert client._aclient is None  # aclose released the async pool


def test_unreachable_server_is_a_backend_error_after_retries() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with ChatClient(url, timeout=2) as client, pytest.raises(BackendError) as info:
        client.chat(HELLO, max_tokens=4)
    assert info.value.endpoint == f"{url}/chat/completions"
    assert isinstance(info.value.__cause__, httpx.ConnectError)


async def test_unreachable_server_is_a_backend_error_async() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    async with ChatClient(url, timeout=2) as client:
        with pytest.raises(BackendError) as info:
            await client.achat(HELLO, max_tokens=4)
    assert isinstance(info.value.__cause__, httpx.ConnectError)


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
    assert "exited with code" in message
    assert "log tail" in message or "tail:" in message
    assert str(bogus) in message  # the server's own log names the file it failed to load
    assert not server.running
    assert server.log_path is not None  # kept for a failed start; the test cleans up
    server.log_path.unlink()
