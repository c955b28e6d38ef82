"""A fake of vLLM's OpenAI-compatible server for tests: in-process or on loopback.

It implements the fields the router depends on, the way vLLM's code handles them:
``usage.prompt_tokens_details.cached_tokens`` computed by the prefix-cache simulator
(``0`` when zero, as vLLM 0.33 sends it, or ``null`` / missing on request as older
releases did), ``cache_salt`` (validated as vLLM 0.33 does: a non-empty string of at
most 128 characters without ``@``, ``/``, ``\\`` or NUL), LoRA adapters served under
their name as ``model``, ``stream_options.include_usage`` (a final ``choices: []``
chunk; the other chunks carry no ``usage`` key; a non-empty ``stream_options`` without
``stream: true`` is a 400), ``/v1/responses`` (usage as ``input_tokens`` /
``input_tokens_details``), ``/health``, ``/metrics`` (``vllm:prefix_cache_{hits,queries}_total``,
``vllm:num_requests_{running,waiting}``, ``vllm:kv_cache_usage_perc``,
``vllm:cache_config_info``) and ``/tokenize`` at the server root. Errors have vLLM's
current shape, ``{"error": {"message", "type", "param", "code"}}``. It can be told to
fail (any status), hang, die, or fail in the middle of a stream after HTTP 200 (vLLM
then sends ``data: {"error": ...}`` and ``data: [DONE]``).

Example:
    >>> fake = FakeVllm("a")
    >>> client = httpx.Client(transport=mock_transport({"a:8000": fake}))
    >>> body = {"messages": [{"role": "user", "content": "hi " * 40}]}
    >>> client.post("http://a:8000/v1/chat/completions", json=body).json()["usage"]["prompt_tokens"]
    58
"""

from __future__ import annotations

import contextlib
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

