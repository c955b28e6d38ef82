"""A fake of vLLM's OpenAI-compatible server for tests: in-process or on loopback.

It implements the fields the router depends on, the way vLLM documents them:
``usage.prompt_tokens_details.cached_tokens`` computed by the prefix-cache simulator
(``null`` when zero, as vLLM sends it, or missing / 0 on request), ``cache_salt``,
``stream_options.include_usage`` (a final ``choices: []`` chunk), ``/health``,
``/metrics`` (``vllm:prefix_cache_{hits,queries}_total``) and ``/tokenize`` at the server
root. It can be told to fail (any status), hang or die.

Example:
    >>> fake = FakeVllm("a")
    >>> client = httpx.Client(transport=mock_transport({"a:8000": fake}))
    >>> body = {"messages": [{"role": "user", "content": "hi " * 40}]}
    >>> client.post("http://a:8000/v1/chat/completions", json=body).json()["usage"]["prompt_tokens"]
    58
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

import httpx

from agent_cache.prompt.simulator import PrefixCacheSimulator

__all__ = ["FakeRequest", "FakeVllm", "FakeVllmServer", "Hang", "mock_transport"]

_WORD = re.compile(r"\w+|[^\w\s]")
BOS = 1


class Hang(Exception):
    """Raised by :meth:`FakeVllm.respond` for an injected hang."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"hang for {seconds}s")
        self.seconds = seconds


@dataclass(frozen=True)
class FakeRequest:
    """One request the fake received."""

    method: str
    path: str
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


Reply = tuple[int, dict[str, str], bytes]


