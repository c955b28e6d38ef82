"""Routing ``httpx`` transports, so frameworks' own OpenAI clients go through the router.

``ChatOpenAI(http_client=router.httpx_client())`` (LangChain) and
``OpenAILike(http_client=...)`` (LlamaIndex) keep their own request and response handling
(so LangChain's ``usage_metadata.input_token_details.cache_read`` and LlamaIndex's raw
usage carry vLLM's cached tokens); the transport only decides where each request goes:

* the request path is re-based onto the chosen replica (``/v1/chat/completions`` under its
  API base; anything outside the API base, such as ``/health``, under its server root);
* JSON generation bodies (``/chat/completions``, ``/completions``, ``/responses``) get
  ``cache_salt`` for the namespace (from the transport or the ``x-agent-cache-namespace``
  header) and are routed by their prompt; chat and text completion streams get
  ``stream_options.include_usage``, and a non-streaming body loses ``stream_options``
  (vLLM rejects it there);
* retries, failover and breakers are the router's; usage is recorded as it streams by,
  and an error event inside a stream after HTTP 200 counts as the replica's failure.

A transport stands on the router's :class:`~agent_cache.vllm._channel.Channel` (its
``channel``), never on the router itself, which it does not import.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import httpx

from agent_cache.vllm._channel import NAMESPACE_HEADER, SESSION_HEADER, Channel
from agent_cache.vllm._dispatch import Call
from agent_cache.vllm._endpoint import Endpoint
from agent_cache.vllm._protocol import HOP_HEADERS, SseUsageSniffer, is_generation_path

__all__ = ["AsyncRoutingTransport", "RoutingTransport"]

_DROP_REQUEST_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}
)


class _HasChannel(Protocol):
    @property
    def channel(self) -> Channel: ...


def _channel_of(router: Channel | _HasChannel) -> Channel:
    return router if isinstance(router, Channel) else router.channel


def _to_call(
    channel: Channel,
    request: httpx.Request,
    body: bytes,
    namespace: str | None,
    session_id: str | None = None,
) -> Call:
    """Turn a framework's request into a router call (pure: no I/O)."""
    ns = request.headers.get(NAMESPACE_HEADER) or namespace
    session = request.headers.get(SESSION_HEADER) or session_id
    headers = {
        k: v
        for k, v in request.headers.items()
        if k.lower() not in _DROP_REQUEST_HEADERS
        and k.lower() not in (NAMESPACE_HEADER, SESSION_HEADER)
    }
    rel, root = _rebase(channel, request.url.path)
    call = Call(
        request.method, rel, root=root, headers=headers, params=request.url.query.decode("ascii")
    )
    data: Any = None
    if not root and is_generation_path(rel) and body and request.method == "POST":
        try:
            data = json.loads(body)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        call.content = body or None
        return call
    if ns is not None:
        data.setdefault("cache_salt", channel.cache_salt(ns))
    responses = rel.rstrip("/").endswith("responses")
    if data.get("stream") is True:
        call.stream = True
        if not responses:  # the Responses API puts usage in response.completed
            options = dict(data.get("stream_options") or {})
            options.setdefault("include_usage", True)
            data["stream_options"] = options
    else:
        data.pop("stream_options", None)
    call.body = data
    prompt = _responses_messages(data) if responses else _prompt(data)
    if prompt is not None:
        channel.route(call, prompt, ns, data.get("tools"), session)
        batch = data.get("prompt")
        if isinstance(batch, list) and isinstance(prompt, str) and len(batch) > 1:
            # usage counts every prompt of a batch: so must the characters
            texts = [p for p in batch if isinstance(p, str)]
            call.prompt_chars = sum(map(len, texts)) if len(texts) == len(batch) else None
    return call


def _rebase(channel: Channel, path: str) -> tuple[str, bool]:
    """``path`` relative to the API base it is under, or itself and ``True`` (the root)."""
    for api in channel.api_paths:
        if api and (path == api or path.startswith(api + "/")):
            return path[len(api) :], False
    return path, True


def _prompt(data: dict[str, Any]) -> Any:
    """What a chat or text completion body routes by: its messages, its (first) text
    prompt, its token ids; ``None`` when it holds none of them."""
    if isinstance(data.get("messages"), list):
        return data["messages"]
    if isinstance(data.get("prompt"), str):
        return data["prompt"]
    if isinstance(data.get("prompt"), list) and data["prompt"]:
        first = data["prompt"][0]
        if isinstance(first, str):
            return first
        if isinstance(first, int):
            return [int(t) for t in data["prompt"]]
    return None