__all__ = [
    "FakeRequest",
    "FakeVllm",
    "FakeVllmServer",
    "Hang",
    "KvEventPublisher",
    "mock_transport",
]

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
        zero_cached: How a zero hit is reported: ``"zero"`` (vLLM 0.33), ``"null"``
            (older releases) or ``"missing"``.
        model: The served model id.
        answer: The reply text (default ``"Hello from NAME."``).
        kv_events: Publishes the simulated cache's ``BlockStored`` / ``BlockRemoved``
            events after each request, as ``--kv-events-config`` does (nothing when a
            request stores no new block, e.g. a fully cached prompt).
        lora_names: LoRA adapters served (``--lora-modules``): a request whose
            ``model`` names one gets blocks of its own, announced with its name.

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
        zero_cached: Literal["null", "missing", "zero"] = "zero",
        model: str = "fake-model",
        answer: str | None = None,
        kv_events: KvEventPublisher | None = None,
        lora_names: Sequence[str] = (),
    ) -> None:
        self.lora_names = set(lora_names)
        self.name = name
        self.model = model
        self.answer = answer if answer is not None else f"Hello from {name}."
        self.prompt_tokens_details = prompt_tokens_details
        self.zero_cached = zero_cached
        self.sim = PrefixCacheSimulator(block_size, capacity_blocks)
        self.kv_events = kv_events
        if kv_events is not None:
            self.sim.events = []
        self.requests: list[FakeRequest] = []
        self.dead = False
        self.engine_dead = False
        self._faults: list[tuple[str, float]] = []  # ("status", code) | ("hang", seconds)
        self._stream_faults: list[int] = []  # chunks sent before an in-stream error
        self._lock = threading.Lock()
        self.tokenize_calls = 0  # POST /tokenize answered
        self.running = 0  # reported as vllm:num_requests_running (tests set them)
        self.waiting = 0  # reported as vllm:num_requests_waiting

    # ------------------------------------------------------------------ control
    def fail(self, status: int = 503, times: int = 1) -> None:
        """Answer the next ``times`` API requests (under ``/v1``) with ``status``."""
        with self._lock:
            self._faults.extend([("status", float(status))] * times)

    def hang(self, seconds: float = 30.0, times: int = 1) -> None:
        """Stall the next ``times`` API requests (a mock transport raises ReadTimeout)."""
        with self._lock:
            self._faults.extend([("hang", seconds)] * times)

    def slow(self, seconds: float, times: int = 1) -> None:
        """The next ``times`` API requests take ``seconds`` to answer (a long generation).

        Over a mock transport nothing sleeps: a request whose read timeout is shorter
        than ``seconds`` gets ``ReadTimeout``, any other is answered at once.
        """
        with self._lock:
            self._faults.extend([("slow", seconds)] * times)

    def fail_stream(self, after: int = 1, times: int = 1) -> None:
        """The next ``times`` streams answer HTTP 200, send ``after`` chunks, then an
        error event (``data: {"error": ...}``) and ``[DONE]``, as vLLM does when the
        engine fails during generation."""
        with self._lock:
            self._stream_faults.extend([after] * times)

    def die(self) -> None:
        """Refuse every connection (a mock transport raises ConnectError)."""
        self.dead = True

    def revive(self) -> None:
        """Accept connections again (the cache survives, as if the network came back)."""
        self.dead = False

    def api_requests(self) -> list[FakeRequest]:
        """Requests to generation endpoints (not health, metrics, tokenize)."""
        return [r for r in self.requests if r.path.endswith(("completions", "/responses"))]

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
    def render(
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Any = None,
        template_kwargs: Any = None,
        continue_final_message: bool = False,
    ) -> str:
        """A ChatML-style chat template (tools and template kwargs rendered first, as
        tool-aware templates do); ``continue_final_message`` leaves the last message
        open (no end tag, no generation prompt), as vLLM does."""
        head = ""
        if tools:
            head += f"<|im_start|>tools\n{json.dumps(tools, sort_keys=True)}<|im_end|>\n"
        if template_kwargs:
            head += f"<|im_start|>kwargs\n{json.dumps(template_kwargs, sort_keys=True)}<|im_end|>\n"
        turns = [
            f"<|im_start|>{m.get('role', 'user')}\n{m.get('content') or ''}<|im_end|>\n"
            for m in messages
        ]
        if continue_final_message and turns:
            return head + "".join(turns)[: -len("<|im_end|>\n")]
        return head + "".join(turns) + ("<|im_start|>assistant\n" if add_generation_prompt else "")

    def render_body(self, body: Mapping[str, Any]) -> str:
        """A chat request's (or chat ``/tokenize`` body's) prompt, with vLLM's defaults
        (``add_generation_prompt: true``, ``continue_final_message: false``)."""
        return self.render(
            body["messages"],
            add_generation_prompt=body.get("add_generation_prompt", True) is not False,
            tools=body.get("tools"),
            template_kwargs=body.get("chat_template_kwargs"),
            continue_final_message=bool(body.get("continue_final_message")),
        )

    def tokenize_body(self, body: Mapping[str, Any]) -> list[int]:
        """``/tokenize`` as vLLM 0.33 answers it: a chat is rendered with its template
        (which holds the BOS; ``add_special_tokens`` defaults to false and would add a
        second), a prompt gets the BOS unless ``add_special_tokens`` is false."""
        if "messages" in body:
            extra = [BOS] if body.get("add_special_tokens") is True else []
            return extra + self.tokenize_text(self.render_body(body))
        bos = body.get("add_special_tokens", True) is not False
        return self.tokenize_text(str(body.get("prompt", "")), bos=bos)

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
        lora = body.get("model") if body.get("model") in self.lora_names else None
        # the answer's tokens as the next turn's template renders them (answer + end tag)
        out = self.tokenize_text(" ".join(words) + "<|im_end|>", bos=False)
        with self._lock:
            cached = self.sim.run(prompt, salt=salt, lora=lora, output_token_ids=out)
            if self.kv_events is not None and self.sim.events is not None:
                self.kv_events.publish_sim_events(
                    self.sim.events, self.sim.block_size, salt, lora=lora
                )
                self.sim.events.clear()
        return words, self._usage(prompt, len(words), cached)

    def _tokenize(self, body: dict[str, Any]) -> Reply:
        """``POST /tokenize``, as vLLM answers it."""
        if "messages" in body and "prompt" in body:
            return _error(400, "give either messages or prompt")
        if "messages" in body and not isinstance(body["messages"], list):
            return _error(400, "messages must be a list")
        self.tokenize_calls += 1
        tokens = self.tokenize_body(body)
        return _json(
            200,
            {"count": len(tokens), "max_model_len": 8192, "tokens": tokens, "token_strs": None},
        )

    # ------------------------------------------------------------------ HTTP
    def respond(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        raw: bytes,
        *,
        read_timeout: float | None = None,
    ) -> Reply:
        """Record and answer one HTTP request.

        Args:
            read_timeout: The client's read timeout, when known (a slow answer longer
                than it is a timeout).

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
            if kind == "slow":
                if read_timeout is not None and read_timeout < value:
                    raise Hang(value)
                if read_timeout is None:  # a real server really takes its time
                    time.sleep(value)
            else:
                return _error(int(value), "injected")
        if method == "GET" and path == "/health":
            return (503 if self.engine_dead else 200), {}, b""
        if method == "GET" and path == "/metrics":
            return 200, {"content-type": "text/plain; version=0.0.4"}, self.metrics_text().encode()
        if method == "GET" and path == "/v1/models":
            return _json(200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if method == "POST" and isinstance(body, dict):
            if path == "/tokenize":
                return self._tokenize(body)
            if path.endswith(("completions", "/responses")):
                problem = _validate(body)
                if problem is not None:
                    return _error(400, problem)
            if path == "/v1/chat/completions" and isinstance(body.get("messages"), list):
                return self._chat(body)
            if path == "/v1/completions" and isinstance(body.get("prompt"), str):
                return self._completion(body)
            if path == "/v1/responses" and isinstance(body.get("input"), str | list):
                return self._responses(body)
            if path.endswith(("completions", "/responses")):
                return _error(400, "bad request")
        return _json(404, {"detail": "Not Found"})

    def _chat(self, body: Mapping[str, Any]) -> Reply:
        prompt = self.tokenize_text(self.render_body(body))
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
            if include:  # vLLM: usage only on the final chunk (exclude_unset elsewhere)
                chunks.append(
                    {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                )
            return _sse(self._maybe_break(chunks))
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

    def _maybe_break(self, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Cut the stream after the injected number of chunks and append vLLM's error
        event (``create_streaming_error_response``), if a stream fault is queued."""
        with self._lock:
            after = self._stream_faults.pop(0) if self._stream_faults else None
        if after is None:
            return chunks
        error = _error_body(500, "engine failed during generation", "InternalServerError")
        return [*chunks[:after], error]

    def _responses(self, body: Mapping[str, Any]) -> Reply:
        """``/v1/responses``: ``instructions`` then ``input`` (a text or message items)."""
        items = body["input"]
        messages: list[dict[str, Any]] = []
        if isinstance(body.get("instructions"), str):
            messages.append({"role": "system", "content": body["instructions"]})
        if isinstance(items, str):
            messages.append({"role": "user", "content": items})
        else:
            messages.extend(
                {"role": m.get("role", "user"), "content": _item_text(m.get("content"))}
                for m in items
                if isinstance(m, Mapping)
            )
        prompt = self.tokenize_text(self.render(messages))
        words, usage = self._generate(prompt, body)
        details = usage.get("prompt_tokens_details") or {}
        resp_usage = {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": details.get("cached_tokens") or 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        }
        response = {
            "id": "resp_fake",
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model") or self.model,
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": " ".join(words)}],
                }
            ],
            "usage": resp_usage,
        }
        if body.get("stream"):
            events: list[dict[str, Any]] = [
                {"type": "response.created", "response": {**response, "usage": None}},
                *(
                    {"type": "response.output_text.delta", "delta": (" " if i else "") + w}
                    for i, w in enumerate(words)
                ),
                {"type": "response.completed", "response": response},
            ]
            return _sse(self._maybe_break(events), done=False)
        return _json(200, response)

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
        """Prefix-cache counters, load gauges and the cache config, in Prometheus text."""
        labels = f'engine="0",model_name="{self.model}"'
        cap = self.sim.capacity_blocks
        usage = self.sim.used_blocks / (cap - 1) if cap else 0.0
        info = (
            f'block_size="{self.sim.block_size}",enable_prefix_caching="True",'
            f'num_gpu_blocks="{cap if cap is not None else "None"}",'
            'prefix_caching_hash_algo="sha256_cbor",engine="0"'
        )
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
            f"vllm:num_requests_running{{{labels}}} {float(self.running)}\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            f"vllm:num_requests_waiting{{{labels}}} {float(self.waiting)}\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            f"vllm:kv_cache_usage_perc{{{labels}}} {usage}\n"
            "# TYPE vllm:cache_config_info gauge\n"
            f"vllm:cache_config_info{{{info}}} 1.0\n"
        )