class FakeVllm:
    """The behaviour of one vLLM server (no sockets; see :func:`mock_transport` and
    :class:`FakeVllmServer`).

    Args:
        name: Goes into the answer text, so tests see which replica answered.
        block_size: KV block size of the simulated prefix cache.
        capacity_blocks: ``num_gpu_blocks`` of the simulated cache (None: unbounded).
        prompt_tokens_details: Like ``--enable-prompt-tokens-details``; False sends
            ``prompt_tokens_details: null`` always.
        zero_cached: How a zero hit is reported: ``"null"`` (vLLM's usual), ``"missing"``
            or ``"zero"`` (newer ``main``).
        model: The served model id.
        answer: The reply text (default ``"Hello from NAME."``).

    Example:
        >>> fake = FakeVllm("gpu-1")
        >>> fake.fail(503, times=2)  # the next two API requests get a 503
        >>> fake.hang(times=1)  # then one hangs
        >>> fake.die()  # and from now on connections are refused
    """

    def __init__(
        self,
        name: str = "fake",
        *,
        block_size: int = 16,
        capacity_blocks: int | None = None,
        prompt_tokens_details: bool = True,
        zero_cached: Literal["null", "missing", "zero"] = "null",
        model: str = "fake-model",
        answer: str | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.answer = answer if answer is not None else f"Hello from {name}."
        self.prompt_tokens_details = prompt_tokens_details
        self.zero_cached = zero_cached
        self.sim = PrefixCacheSimulator(block_size, capacity_blocks)
        self.requests: list[FakeRequest] = []
        self.dead = False
        self.engine_dead = False
        self._faults: list[tuple[str, float]] = []  # ("status", code) | ("hang", seconds)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ control
    def fail(self, status: int = 503, times: int = 1) -> None:
        """Answer the next ``times`` API requests (under ``/v1``) with ``status``."""
        with self._lock:
            self._faults.extend([("status", float(status))] * times)

    def hang(self, seconds: float = 30.0, times: int = 1) -> None:
        """Stall the next ``times`` API requests (a mock transport raises ReadTimeout)."""
        with self._lock:
            self._faults.extend([("hang", seconds)] * times)

    def die(self) -> None:
        """Refuse every connection (a mock transport raises ConnectError)."""
        self.dead = True

    def revive(self) -> None:
        """Accept connections again (the cache survives, as if the network came back)."""
        self.dead = False

    def api_requests(self) -> list[FakeRequest]:
        """Requests to completion endpoints (not health, metrics, tokenize)."""
        return [r for r in self.requests if r.path.endswith("completions")]

    def next_fault(self, path: str) -> tuple[str, float] | None:
        """The next injected fault for an API request to ``path`` (consumed), if any."""
        if not path.startswith("/v1/"):
            return None
        with self._lock:
            return self._faults.pop(0) if self._faults else None

    # ------------------------------------------------------------------ model
    @staticmethod
    def tokenize_text(text: str, *, bos: bool = True) -> list[int]:
        """Word-level token ids (a stable hash per word or punctuation mark)."""
        ids = [100 + zlib.crc32(w.encode("utf-8")) % 32000 for w in _WORD.findall(text)]
        return ([BOS] if bos else []) + ids

    @staticmethod
    def render(messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> str:
        """A ChatML-style chat template."""
        text = "".join(
            f"<|im_start|>{m.get('role', 'user')}\n{m.get('content') or ''}<|im_end|>\n"
            for m in messages
        )
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")

    def _usage(self, prompt: list[int], completion: int, cached: int) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": len(prompt),
            "completion_tokens": completion,
            "total_tokens": len(prompt) + completion,
        }
        if not self.prompt_tokens_details:
            usage["prompt_tokens_details"] = None
        elif cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        elif self.zero_cached == "null":
            usage["prompt_tokens_details"] = None
        elif self.zero_cached == "zero":
            usage["prompt_tokens_details"] = {"cached_tokens": 0}
        return usage

    def _generate(
        self, prompt: list[int], body: Mapping[str, Any]
    ) -> tuple[list[str], dict[str, Any]]:
        words = self.answer.split(" ")
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        if isinstance(limit, int):
            words = words[: max(1, limit)]
        salt = body.get("cache_salt") if isinstance(body.get("cache_salt"), str) else None
        with self._lock:
            cached = self.sim.run(prompt, salt=salt, output_tokens=len(words))
        return words, self._usage(prompt, len(words), cached)

    # ------------------------------------------------------------------ HTTP
    def respond(self, method: str, path: str, headers: Mapping[str, str], raw: bytes) -> Reply:
        """Record and answer one HTTP request.

        Raises:
            Hang: The request should stall for ``Hang.seconds`` (an injected hang).
        """
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        with self._lock:
            self.requests.append(FakeRequest(method, path, body, dict(headers)))
        fault = self.next_fault(path)
        if fault is not None:
            kind, value = fault
            if kind == "hang":
                raise Hang(value)
            return _json(int(value), {"object": "error", "message": "injected", "code": int(value)})
        if method == "GET" and path == "/health":
            return (503 if self.engine_dead else 200), {}, b""
        if method == "GET" and path == "/metrics":
            return 200, {"content-type": "text/plain; version=0.0.4"}, self.metrics_text().encode()
        if method == "GET" and path == "/v1/models":
            return _json(200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if method == "POST" and isinstance(body, dict):
            if path == "/tokenize":
                tokens = (
                    self.tokenize_text(self.render(body["messages"]))
                    if "messages" in body
                    else self.tokenize_text(str(body.get("prompt", "")))
                )
                return _json(
                    200,
                    {
                        "count": len(tokens),
                        "max_model_len": 8192,
                        "tokens": tokens,
                        "token_strs": None,
                    },
                )
            if path == "/v1/chat/completions" and isinstance(body.get("messages"), list):
                return self._chat(body)
            if path == "/v1/completions" and isinstance(body.get("prompt"), str):
                return self._completion(body)
            if path.endswith("completions"):
                return _json(400, {"object": "error", "message": "bad request", "code": 400})
        return _json(404, {"detail": "Not Found"})

    def _chat(self, body: Mapping[str, Any]) -> Reply:
        prompt = self.tokenize_text(self.render(body["messages"]))
        words, usage = self._generate(prompt, body)
        created = int(time.time())
        base = {"id": "chatcmpl-fake", "created": created, "model": body.get("model") or self.model}
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks: list[dict[str, Any]] = []
            deltas = [{"role": "assistant", "content": ""}] + [
                {"content": (" " if i else "") + w} for i, w in enumerate(words)
            ]
            for delta in deltas:
                chunks.append(
                    {
                        **base,
                        "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                    }
                )
            chunks.append(
                {
                    **base,
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                }
            )
            if include:
                for c in chunks:
                    c["usage"] = None
                chunks.append(
                    {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                )
            return _sse(chunks)
        return _json(
            200,
            {
                **base,
                "object": "chat.completion",
                "usage": usage,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": " ".join(words)},
                    }
                ],
            },
        )

    def _completion(self, body: Mapping[str, Any]) -> Reply:
        prompt = self.tokenize_text(str(body["prompt"]))
        words, usage = self._generate(prompt, body)
        return _json(
            200,
            {
                "id": "cmpl-fake",
                "object": "text_completion",
                "created": int(time.time()),
                "model": body.get("model") or self.model,
                "choices": [{"index": 0, "text": " ".join(words), "finish_reason": "stop"}],
                "usage": usage,
            },
        )

    def metrics_text(self) -> str:
        """The prefix-cache counters in Prometheus text format."""
        labels = f'engine="0",model_name="{self.model}"'
        return (
            "# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of "
            "queried tokens.\n"
            "# TYPE vllm:prefix_cache_queries counter\n"
            f"vllm:prefix_cache_queries_total{{{labels}}} {float(self.sim.queries)}\n"
            "# HELP vllm:prefix_cache_hits Prefix cache hits, in terms of number of cached "
            "tokens.\n"
            "# TYPE vllm:prefix_cache_hits counter\n"
            f"vllm:prefix_cache_hits_total{{{labels}}} {float(self.sim.hits)}\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{{{labels}}} 0.0\n"
        )


def _json(status: int, data: Any) -> Reply:
    return status, {"content-type": "application/json"}, json.dumps(data).encode()


def _sse(chunks: Sequence[Mapping[str, Any]]) -> Reply:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return 200, {"content-type": "text/event-stream"}, body.encode()


def mock_transport(fakes: Mapping[str, FakeVllm]) -> httpx.MockTransport:
    """An ``httpx.MockTransport`` serving several fakes, keyed by ``host:port``.

    Unknown hosts and dead fakes raise ``httpx.ConnectError``; a hang raises
    ``httpx.ReadTimeout``. Works for sync and async clients.

    Example:
        >>> transport = mock_transport({"gpu-1:8000": FakeVllm("1"), "gpu-2:8000": FakeVllm("2")})
    """

    def handler(request: httpx.Request) -> httpx.Response:
        netloc = request.url.netloc.decode("ascii")
        fake = fakes.get(netloc)
        if fake is None or fake.dead:
            raise httpx.ConnectError(f"connection refused: {netloc}", request=request)
        try:
            status, headers, content = fake.respond(
                request.method, request.url.path, dict(request.headers), request.read()
            )
        except Hang as exc:
            raise httpx.ReadTimeout(f"{netloc} hung", request=request) from exc
        return httpx.Response(status, headers=headers, content=content)

    return httpx.MockTransport(handler)


class FakeVllmServer:
    """Serves a :class:`FakeVllm` over HTTP on loopback (a real socket, a real port).

    ``stop()`` makes the port refuse connections (a dead replica); ``start()`` again
    brings it back on the same port. A hang really sleeps.

    Example:
        >>> with FakeVllmServer(FakeVllm("a")) as server:  # doctest: +SKIP
        ...     httpx.get(server.root_url + "/health").status_code
        200
    """

    def __init__(self, fake: FakeVllm, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.fake = fake
        self.host = host
        self.port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def root_url(self) -> str:
        """The server root (``/health``, ``/metrics``, ``/tokenize``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``.../v1``)."""
        return self.root_url + "/v1"

    def start(self) -> FakeVllmServer:
        """Listen (again, on the same port once one was chosen)."""
        if self._server is not None:
            return self
        server = ThreadingHTTPServer((self.host, self.port), _handler_for(self.fake))
        server.daemon_threads = True
        self.port = int(server.server_address[1])
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name=f"fake-vllm-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: the port refuses connections (a dead replica)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeVllmServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _handler_for(fake: FakeVllm) -> Callable[..., BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            headers_in = {k.lower(): v for k, v in self.headers.items()}
            try:
                status, headers, content = fake.respond(self.command, path, headers_in, raw)
            except Hang as exc:
                time.sleep(exc.seconds)
                status, headers, content = _json(504, {"object": "error", "message": "hung"})
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            try:
                self.wfile.write(content)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_GET = _serve
        do_POST = _serve

    return Handler
