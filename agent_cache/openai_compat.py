"""A minimal client for OpenAI-compatible chat servers (vLLM, llama.cpp, ...).

Only what the cache needs: one chat completion, its text, its token usage (including the
prompt tokens the server served from its prefix cache) and how long it took. The sync and
async paths share the payload and parsing helpers; each does its own I/O.

Example:
    >>> with ChatClient("http://127.0.0.1:8000/v1") as client:  # doctest: +SKIP
    ...     result = client.chat([{"role": "user", "content": "Hi"}], max_tokens=16)
    ...     print(result.text, result.prompt_tokens)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from agent_cache.errors import BackendError

__all__ = ["ChatClient", "ChatResult"]

Message = Mapping[str, Any]

#: Total attempts per request: the first try plus two retries.
ATTEMPTS = 3


@dataclass(frozen=True)
class ChatResult:
    """One chat completion.

    Attributes:
        text: The assistant message's content.
        prompt_tokens: Prompt tokens the server counted.
        completion_tokens: Generated tokens.
        cached_tokens: Prompt tokens served from the server's prefix (KV) cache, from
            ``usage.prompt_tokens_details.cached_tokens``; 0 when the server does not say.
        latency_s: Wall-clock seconds of the successful HTTP request.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    latency_s: float

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def usage(self) -> dict[str, int]:
        """The token counts as a JSON-ready dict (what the demo stores with an answer)."""
        data = asdict(self)
        return {k: v for k, v in data.items() if k.endswith("_tokens")}


def _is_retryable(exc: BaseException) -> bool:
    """Connection-level failures and 5xx answers are retried; 4xx and timeouts are not."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code >= 500
    return isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError | httpx.ConnectTimeout)


def _retry_kwargs() -> dict[str, Any]:
    return {
        "stop": stop_after_attempt(ATTEMPTS),
        "wait": wait_exponential(multiplier=0.2, max=2.0),
        "retry": retry_if_exception(_is_retryable),
        "reraise": True,
    }


def _payload(
    model: str, messages: Sequence[Message], max_tokens: int, temperature: float
) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [dict(m) for m in messages],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": False,
    }


def _as_int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _parse(data: Any, latency_s: float, endpoint: str) -> ChatResult:
    """Turn a ``/chat/completions`` JSON body into a :class:`ChatResult`."""
    try:
        message = data["choices"][0]["message"]
        text = message.get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise BackendError(f"malformed chat completion: {data!r:.200}", endpoint=endpoint) from exc
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return ChatResult(
        text=str(text),
        prompt_tokens=_as_int(usage.get("prompt_tokens")),
        completion_tokens=_as_int(usage.get("completion_tokens")),
        cached_tokens=_as_int(details.get("cached_tokens") if isinstance(details, dict) else 0),
        latency_s=latency_s,
    )


def _model_ids(data: Any) -> list[str]:
    return [str(m["id"]) for m in (data.get("data") or []) if isinstance(m, dict) and "id" in m]


class ChatClient:
    """Chat completions against one OpenAI-compatible server.

    Connection errors and 5xx answers are retried twice with exponential backoff; what
    still fails is raised as :class:`~agent_cache.errors.BackendError` (``endpoint`` set,
    the cause chained).

    Args:
        base_url: The server's API root, e.g. ``"http://127.0.0.1:8000/v1"``.
        model: The ``model`` field sent with each request.
        timeout: Seconds per HTTP request.
        api_key: Sent as a bearer token when given.

    Example:
        >>> client = ChatClient("http://127.0.0.1:8000/v1", model="local")
        >>> client.endpoint
        'http://127.0.0.1:8000/v1/chat/completions'
    """

    def __init__(
        self,
        base_url: str,
        model: str = "local",
        timeout: float = 60,
        *,
        api_key: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client: httpx.Client | None = None
        self._aclient: httpx.AsyncClient | None = None

    @property
    def endpoint(self) -> str:
        """The chat completions URL."""
        return f"{self.base_url}/chat/completions"

    # -- sync ---------------------------------------------------------------------------

    def _sync(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout, headers=self._headers)
        return self._client

    def _post(self, url: str, body: dict[str, Any] | None) -> tuple[Any, float]:
        client = self._sync()
        try:
            for attempt in Retrying(**_retry_kwargs()):
                with attempt:
                    start = time.perf_counter()
                    if body is None:
                        response = client.get(url)
                    else:
                        response = client.post(url, json=body)
                    response.raise_for_status()
                    return response.json(), time.perf_counter() - start
        except (httpx.HTTPError, ValueError) as exc:
            raise BackendError(f"request failed: {exc!r}", endpoint=url) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def chat(
        self, messages: Sequence[Message], *, max_tokens: int = 128, temperature: float = 0.0
    ) -> ChatResult:
        """Send one chat completion request and wait for the whole answer.

        Args:
            messages: OpenAI-style messages (``{"role": ..., "content": ...}``).
            max_tokens: Upper bound on generated tokens.
            temperature: Sampling temperature; 0 for (near) deterministic answers.

        Returns:
            The answer text, token usage and latency.

        Raises:
            BackendError: The server could not be reached or answered badly.

        Example:
            >>> client.chat([{"role": "user", "content": "Hi"}]).text  # doctest: +SKIP
            'Hello! How can I help?'
        """
        body = _payload(self.model, messages, max_tokens, temperature)
        data, latency = self._post(self.endpoint, body)
        return _parse(data, latency, self.endpoint)

    def list_models(self) -> list[str]:
        """The model ids the server reports on ``GET /models``."""
        data, _ = self._post(f"{self.base_url}/models", None)
        return _model_ids(data)

    def close(self) -> None:
        """Close the sync HTTP connection pool (the async one needs :meth:`aclose`)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- async --------------------------------------------------------------------------

    def _async(self) -> httpx.AsyncClient:
        if self._aclient is None:
            self._aclient = httpx.AsyncClient(timeout=self.timeout, headers=self._headers)
        return self._aclient

    async def _apost(self, url: str, body: dict[str, Any] | None) -> tuple[Any, float]:
        client = self._async()
        try:
            async for attempt in AsyncRetrying(**_retry_kwargs()):
                with attempt:
                    start = time.perf_counter()
                    if body is None:
                        response = await client.get(url)
                    else:
                        response = await client.post(url, json=body)
                    response.raise_for_status()
                    return response.json(), time.perf_counter() - start
        except (httpx.HTTPError, ValueError) as exc:
            raise BackendError(f"request failed: {exc!r}", endpoint=url) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def achat(
        self, messages: Sequence[Message], *, max_tokens: int = 128, temperature: float = 0.0
    ) -> ChatResult:
        """Async twin of :meth:`chat` (real async I/O on ``httpx.AsyncClient``).

        Example:
            >>> result = await client.achat([{"role": "user", "content": "Hi"}])  # doctest: +SKIP
        """
        body = _payload(self.model, messages, max_tokens, temperature)
        data, latency = await self._apost(self.endpoint, body)
        return _parse(data, latency, self.endpoint)

    async def alist_models(self) -> list[str]:
        """Async twin of :meth:`list_models`."""
        data, _ = await self._apost(f"{self.base_url}/models", None)
        return _model_ids(data)

    async def aclose(self) -> None:
        """Close both connection pools."""
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None
        self.close()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