_BAD_SALT = re.compile(r"[@/\\\x00]")


def _validate(body: Mapping[str, Any]) -> str | None:
    """vLLM 0.33's request validators for the fields the router sets (a 400 when
    they fail)."""
    salt = body.get("cache_salt")
    if salt is not None:
        if not isinstance(salt, str) or not salt:
            return "Parameter 'cache_salt' must be a non-empty string if provided."
        if len(salt) > 128 or _BAD_SALT.search(salt):
            return (
                "Parameter 'cache_salt' must be at most 128 characters and must "
                "not contain '@', '/', '\\\\', or NUL."
            )
    if body.get("stream_options") and not body.get("stream"):
        return "Stream options can only be defined when `stream=True`."
    return None


def _item_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return ""


def _error_body(status: int, message: str, kind: str = "BadRequestError") -> dict[str, Any]:
    """vLLM's ``ErrorResponse``: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def _error(status: int, message: str) -> Reply:
    kind = "BadRequestError" if status < 500 else "InternalServerError"
    return _json(status, _error_body(status, message, kind))


def _json(status: int, data: Any) -> Reply:
    return status, {"content-type": "application/json"}, json.dumps(data).encode()


def _sse(chunks: Sequence[Mapping[str, Any]], *, done: bool = True) -> Reply:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    body += "data: [DONE]\n\n" if done else ""
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
            timeouts = request.extensions.get("timeout") or {}
            status, headers, content = fake.respond(
                request.method,
                request.url.path,
                dict(request.headers),
                request.read(),
                read_timeout=timeouts.get("read"),
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
        >>> with FakeVllmServer(FakeVllm("a")) as server:
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

        def log_message(self, format: str, *args: Any) -> None:
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
                status, headers, content = _error(504, "hung")
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(content)

        do_GET = _serve
        do_POST = _serve

    return Handler


class KvEventPublisher:
    """Publishes KV events the way vLLM 0.33's ``ZmqEventPublisher`` does: a ZMQ PUB
    socket, multipart ``(topic, 8-byte big-endian sequence, msgpack EventBatch)``; the
    batch an array ``[ts, events, data_parallel_rank]``, the events msgspec structs of
    ``vllm/distributed/kv_events.py``'s schema tagged by class name (maps, or arrays
    with ``array_like`` as some older releases declared them).

    What a real server sends, reproduced from the simulator's events: one
    ``BlockStored`` per chain of new blocks (several blocks each, the ``cache_salt`` in
    block 0's ``extra_keys``, the LoRA name in every block's), ``group_idx`` (each block
    once per KV cache group with ``groups`` > 1, as hybrid models do), ``medium``,
    ``duplicates`` (every block stored and removed twice: two copies under one hash,
    as concurrent requests computing the same block leave them), nothing for a request
    that stores no new block, and :meth:`restart` (the sequence starts at 0 again).

    Needs ``pyzmq`` and ``msgspec``. Nothing binds before :meth:`bind`.

    Example:
        >>> pub = KvEventPublisher().bind("tcp://127.0.0.1:*")
        >>> pub.endpoint  # doctest: +ELLIPSIS
        'tcp://127.0.0.1:...'
        >>> pub.close()
    """

    def __init__(
        self,
        *,
        topic: str = "",
        array_like: bool = False,
        groups: int = 1,
        medium: str = "GPU",
        duplicates: bool = False,
        data_parallel_rank: int = 0,
    ) -> None:
        self.topic = topic
        self.array_like = array_like
        self.groups = groups
        self.medium = medium
        self.duplicates = duplicates
        self.data_parallel_rank = data_parallel_rank
        self.endpoint: str | None = None
        self.paused = False  # drop events (a publisher that stopped)
        self._seq = 0
        self._sock: Any = None
        self._types: Any = None

    def bind(self, endpoint: str = "tcp://127.0.0.1:*") -> KvEventPublisher:
        import zmq

        self._sock = zmq.Context.instance().socket(zmq.PUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(endpoint)
        self.endpoint = self._sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        return self

    def _schema(self) -> Any:
        if self._types is None:
            import msgspec

            opts: dict[str, Any] = {"omit_defaults": True, "tag": True}
            if self.array_like:
                opts["array_like"] = True

            class BlockStored(msgspec.Struct, **opts):
                block_hashes: list[int | bytes]
                parent_block_hash: int | bytes | None
                token_ids: list[int]
                block_size: int
                lora_id: int | None
                medium: str | None
                lora_name: str | None = None
                extra_keys: list[tuple[Any, ...] | None] | None = None
                group_idx: int | None = None

            class BlockRemoved(msgspec.Struct, **opts):
                block_hashes: list[int | bytes]
                medium: str | None
                group_idx: int | None = None

            class AllBlocksCleared(msgspec.Struct, **opts):
                pass

            class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True):
                ts: float
                events: list[BlockStored | BlockRemoved | AllBlocksCleared]
                data_parallel_rank: int | None = None

            self._types = (BlockStored, BlockRemoved, AllBlocksCleared, KVEventBatch)
        return self._types

    def encode(self, events: Sequence[Any]) -> bytes:
        """One batch's payload."""
        import msgspec

        batch = self._schema()[3](
            ts=time.time(), events=list(events), data_parallel_rank=self.data_parallel_rank
        )
        return msgspec.msgpack.encode(batch)

    def publish(self, events: Sequence[Any]) -> None:
        """Send one batch of schema structs (see :meth:`publish_sim_events`)."""
        self.send_raw(self.encode(events))

    def send_raw(self, payload: bytes, *, parts: Sequence[bytes] | None = None) -> None:
        """Send ``payload`` as the next batch (or any ``parts``: a malformed message)."""
        if self.paused or self._sock is None:
            return
        if parts is not None:
            self._sock.send_multipart(list(parts))
            return
        self._sock.send_multipart((self.topic.encode(), self._seq.to_bytes(8, "big"), payload))
        self._seq += 1

    def restart(self) -> None:
        """The server restarted: its sequence numbers start again at 0."""
        self._seq = 0

    def publish_sim_events(
        self,
        events: Sequence[tuple[Any, ...]],
        block_size: int,
        salt: str | None = None,
        *,
        lora: str | None = None,
    ) -> None:
        """Publish a simulator's recorded events as vLLM 0.33 announces them (see the
        class); nothing when there are none."""
        stored, removed, cleared = self._schema()[:3]
        copies = 2 if self.duplicates else 1
        out: list[Any] = []
        run: list[tuple[Any, ...]] = []  # consecutive stored blocks of one chain

        def flush() -> None:
            if not run:
                return
            extra = [
                tuple(([lora] if lora else []) + ([salt] if e[2] is None and salt else [])) or None
                for e in run
            ]
            for group in range(self.groups):
                event = stored(
                    block_hashes=[e[1] for e in run],
                    parent_block_hash=run[0][2],
                    token_ids=[t for e in run for t in e[3]],
                    block_size=block_size,
                    lora_id=1 if lora else None,
                    medium=self.medium,
                    lora_name=lora,
                    extra_keys=extra if any(extra) else None,
                    group_idx=group,
                )
                out.extend([event] * copies)
            run.clear()

        for e in events:
            if e[0] == "stored":
                if run and e[2] != run[-1][1]:
                    flush()
                run.append(e)
                continue
            flush()
            if e[0] == "removed":
                for group in range(self.groups):
                    event = removed(block_hashes=[e[1]], medium=self.medium, group_idx=group)
                    out.extend([event] * copies)
            elif e[0] == "cleared":
                out.append(cleared())
        flush()
        if out:
            self.publish(out)

    def clear_all(self) -> None:
        """Announce ``AllBlocksCleared`` (a cache reset)."""
        self.publish([self._schema()[2]()])

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None
