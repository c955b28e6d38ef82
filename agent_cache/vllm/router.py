"""``VllmRouter``: OpenAI-compatible calls over several vLLM replicas.

Misses of the result cache go to vLLM. What a miss costs there depends on which replica
gets it, on whether that replica already holds the prompt's leading KV blocks, and on how
busy it is. The router picks the replica from a prefix tree of what it sent where
(expiring with each replica's cache capacity) weighed against live load from
``/metrics`` and its own in-flight counts, keeps sessions on their replica, retries with
backoff, fails over, isolates tenants with ``cache_salt`` and records the cached-token
counts vLLM reports as the cache's KV layer.

Example (needs vLLM servers)::

    router = VllmRouter(["http://gpu-1:8000/v1", "http://gpu-2:8000/v1"])
    reply = router.chat([{"role": "user", "content": "Hi"}], max_tokens=8)
    reply["usage"]["prompt_tokens_details"]  # -> {'cached_tokens': 1024}
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from types import TracebackType
from typing import Any, Literal

import httpx

from agent_cache import _io as io
from agent_cache._flow import Flow, run_async, run_sync
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.vllm._calls import (
    CallBuilder,
    Generation,
    Message,
    Prefix,
    json_body,
    status_error,
    token_ids,
)
from agent_cache.vllm._channel import NAMESPACE_HEADER, SESSION_HEADER, Channel
from agent_cache.vllm._dispatch import Call, Dispatcher, DispatchOptions, UsageSink
from agent_cache.vllm._endpoint import Endpoint, EndpointStats
from agent_cache.vllm._protocol import chunk_usage, parse_sse_line, stream_error
from agent_cache.vllm._ratio import CharsPerToken
from agent_cache.vllm._warmup import Item, WarmupBook
from agent_cache.vllm.affinity import DEFAULT_DEPTH
from agent_cache.vllm.metrics import PrefixCacheMetrics, parse_prefix_cache_metrics
from agent_cache.vllm.transport import AsyncRoutingTransport, RoutingTransport

__all__ = ["NAMESPACE_HEADER", "SESSION_HEADER", "VllmRouter"]

log = logging.getLogger("agent_cache.vllm")


def _checked_ratio(given: Mapping[str, Any]) -> CharsPerToken:
    """The characters-per-token estimate, once the router's own arguments are checked
    (the dispatcher checks the rest)."""
    if isinstance(given["endpoints"], str):
        raise ConfigurationError("endpoints must be a list of base URLs, not one string")
    if given["affinity_depth"] < 0 or given["affinity_skip"] < 0:
        raise ConfigurationError("affinity_depth and affinity_skip must be >= 0")
    if given["prefix_block_chars"] < 1:
        raise ConfigurationError("prefix_block_chars must be >= 1")
    ratio = CharsPerToken(given["chars_per_token"])  # ConfigurationError unless > 0 or None
    metrics_interval = given["metrics_interval"]
    if metrics_interval is not None and metrics_interval <= 0:
        raise ConfigurationError("metrics_interval must be > 0 or None")
    return ratio


# the router's arguments a dispatcher takes under the same name
_DISPATCH_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(DispatchOptions)
    if f.name not in ("sink", "block_chars", "ratio", "metrics_timeout")
)


def _dispatch_options(given: Mapping[str, Any], ratio: CharsPerToken) -> DispatchOptions:
    return DispatchOptions(
        **{name: given[name] for name in _DISPATCH_FIELDS},
        sink=given["cache"],
        block_chars=given["prefix_block_chars"],
        ratio=ratio,
        metrics_timeout=given["health_timeout"],
    )


class VllmRouter:
    """Routes OpenAI-compatible requests over vLLM replicas.

    Nothing is sent until the first call (no I/O in the constructor).

    Args:
        endpoints: OpenAI base URLs, e.g. ``["http://gpu-1:8000/v1"]``.
        policy: ``"prefix"`` (default: the replica with the cheapest expected prefill
            given the longest prefix it was sent, plus its live load; sessions stay on
            their replica; see :mod:`agent_cache.vllm.choice`), ``"affinity"``
            (rendezvous hashing of the prompt's first ``affinity_depth`` characters after
            the system messages, with bounded load), ``"least_loaded"`` or
            ``"round_robin"``.
        model: ``model`` sent when a call does not name one (omitted when None).
        api_key: Sent as a bearer token.
        timeout: Seconds an attempt may wait between bytes: a stream's next chunk, or the
            whole answer of a short call (``/tokenize``, ``/health``).
        generation_timeout: Seconds one non-streaming generation may take on one replica
            (vLLM sends nothing before the answer is complete, so a long generation must
            not be cut at ``timeout`` and then run again on every other replica).
        connect_timeout: Seconds to connect; a replica that does not accept in time is
            failed over at once.
        total_timeout: Seconds for all attempts of one call together.
        max_attempts: Attempts per call (default: number of endpoints + 2).
        backoff_initial: First backoff (seconds) once every replica was tried; doubles
            per round, with up to this much random jitter.
        backoff_max: Backoff cap.
        breaker_threshold: Consecutive failures that open an endpoint's circuit breaker.
        breaker_reset: Seconds an open breaker waits before one trial request.
        affinity_depth: Characters after the system messages (or after
            ``affinity_skip`` for text prompts) that form the affinity key.
        affinity_skip: For text prompts: leading characters every prompt shares.
        load_factor: A replica may take this times its fair share of recent load.
        load_window: Recent assignments that count as load (plus those in flight).
        load_weight: ``"prefix"``: weight of the prefill tokens estimated to be queued on
            a replica against the request's own uncached tokens; 0 routes by cached
            prefix alone (the bounded-load guard still spills hot prefixes).
        prefill_rate: Prompt tokens one replica prefills per second (drains the
            estimated queue; about 32,000 for an 8B model on an H200).
        capacity_tokens: KV cache tokens per replica (one number, or one per endpoint),
            which bounds what the prefix tree remembers; None: learned from
            ``vllm:cache_config_info`` on ``/metrics`` (unbounded until then).
        metrics_interval: Seconds between reads of every replica's ``/metrics`` (load
            gauges, cache size) by ``"prefix"`` and ``"least_loaded"``, done by the
            call that finds them due; None: never.
        prefix_block_chars: Characters per router-side block (about one vLLM block).
        chars_per_token: Characters of the prompt (as the router renders it) per token
            of the servers' tokenizer: turns text lengths into tokens for the prefix
            tree's capacity (``capacity_tokens``, or ``/metrics``), the estimated prompt
            and uncached tokens of the load cost. None (default): learned from the
            router's own traffic, starting at 4.0: each answered call's
            ``usage.prompt_tokens`` against its prompt's characters, a ratio of sums
            over the last 256 calls (prompts under 32 tokens, token-id prompts and
            calls without ``usage`` are left out; a call's ratio outside [1, 12] too).
            Each call is sized with the estimate when it is built; the tree's capacity
            in blocks grows with it at once and shrinks once it fell by over 1 % (a
            shrink expires blocks for good); the blocks stay the same character
            windows. A number: fixed, as before (SmolLM2 gives ~5.7 on English RAG
            prompts, CJK text ~1-1.5). The estimate now: :attr:`chars_per_token`, and
            in :meth:`stats`.
        kv_events: Per endpoint, the ZMQ address of its KV-event publisher (``vllm serve
            --kv-events-config``), or None; ``"prefix"`` then scores replicas by the
            prefix they announced they hold (plus the blocks just sent there, see
            ``kv_speculative_ttl``), and falls back to its tree when a replica's events
            stop. Needs ``agent-cache[kv-events]``.
        tokenizer: Renders and tokenizes a prompt (text, or chat messages with the
            server's chat template) as the servers do, for matching KV events. None:
            the servers' own ``/tokenize`` is asked, once per new prefix (the messages
            before the last; a single-message chat or a text prompt whole), and its
            answers are cached (see :mod:`agent_cache.vllm._tokens`).
        kv_block_size: The servers' KV block size until a replica's ``/metrics``
            (``cache_config_info``) or events give its own (a mismatch is logged).
        kv_dp_ranks: Data-parallel ranks per endpoint (one number, or one per
            endpoint): rank k publishes on the ``kv_events`` port plus k, as vLLM does.
        kv_replay: Per endpoint, the address of the publisher's replay socket
            (``replay_endpoint``), or None: read at the start and after lost batches.
        kv_speculative_ttl: Seconds the blocks a request sent in KV-event mode should
            store on its replica count as held there before its ``BlockStored``
            confirms them (a burst sharing a new context then stays on one replica);
            0: only what the events announced.
        salt_secret: Secret for per-namespace ``cache_salt``s (HMAC-SHA256). Router
            processes that share servers should share it; default: random per router.
        cache: Where to record usage (``record_model_usage``), e.g. a ``LayeredCache``.
        client: An ``httpx.Client`` to send with (never closed by the router).
        async_client: An ``httpx.AsyncClient`` to send with (never closed by the router).
        health_timeout: Seconds for one ``/health`` or ``/metrics`` request.
        clock: Monotonic clock for the breakers (tests pass a fake).

    Example:
        >>> router = VllmRouter(["http://127.0.0.1:8000/v1"], policy="round_robin")
        >>> router.cache_salt("tenant-a") == router.cache_salt("tenant-a")
        True
        >>> router.stats()["http://127.0.0.1:8000/v1"].requests
        0
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        policy: Literal["prefix", "affinity", "least_loaded", "round_robin"] = "prefix",
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        generation_timeout: float = 600.0,
        connect_timeout: float = 5.0,
        total_timeout: float = 900.0,
        max_attempts: int | None = None,
        backoff_initial: float = 0.1,
        backoff_max: float = 2.0,
        breaker_threshold: int = 3,
        breaker_reset: float = 10.0,
        affinity_depth: int = DEFAULT_DEPTH,
        affinity_skip: int = 0,
        load_factor: float = 1.25,
        load_window: int = 32,
        load_weight: float = 1.0,
        prefill_rate: float = 32_000.0,
        capacity_tokens: int | Sequence[int | None] | None = None,
        metrics_interval: float | None = 5.0,
        prefix_block_chars: int = 64,
        chars_per_token: float | None = None,
        kv_events: Sequence[str | None] | None = None,
        tokenizer: Callable[[str | Sequence[Message]], Sequence[int]] | None = None,
        kv_block_size: int = 16,
        kv_dp_ranks: int | Sequence[int] = 1,
        kv_replay: Sequence[str | None] | None = None,
        kv_speculative_ttl: float = 5.0,
        salt_secret: str | bytes | None = None,
        cache: UsageSink | None = None,
        client: httpx.Client | None = None,
        async_client: httpx.AsyncClient | None = None,
        health_timeout: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        given = {k: v for k, v in locals().items() if k != "self"}  # the arguments, by name
        ratio = _checked_ratio(given)
        self._d = Dispatcher(endpoints, _dispatch_options(given, ratio))
        self.policy = policy
        self.health_timeout = health_timeout
        secret = salt_secret if salt_secret is not None else os.urandom(32)
        self._calls = CallBuilder(
            model=model,
            secret=secret.encode("utf-8") if isinstance(secret, str) else bytes(secret),
            depth=affinity_depth,
            skip=affinity_skip,
            block_chars=prefix_block_chars,
            chars_per_token=ratio,
            tokenizer=tokenizer,
        )
        self._warmups = WarmupBook(self._d, self._calls, policy)
        self._channel = Channel(self._d, self._calls, client=client, async_client=async_client)
        self._probe = _Probe(self)

    # ------------------------------------------------------------------ basics
    @property
    def endpoints(self) -> list[str]:
        """The endpoints' OpenAI base URLs."""
        return list(self._d.urls)

    @property
    def model(self) -> str | None:
        """The ``model`` sent when a call names none."""
        return self._calls.model

    @property
    def chars_per_token(self) -> float:
        """Characters per token now: the ``chars_per_token`` given, or the estimate
        learned from the replicas' ``usage`` so far (4.0 before any).

        Example:
            >>> VllmRouter(["http://h:8000/v1"]).chars_per_token
            4.0
        """
        return self._d.ratio.value

    def cache_salt(self, namespace: str) -> str:
        """The ``cache_salt`` sent for ``namespace`` (256 bits, hex).

        Example:
            >>> r = VllmRouter(["http://h:8000/v1"], salt_secret="s")
            >>> r.cache_salt("a") != r.cache_salt("b")
            True
        """
        return self._calls.cache_salt(namespace)

    def key_for(
        self, prompt: str | Sequence[Message] | Sequence[int], namespace: str | None = None
    ) -> bytes:
        """The affinity key of a prompt (what :meth:`pick` and the routing use)."""
        return self._calls.key_for(prompt, namespace)

    def pick(
        self,
        prompt: str | Sequence[Message] | Sequence[int],
        namespace: str | None = None,
        *,
        session_id: str | None = None,
    ) -> str | None:
        """The endpoint the policy sends ``prompt`` to now (counted as one assignment).

        Returns None when every circuit breaker is open. Used by benchmarks to replay a
        stream through the same choice the router makes.

        Example:
            >>> VllmRouter(["http://h:8000/v1"]).pick("hello")
            'http://h:8000/v1'
        """
        call = self._channel.route(Call("POST", ""), prompt, namespace, None, session_id)
        ep = self._d.pick(call)
        return ep.base_url if ep else None

    def stats(self) -> dict[str, EndpointStats]:
        """Per endpoint: requests, failures, prompt and cached tokens, in flight, breaker
        (and the router's :attr:`chars_per_token` when taken).

        Example (after traffic to a vLLM server)::

            s = router.stats()["http://gpu-1:8000/v1"]
            s.cached_share  # -> 0.61
        """
        with self._d.lock:
            cpt = self._d.ratio.value
            return {e.base_url: e.snapshot(cpt) for e in self._d.endpoints}

    @property
    def channel(self) -> Channel:
        """The sending side (dispatcher, call builder, HTTP clients) that this router's
        calls and its routing transports (:meth:`httpx_client`) go through."""
        return self._channel

    # ------------------------------------------------------------------ sync calls
    def chat(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        namespace: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        affinity_key: str | bytes | None = None,
        session_id: str | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """One chat completion; returns the response body (with ``usage``).

        Args:
            messages: OpenAI chat messages.
            model: Overrides the router's ``model``.
            namespace: Tenant; sets a per-namespace ``cache_salt`` (requests of different
                namespaces never share KV blocks). None: no salt.
            extra_body: vLLM extras merged into the body (``top_k``, ``priority``,
                ``structured_outputs``, ``cache_salt``, ...). ``priority`` (lower runs
                first) orders the queue under ``vllm serve --scheduling-policy
                priority``; vLLM 0.33 accepts and ignores it otherwise. It does not
                decide what stays in the prefix cache (vLLM issue #47802).
            affinity_key: Route by this key instead of the prompt's leading part (under
                ``"prefix"``: keep requests with this key on one replica, as a session).
            session_id: A conversation or agent run: its requests stay on one replica
                while that replica is not overloaded, so each turn reuses the previous
                turn's blocks (``"prefix"`` policy).
            **params: OpenAI parameters (``max_tokens``, ``temperature``, ...).

        Returns:
            The JSON body of ``/v1/chat/completions``.

        Raises:
            BackendError: Every attempt failed (names each endpoint tried), or the server
                answered with a non-retryable error.

        Example (needs a vLLM server)::

            router.chat([{"role": "user", "content": "Hi"}], max_tokens=8)
            # -> {'id': ..., 'choices': [...], 'usage': {...}}
        """
        g = Generation(model, namespace, extra_body, affinity_key, params, False, session_id)
        return json_body(*self._channel.send(self._calls.chat(messages, g)))

    def complete(
        self,
        prompt: str,
        *,
        model: str | None = None,
        namespace: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        affinity_key: str | bytes | None = None,
        session_id: str | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """One text completion (``/v1/completions``); returns the response body.

        Example (needs a vLLM server)::

            router.complete("Once upon a time", max_tokens=8)["usage"]
        """
        g = Generation(model, namespace, extra_body, affinity_key, params, False, session_id)
        return json_body(*self._channel.send(self._calls.completion(prompt, g)))

    def stream_chat(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        namespace: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        affinity_key: str | bytes | None = None,
        session_id: str | None = None,
        **params: Any,
    ) -> Iterator[dict[str, Any]]:
        """Stream a chat completion; yields the parsed chunks.

        ``stream_options.include_usage`` is set, so the last chunk (``choices: []``)
        carries ``usage``. Retries and failover happen before the first chunk only.

        Raises:
            BackendError: Every attempt failed before the stream began, the connection
                broke, or vLLM sent an error event inside the stream after HTTP 200
                (``data: {"error": ...}``); the last two count as the replica's failure.

        Example (needs a vLLM server)::

            text = "".join(c["choices"][0]["delta"].get("content") or ""
                           for c in router.stream_chat(msgs) if c["choices"])
        """
        g = Generation(model, namespace, extra_body, affinity_key, params, True, session_id)
        yield from _ChunkStream(self._channel, self._calls.chat(messages, g)).chunks()

    def tokenize(
        self,
        prompt: str | Sequence[Message],
        *,
        model: str | None = None,
        add_special_tokens: bool | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        add_generation_prompt: bool | None = None,
    ) -> list[int]:
        """Token ids from vLLM's ``/tokenize`` (at the server root), for prefix checks.

        A chat prompt is rendered with the server's chat template first, as vLLM would,
        with the same ``tools`` and ``chat_template_kwargs`` the generation request
        carries (both change the rendered prompt, and so its prefix).

        Example (needs a vLLM server)::

            router.tokenize("Hello world")  # -> [9906, 1917]
        """
        fields = _chat_fields(tools, chat_template_kwargs, add_generation_prompt)
        call = self._calls.tokenize(prompt, model, add_special_tokens, fields)
        return _token_ids(*self._channel.send(call))

    def models(self) -> list[str]:
        """The model ids the servers serve (``GET /models`` under the API base, on the
        endpoint the policy picks), e.g. to learn the ``model`` to send.

        Example (needs a vLLM server)::

            router.models()  # -> ['Qwen/Qwen2.5-7B-Instruct']
        """
        resp, ep = self._channel.send(Call("GET", "models"))
        return _model_ids(json_body(resp, ep))

    def metrics(self) -> dict[str, PrefixCacheMetrics | None]:
        """Scrape every endpoint's ``/metrics`` for the prefix-cache counters.

        Returns:
            Per endpoint, the cumulative ``vllm:prefix_cache_hits_total`` and
            ``vllm:prefix_cache_queries_total``; None where it could not be read.

        Example (needs a vLLM server)::

            router.metrics()["http://gpu-1:8000/v1"].hit_rate  # -> 0.42
        """
        return run_sync(self._metrics_flow())

    def _metrics_flow(self) -> Flow[dict[str, PrefixCacheMetrics | None]]:
        out: dict[str, PrefixCacheMetrics | None] = {}
        for ep in self._d.endpoints:
            try:
                resp = yield from io.call_twin(
                    self._probe.get, io.twin(self._probe, "aget"), ep, "metrics"
                )
                out[ep.base_url] = (
                    parse_prefix_cache_metrics(resp.text) if resp.status_code == 200 else None
                )
            except httpx.HTTPError as exc:
                log.warning("metrics of %s unreadable: %r", ep.base_url, exc)
                out[ep.base_url] = None
        return out

    def check_health(self) -> dict[str, bool]:
        """Probe every endpoint's ``/health`` (server root) and update its breaker.

        Healthy means reachable and not a 5xx (vLLM answers 503 when its engine died; a
        server without the route, answering 404, counts as up). An endpoint that comes
        back gets its warmed prefixes sent again (:meth:`warm_prefixes`).

        Example (needs vLLM servers)::

            router.check_health()
            # -> {'http://gpu-1:8000/v1': True, 'http://gpu-2:8000/v1': False}
        """
        return run_sync(self._health_flow())

    def _health_flow(self) -> Flow[dict[str, bool]]:
        out: dict[str, bool] = {}
        for ep in self._d.endpoints:
            try:
                resp = yield from io.call_twin(
                    self._probe.get, io.twin(self._probe, "aget"), ep, "health"
                )
                ok = resp.status_code < 500
            except httpx.HTTPError:
                ok = False
            out[ep.base_url] = ok
            self._apply_health(ep, ok)
        yield from io.call_twin(self.rewarm, io.twin(self, "arewarm"))
        return out

    def warm_prefixes(
        self,
        prefixes: Sequence[Prefix],
        *,
        model: str | None = None,
        namespace: str | None = None,
    ) -> int:
        """Prefill hot static prefixes before traffic, with 1-token requests.

        Each prefix goes to the replica that affinity would pick for requests starting
        with it, or to every replica when it is too short to decide the affinity key
        (a system prompt that every request shares is needed everywhere) or the policy is
        round-robin. The prefixes are remembered and sent again to a replica that comes
        back after a failure (on :meth:`check_health` or :meth:`rewarm`).

        Args:
            prefixes: Message lists (sent to ``/v1/chat/completions``) or texts (sent to
                ``/v1/completions``), e.g. ``StablePrompt.prefix_messages()``.
            model: Overrides the router's ``model``.
            namespace: The namespace whose ``cache_salt`` the traffic will carry.

        Returns:
            The number of warm-up requests that succeeded.

        Example (needs vLLM servers)::

            router.warm_prefixes([[{"role": "system", "content": SYSTEM}]])  # -> 3
        """
        items = [self._warmups.remember(p, model, namespace) for p in prefixes]
        return run_sync(self._warm_flow(self._warmups.plan(items)))

    def rewarm(self) -> int:
        """Send the remembered prefixes to endpoints that came back; returns successes."""
        return run_sync(self._warm_flow(self._warmups.recovered()))

    def _warm_flow(self, planned: Iterable[tuple[Endpoint, Item]]) -> Flow[int]:
        """Send each warm-up; the number that succeeded (a failure is logged)."""
        done = 0
        for ep, item in planned:
            try:
                resp, used = yield from io.call_twin(
                    self._channel.send, io.twin(self._channel, "asend"), self._calls.warm(ep, *item)
                )
                json_body(resp, used)
                done += 1
            except BackendError as exc:
                log.warning("warm-up on %s failed: %s", ep.base_url, exc)
        return done

    def close(self) -> None:
        """Close the sync client if the router created it (a passed-in one stays open),
        and stop the KV-event subscribers."""
        self._d.close_events()
        self._channel.close()

    def __enter__(self) -> VllmRouter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ async calls
    async def achat(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        namespace: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        affinity_key: str | bytes | None = None,
        session_id: str | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """Async twin of :meth:`chat` (``httpx.AsyncClient``).

        Example (needs a vLLM server)::

            reply = await router.achat([{"role": "user", "content": "Hi"}])
        """
        g = Generation(model, namespace, extra_body, affinity_key, params, False, session_id)
        return json_body(*await self._channel.asend(self._calls.chat(messages, g)))

    async def acomplete(
        self,
        prompt: str,
        *,
        model: str | None = None,
        namespace: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        affinity_key: str | bytes | None = None,
        session_id: str | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        """Async twin of :meth:`complete`."""
        g = Generation(model, namespace, extra_body, affinity_key, params, False, session_id)
        return json_body(*await self._channel.asend(self._calls.completion(prompt, g)))

    async def astream_chat(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        namespace: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        affinity_key: str | bytes | None = None,
        session_id: str | None = None,
        **params: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        """Async twin of :meth:`stream_chat`."""
        g = Generation(model, namespace, extra_body, affinity_key, params, True, session_id)
        async with _ChunkStream(self._channel, self._calls.chat(messages, g)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def atokenize(
        self,
        prompt: str | Sequence[Message],
        *,
        model: str | None = None,
        add_special_tokens: bool | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        add_generation_prompt: bool | None = None,
    ) -> list[int]:
        """Async twin of :meth:`tokenize`."""
        fields = _chat_fields(tools, chat_template_kwargs, add_generation_prompt)
        call = self._calls.tokenize(prompt, model, add_special_tokens, fields)
        return _token_ids(*await self._channel.asend(call))

    async def amodels(self) -> list[str]:
        """Async twin of :meth:`models`."""
        resp, ep = await self._channel.asend(Call("GET", "models"))
        return _model_ids(json_body(resp, ep))

    async def ametrics(self) -> dict[str, PrefixCacheMetrics | None]:
        """Async twin of :meth:`metrics`."""
        return await run_async(self._metrics_flow())

    async def acheck_health(self) -> dict[str, bool]:
        """Async twin of :meth:`check_health`."""
        return await run_async(self._health_flow())

    async def awarm_prefixes(
        self,
        prefixes: Sequence[Prefix],
        *,
        model: str | None = None,
        namespace: str | None = None,
    ) -> int:
        """Async twin of :meth:`warm_prefixes`."""
        items = [self._warmups.remember(p, model, namespace) for p in prefixes]
        return await run_async(self._warm_flow(self._warmups.plan(items)))

    async def arewarm(self) -> int:
        """Async twin of :meth:`rewarm`."""
        return await run_async(self._warm_flow(self._warmups.recovered()))

    async def aclose(self) -> None:
        """Close the clients the router created (passed-in ones stay open)."""
        self._d.close_events()
        await self._channel.aclose()

    async def __aenter__(self) -> VllmRouter:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ frameworks
    def httpx_client(
        self, *, namespace: str | None = None, session_id: str | None = None, **kwargs: Any
    ) -> httpx.Client:
        """An ``httpx.Client`` whose requests go through this router.

        Give it to a framework's OpenAI client, with any of the endpoints (or any URL
        ending in the same ``/v1`` path) as the base URL: every request is re-targeted to
        the replica the router picks, retried and failed over, gets ``cache_salt`` for
        ``namespace`` (or the ``x-agent-cache-namespace`` header), keeps ``session_id``
        (or the ``x-agent-cache-session`` header) on one replica, and streams get
        ``stream_options.include_usage``. The caller owns the returned client; closing
        it leaves the router open.

        Example (needs ``langchain-openai``)::

            from langchain_openai import ChatOpenAI
            llm = ChatOpenAI(base_url=router.endpoints[0], api_key="EMPTY",
                             http_client=router.httpx_client())
        """
        kwargs.setdefault("timeout", self._d.total_timeout)
        return httpx.Client(
            transport=RoutingTransport(self._channel, namespace=namespace, session_id=session_id),
            **kwargs,
        )

    def async_httpx_client(
        self, *, namespace: str | None = None, session_id: str | None = None, **kwargs: Any
    ) -> httpx.AsyncClient:
        """Async twin of :meth:`httpx_client` (for ``http_async_client=``).

        Example (needs ``langchain-openai``)::

            client = router.async_httpx_client()
            llm = ChatOpenAI(base_url=url, http_async_client=client)
        """
        kwargs.setdefault("timeout", self._d.total_timeout)
        return httpx.AsyncClient(
            transport=AsyncRoutingTransport(
                self._channel, namespace=namespace, session_id=session_id
            ),
            **kwargs,
        )

    # ------------------------------------------------------------------ helpers
    def _apply_health(self, ep: Endpoint, ok: bool) -> None:
        with self._d.lock:
            if ok:
                if ep.breaker.state != "closed" and ep.breaker.success():
                    ep.needs_warmup = True
            else:
                ep.breaker.trip()


def _stream_failed(ep: Endpoint, problem: str) -> BackendError:
    return BackendError(
        f"stream from {ep.base_url} failed after HTTP 200: {problem}", endpoint=ep.base_url
    )


def _model_ids(data: Mapping[str, Any]) -> list[str]:
    items = data.get("data")
    return [str(m["id"]) for m in items or [] if isinstance(m, dict) and "id" in m]


def _chat_fields(
    tools: Sequence[Mapping[str, Any]] | None,
    template_kwargs: Mapping[str, Any] | None,
    add_generation_prompt: bool | None,
) -> dict[str, Any]:
    return {
        "tools": [dict(t) for t in tools] if tools is not None else None,
        "chat_template_kwargs": dict(template_kwargs) if template_kwargs is not None else None,
        "add_generation_prompt": add_generation_prompt,
    }


@dataclasses.dataclass(frozen=True)
class _Probe:
    """A GET of an endpoint's server-root path (``/health``, ``/metrics``) with the
    router's own client and ``health_timeout``, for the flows both drivers run."""

    router: VllmRouter

    def get(self, ep: Endpoint, path: str) -> httpx.Response:
        client = self.router.channel.client()
        return client.get(ep.url_for(path, root=True), timeout=self.router.health_timeout)

    async def aget(self, ep: Endpoint, path: str) -> httpx.Response:
        client = self.router.channel.async_client()
        return await client.get(ep.url_for(path, root=True), timeout=self.router.health_timeout)


class _ChunkStream:
    """A streamed chat completion's parsed chunks (:meth:`chunks`, or ``async with`` it
    for an async iterator closed on the way out): usage noted on the way, an error event
    or a broken connection the replica's failure."""

    def __init__(self, channel: Channel, call: Call) -> None:
        self._channel, self._call = channel, call
        self._usage: Any = None
        self._failed = False
        self._achunks: AsyncGenerator[dict[str, Any], None] | None = None

    async def __aenter__(self) -> AsyncIterator[dict[str, Any]]:
        self._achunks = self._async_chunks()
        return self._achunks

    async def __aexit__(self, *exc_info: object) -> None:
        if self._achunks is not None:
            await self._achunks.aclose()

    def _chunk(self, ep: Endpoint, line: str) -> dict[str, Any] | None:
        chunk = parse_sse_line(line)
        if chunk is None:
            return None
        problem = stream_error(chunk)
        if problem is not None:
            self._failed = True
            raise _stream_failed(ep, problem)
        self._usage = chunk_usage(chunk) or self._usage
        return chunk

    def _broke(self, ep: Endpoint, exc: httpx.HTTPError) -> BackendError:
        self._failed = True
        return BackendError(f"stream broke: {exc!r}", endpoint=ep.base_url)

    def _end(self, ep: Endpoint) -> None:
        self._channel.end_stream(ep, self._usage, failed=self._failed, call=self._call)

    def chunks(self) -> Iterator[dict[str, Any]]:
        resp, ep = self._channel.send(self._call)
        if resp.status_code >= 400:
            raise status_error(resp, ep)
        try:
            for line in resp.iter_lines():
                if (chunk := self._chunk(ep, line)) is not None:
                    yield chunk
        except httpx.HTTPError as exc:
            raise self._broke(ep, exc) from exc
        finally:
            resp.close()
            self._end(ep)

    async def _async_chunks(self) -> AsyncGenerator[dict[str, Any], None]:
        resp, ep = await self._channel.asend(self._call)
        if resp.status_code >= 400:
            raise status_error(resp, ep)
        try:
            async for line in resp.aiter_lines():
                if (chunk := self._chunk(ep, line)) is not None:
                    yield chunk
        except httpx.HTTPError as exc:
            raise self._broke(ep, exc) from exc
        finally:
            await resp.aclose()
            self._end(ep)


def _token_ids(resp: httpx.Response, ep: Endpoint) -> list[int]:
    return token_ids(json_body(resp, ep), ep)
