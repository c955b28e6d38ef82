"""Pure helpers for vLLM's OpenAI-compatible API, shared by the sync and async paths."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from agent_cache.usage import parse_usage

__all__ = [
    "SseUsageSniffer",
    "chunk_usage",
    "derive_cache_salt",
    "is_generation_path",
    "is_retryable_status",
    "parse_sse_line",
    "stream_error",
    "usage_counts",
]

#: Response headers that must not be copied onto a re-built response (the body we hand
#: on is already decoded and its length is recomputed).
HOP_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection"})


def is_retryable_status(status: int) -> bool:
    """429 (busy) and 5xx are worth another try, possibly on another replica.

    Example:
        >>> [is_retryable_status(s) for s in (200, 400, 429, 503)]
        [False, False, True, True]
    """
    return status == 429 or status >= 500


def is_generation_path(path: str) -> bool:
    """Whether a path (relative to the API base) generates: completions, chat completions
    or the Responses API (where usage, ``cache_salt`` and affinity apply).

    Example:
        >>> [is_generation_path(p) for p in ("chat/completions", "/responses", "models")]
        [True, True, False]
    """
    return path.rstrip("/").endswith(("completions", "responses"))


def usage_counts(usage: Any) -> tuple[int, int] | None:
    """``(prompt_tokens, cached_tokens)`` of a ``usage`` object, or None without one.

    Read by :func:`agent_cache.usage.parse_usage` (null or missing details mean 0; the
    Responses API's ``input_tokens`` and ``input_tokens_details`` are read too).

    Example:
        >>> usage_counts({"prompt_tokens": 40, "prompt_tokens_details": None})
        (40, 0)
        >>> usage_counts({"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 32}})
        (40, 32)
        >>> usage_counts({"input_tokens": 40, "input_tokens_details": {"cached_tokens": 16}})
        (40, 16)
    """
    parsed = parse_usage(usage)
    return None if parsed is None else (parsed.prompt_tokens, parsed.cached_tokens)


def chunk_usage(chunk: Mapping[str, Any]) -> Any:
    """The ``usage`` a stream chunk carries (a Responses ``response.completed`` event
    carries it inside ``response``), or None.

    Example:
        >>> chunk_usage({"type": "response.completed", "response": {"usage": {"input_tokens": 3}}})
        {'input_tokens': 3}
    """
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        return usage
    response = chunk.get("response")
    if isinstance(response, Mapping) and isinstance(response.get("usage"), dict):
        return response["usage"]
    return None


def stream_error(chunk: Mapping[str, Any]) -> str | None:
    """The error message of an error event sent inside a stream, else None.

    After answering HTTP 200, vLLM reports a failure during generation as one more
    event, ``data: {"error": {"message", "type", "param", "code"}}`` (older servers:
    ``{"object": "error", "message": ...}``; the Responses API: an ``error`` or
    ``response.failed`` event), then ``[DONE]``.

    Example:
        >>> stream_error({"error": {"message": "engine died", "type": "InternalServerError",
        ...                         "param": None, "code": 500}})
        'engine died'
        >>> stream_error({"choices": []}) is None
        True
    """
    error = chunk.get("error")
    if isinstance(error, Mapping):
        return str(error.get("message") or error)
    if isinstance(error, str) and error:
        return error
    if chunk.get("object") == "error" or chunk.get("type") in ("error", "response.failed"):
        response = chunk.get("response")
        if isinstance(response, Mapping) and isinstance(response.get("error"), Mapping):
            return str(response["error"].get("message") or response["error"])
        return str(chunk.get("message") or "error event in the stream")
    return None


def derive_cache_salt(secret: bytes, namespace: str) -> str:
    """A 256-bit ``cache_salt`` for ``namespace``: HMAC-SHA256(secret, namespace), hex.

    The same secret gives the same salt in every process (so replicas' caches are shared
    within a namespace); without the secret a salt cannot be guessed from the namespace.

    Example:
        >>> len(derive_cache_salt(b"k", "tenant-a"))
        64
    """
    return hmac.new(secret, namespace.encode("utf-8"), hashlib.sha256).hexdigest()


def parse_sse_line(line: str) -> dict[str, Any] | None:
    """The JSON object of one ``data: {...}`` line; None for other lines and ``[DONE]``.

    Example:
        >>> parse_sse_line('data: {"choices": []}')
        {'choices': []}
        >>> parse_sse_line("data: [DONE]") is None
        True
    """
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if not payload or payload == "[DONE]":
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class SseUsageSniffer:
    """Watches server-sent-event bytes go by; keeps the last ``usage`` and the first
    in-stream error it saw.

    Example:
        >>> s = SseUsageSniffer()
        >>> s.feed(b'data: {"choices": [], "usage": {"prompt_tokens": 3}}\\n\\n')
        >>> s.usage
        {'prompt_tokens': 3}
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.usage: dict[str, Any] | None = None
        self.error: str | None = None

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            self._line(raw)

    def close(self) -> None:
        if self._buffer:
            self._line(self._buffer)
            self._buffer = b""

    def _line(self, raw: bytes) -> None:
        data = parse_sse_line(raw.decode("utf-8", "replace").rstrip("\r"))
        if data is None:
            return
        usage = chunk_usage(data)
        if usage is not None:
            self.usage = usage
        if self.error is None:
            self.error = stream_error(data)