def _responses_messages(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses API body as chat messages: ``instructions`` as the system message,
    then ``input`` (a text, or message items)."""
    out: list[dict[str, Any]] = []
    if isinstance(data.get("instructions"), str):
        out.append({"role": "system", "content": data["instructions"]})
    items = data.get("input")
    if isinstance(items, str):
        out.append({"role": "user", "content": items})
    elif isinstance(items, list):
        for item in items:
            if isinstance(item, dict):
                out.append(
                    {
                        "role": item.get("role", item.get("type", "")),
                        "content": item.get("content", item.get("output", "")),
                    }
                )
    return out


def _headers(resp: httpx.Response) -> list[tuple[str, str]]:
    return [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in HOP_HEADERS]


class _Relayed:
    """A relay's state: the replica's response, the usage sniffed, failed, finished."""

    def __init__(self, channel: Channel, resp: httpx.Response, ep: Endpoint, call: Call) -> None:
        self._channel, self._resp, self._ep, self._call = channel, resp, ep, call
        self._sniffer = SseUsageSniffer()
        self._failed = False
        self._done = False

    def _finish(self) -> None:
        """After the response closed: the usage sniffed, and whether the stream failed."""
        self._sniffer.close()
        failed = self._failed or self._sniffer.error is not None
        self._channel.end_stream(self._ep, self._sniffer.usage, failed=failed, call=self._call)


class _Relay(_Relayed, httpx.SyncByteStream):
    """Hands a replica's stream on, sniffing ``usage``; finishing it frees the replica."""

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._resp.iter_bytes():
                self._sniffer.feed(chunk)
                yield chunk
        except httpx.HTTPError:
            self._failed = True
            raise

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._resp.close()
            self._finish()


class _AsyncRelay(_Relayed, httpx.AsyncByteStream):
    """Async twin of :class:`_Relay`."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._resp.aiter_bytes():
                self._sniffer.feed(chunk)
                yield chunk
        except httpx.HTTPError:
            self._failed = True
            raise

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            await self._resp.aclose()
            self._finish()


class _Routed:
    """What both transports hold: the router's channel and their defaults."""

    def __init__(
        self,
        router: Channel | _HasChannel,
        *,
        namespace: str | None = None,
        session_id: str | None = None,
    ) -> None:
        self.channel = _channel_of(router)
        self.namespace = namespace
        self.session_id = session_id


class RoutingTransport(_Routed, httpx.BaseTransport):
    """An ``httpx`` transport that sends every request through a :class:`VllmRouter`.

    Made by :meth:`VllmRouter.httpx_client`; closing it does not close the router.

    Args:
        router: The router (or its :attr:`~VllmRouter.channel`).
        namespace: Default namespace (``cache_salt``) for its requests.
        session_id: Default session (a conversation, an agent run) for its requests;
            the ``x-agent-cache-session`` header of a request wins.

    Example:
        >>> from agent_cache.vllm import VllmRouter
        >>> router = VllmRouter(["http://gpu-1:8000/v1"])  # no connection is made yet
        >>> client = httpx.Client(transport=RoutingTransport(router))
        >>> client.close(); router.close()
    """

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        call = _to_call(self.channel, request, request.read(), self.namespace, self.session_id)
        resp, ep = self.channel.send(call)
        if call.stream and resp.status_code < 400:
            relay = _Relay(self.channel, resp, ep, call)
            return httpx.Response(resp.status_code, headers=_headers(resp), stream=relay)
        return httpx.Response(resp.status_code, headers=_headers(resp), content=resp.content)


class AsyncRoutingTransport(_Routed, httpx.AsyncBaseTransport):
    """Async twin of :class:`RoutingTransport` (made by
    :meth:`VllmRouter.async_httpx_client`)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        call = _to_call(self.channel, request, body, self.namespace, self.session_id)
        resp, ep = await self.channel.asend(call)
        if call.stream and resp.status_code < 400:
            relay = _AsyncRelay(self.channel, resp, ep, call)
            return httpx.Response(resp.status_code, headers=_headers(resp), stream=relay)
        return httpx.Response(resp.status_code, headers=_headers(resp), content=resp.content)
