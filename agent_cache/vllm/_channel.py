"""The router's sending side, as the routing transports see it (internal, documented).

:class:`Channel` bundles what sending one call takes: the :class:`Dispatcher` (endpoint
choice, retries, failover, breakers, usage), the :class:`CallBuilder` (affinity keys,
prefix blocks, ``cache_salt``) and the HTTP clients. :class:`VllmRouter` builds one and
sends all its own calls through it; :mod:`agent_cache.vllm.transport` stands on it alone
(as httpx's transports never import the client), so the transport never imports the
router and the router needs no lazy import to build a transport.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx

from agent_cache._flow import Flow, run_async, run_sync
from agent_cache._io import call_twin
from agent_cache.errors import BackendError
from agent_cache.vllm._calls import CallBuilder, Message, json_body, token_ids
from agent_cache.vllm._dispatch import Call, Dispatcher
from agent_cache.vllm._endpoint import Endpoint
from agent_cache.vllm._tokens import ServerTokens, TokenizePlan

__all__ = ["NAMESPACE_HEADER", "SESSION_HEADER", "Channel"]

#: A request header the routing transport reads (and strips) to pick the namespace.
NAMESPACE_HEADER = "x-agent-cache-namespace"
#: A request header the routing transport reads (and strips): the request's session (a
#: conversation, an agent run), kept on one replica while that is not overloaded.
SESSION_HEADER = "x-agent-cache-session"


class Channel:
    """Sends calls over a router's replicas (see the module docstring).

    Args:
        dispatcher: endpoint state and the retry loops.
        calls: how prompts become routed calls.
        client / async_client: clients to send with, never closed here; ``None``: the
            channel creates (and closes) its own on first use.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        calls: CallBuilder,
        *,
        client: httpx.Client | None = None,
        async_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.calls = calls
        self._client = client
        self._aclient = async_client
        self._owns_client = client is None
        self._owns_aclient = async_client is None
        self._lock = threading.Lock()
        # KV-event matching without a caller's tokenizer: the servers' /tokenize
        self.server_tokens: ServerTokens | None = (
            ServerTokens(dispatcher.clock)
            if dispatcher.kv_index is not None
            and dispatcher.policy == "prefix"
            and calls.tokenizer is None
            else None
        )

    # ------------------------------------------------------------------ for transports
    @property
    def api_paths(self) -> list[str]:
        """The endpoints' API paths (``"/v1"``), longest first."""
        return sorted({e.api_path for e in self.dispatcher.endpoints}, key=len, reverse=True)

    @property
    def total_timeout(self) -> float:
        return float(self.dispatcher.total_timeout)

    def cache_salt(self, namespace: str) -> str:
        return self.calls.cache_salt(namespace)

    def route(
        self,
        call: Call,
        prompt: str | Sequence[Message] | Sequence[int],
        namespace: str | None,
        tools: Any = None,
        session: str | None = None,
    ) -> Call:
        """Give ``call`` its affinity key and what the prefix policy routes by."""
        call.key = self.calls.key_for(prompt, namespace)
        return self.calls.route(call, prompt, namespace, tools, session)

    def send(self, call: Call) -> tuple[httpx.Response, Endpoint]:
        """Send with retries and failover; the response and the endpoint that gave it.
        A stream (``call.stream``) must be finished with :meth:`end_stream`."""
        return run_sync(self._send(call))

    async def asend(self, call: Call) -> tuple[httpx.Response, Endpoint]:
        """Async twin of :meth:`send`."""
        return await run_async(self._send(call))

    def _send(self, call: Call) -> Flow[tuple[httpx.Response, Endpoint]]:
        """:meth:`send` and :meth:`asend`, written once: the ``/tokenize`` call the plan
        asks for (KV-event matching), then ``call``; each by the caller's client."""
        plan = self._tokenize_plan(call)
        if plan is not None:
            try:
                resp, ep = yield from call_twin(self._dispatch, self._adispatch, plan.call)
                self._tokenized(plan, call, resp, ep)
            except BackendError as exc:
                self._tokenize_failed(exc)
        return (yield from call_twin(self._dispatch, self._adispatch, call))

    def _dispatch(self, call: Call) -> tuple[httpx.Response, Endpoint]:
        return self.dispatcher.send(self.client(), call)

    async def _adispatch(self, call: Call) -> tuple[httpx.Response, Endpoint]:
        return await self.dispatcher.asend(self.async_client(), call)

    def _tokenize_plan(self, call: Call) -> TokenizePlan | None:
        """The servers' token ids for ``call`` (KV-event matching), from the cache or
        the ``/tokenize`` call to make; see :mod:`agent_cache.vllm._tokens`."""
        if self.server_tokens is None:
            return None
        return self.server_tokens.plan(call)

    def _tokenized(
        self, plan: TokenizePlan, call: Call, resp: httpx.Response, ep: Endpoint
    ) -> None:
        assert self.server_tokens is not None
        self.server_tokens.done(plan, call, token_ids(json_body(resp, ep), ep))

    def _tokenize_failed(self, exc: BackendError) -> None:
        assert self.server_tokens is not None
        self.server_tokens.failed(exc)

    def end_stream(
        self, ep: Endpoint, usage: Any, *, failed: bool, call: Call | None = None
    ) -> None:
        """A stream from ``ep`` (for ``call``) ended: record its usage (and learn the
        characters per token from ``call``'s prompt), free the replica, judge it."""
        self.dispatcher.end_stream(ep, usage, failed=failed, call=call)

    # ------------------------------------------------------------------ clients
    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.dispatcher.timeout)
            return self._client

    def async_client(self) -> httpx.AsyncClient:
        with self._lock:
            if self._aclient is None:
                self._aclient = httpx.AsyncClient(timeout=self.dispatcher.timeout)
            return self._aclient

    def close(self) -> None:
        """Close the sync client if the channel created it."""
        if self._client is not None and self._owns_client:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close the clients the channel created."""
        if self._aclient is not None and self._owns_aclient:
            await self._aclient.aclose()
            self._aclient = None
        self.close()
