"""Sending one call: endpoint choice, retries with backoff, failover, breakers, counters.

:meth:`Dispatcher.send` and :meth:`Dispatcher.asend` run one flow (:meth:`Dispatcher._send`,
see :mod:`agent_cache._flow`) that makes every decision (:meth:`Dispatcher._plan`,
:meth:`Dispatcher._begin`, :meth:`Dispatcher._judge`, ...) and yields its HTTP I/O and its
waits; only the driver differs.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
)

from agent_cache._flow import Flow, run_async, run_sync
from agent_cache._io import call_twin, sleep, twin
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.vllm._endpoint import OPEN, CircuitBreaker, Endpoint
from agent_cache.vllm._protocol import is_generation_path, is_retryable_status, usage_counts
from agent_cache.vllm._ratio import CharsPerToken
from agent_cache.vllm.affinity import BoundedLoad, rendezvous_order
from agent_cache.vllm.choice import PrefixChooser
from agent_cache.vllm.kv_events import (
    KvEventIndex,
    KvEventSubscriber,
    KvMatch,
    offset_endpoint_port,
)
from agent_cache.vllm.metrics import parse_load_metrics

#: How far (relative) the learned characters-per-token ratio moves before the tree's
#: capacity in blocks follows it: each shrink expires blocks for good, so following
#: every wobble of the estimate cost 1.1 points of cached share in the routing bench.
CAPACITY_DEADBAND = 0.01
POLICIES = ("prefix", "affinity", "least_loaded", "round_robin")

__all__ = ["Call", "DispatchOptions", "Dispatcher", "UsageSink"]

log = logging.getLogger("agent_cache.vllm")


class UsageSink(Protocol):
    """Anything that takes model usage, e.g. :class:`~agent_cache.LayeredCache`."""

    def record_model_usage(self, prompt_tokens: int, cached_tokens: int | None) -> None: ...


@dataclass
class Call:
    """One logical request, before an endpoint is chosen."""

    method: str
    path: str  # relative to the API base (or to the server root when ``root``)
    root: bool = False
    body: Mapping[str, Any] | None = None  # JSON body
    content: bytes | None = None  # raw body (transport pass-through)
    headers: Mapping[str, str] = field(default_factory=dict)
    params: str = ""  # raw query string
    key: bytes | None = None  # affinity key; None: no preference
    blocks: list[int] | None = None  # chained block hashes (prefix policy)
    block_tokens: float = 16.0  # tokens one block stands for
    prompt_tokens: float = 0.0  # estimated prompt tokens
    prompt_chars: int | None = None  # characters of its rendered text prompt (None: ids)
    session: str | None = None  # keeps its replica while that is not overloaded
    tokens: list[int] | None = None  # the rendered prompt's token ids, when known
    tokens_partial: bool = False  # ``tokens`` are of a prefix of the prompt only
    salt: str | None = None  # its cache_salt (KV events key block 0 with it)
    kv: KvMatch | None = None  # what the KV events say each replica holds of it
    stream: bool = False
    pinned: Endpoint | None = None  # only this endpoint (warm-up)
    record: bool = True  # record usage (warm-ups are not traffic)

    @property
    def generation(self) -> bool:
        """A non-streaming generation: nothing arrives until the whole answer is done,
        so its read timeout is the generation timeout, not the per-chunk one."""
        return not self.stream and not self.root and is_generation_path(self.path)


class _Retryable(Exception):
    def __init__(self, endpoint: Endpoint, reason: str) -> None:
        super().__init__(reason)
        self.endpoint = endpoint
        self.reason = reason


class _Exhausted(Exception):
    """No endpoint left to try in this call."""


@dataclass
class _Attempts:
    plan: list[Endpoint]
    tried: list[tuple[Endpoint, str]] = field(default_factory=list)
    next_index: int = 0
    last_error: BaseException | None = None


@dataclass(frozen=True)
class DispatchOptions:
    """A :class:`Dispatcher`'s settings: the :class:`VllmRouter` arguments it acts on."""

    policy: str
    timeout: float
    generation_timeout: float
    connect_timeout: float
    total_timeout: float
    max_attempts: int | None
    backoff_initial: float
    backoff_max: float
    breaker_threshold: int
    breaker_reset: float
    load_factor: float
    load_window: int
    clock: Callable[[], float]
    sink: UsageSink | None
    api_key: str | None
    capacity_tokens: int | Sequence[int | None] | None = None
    block_chars: int = 64
    ratio: CharsPerToken | None = None
    load_weight: float = 1.0
    prefill_rate: float = 32_000.0
    metrics_interval: float | None = None
    metrics_timeout: float = 2.0
    kv_events: Sequence[str | None] | None = None
    kv_block_size: int = 16
    kv_dp_ranks: int | Sequence[int] = 1
    kv_replay: Sequence[str | None] | None = None
    kv_speculative_ttl: float = 5.0


def _check_options(endpoints: Sequence[str], o: DispatchOptions) -> None:
    if not endpoints:
        raise ConfigurationError("VllmRouter needs at least one endpoint")
    if o.policy not in POLICIES:
        raise ConfigurationError(f"policy must be one of {POLICIES}, not {o.policy!r}")
    if min(o.timeout, o.generation_timeout, o.connect_timeout, o.total_timeout) <= 0:
        raise ConfigurationError(
            "timeout, generation_timeout, connect_timeout and total_timeout must be > 0"
        )
    if o.max_attempts is not None and o.max_attempts < 1:
        raise ConfigurationError("max_attempts must be >= 1")
    if o.backoff_initial < 0 or o.backoff_max < 0:
        raise ConfigurationError("backoff times must be >= 0")


def _per_endpoint(value: Any, n: int, name: str) -> list[Any]:
    """``value`` as one entry per endpoint: a sequence as given, else ``n`` copies."""
    values = list(value) if isinstance(value, Sequence) else [value] * n
    if len(values) != n:
        raise ConfigurationError(f"{name} needs one entry per endpoint")
    return values


def _kv_subscribers(
    o: DispatchOptions, n: int
) -> tuple[KvEventIndex | None, list[KvEventSubscriber]]:
    """The KV-event index and one subscriber per watched replica and data-parallel rank
    (none without ``kv_events``)."""
    if o.kv_events is None:
        return None, []
    kv_events = o.kv_events
    if len(kv_events) != n:
        raise ConfigurationError("kv_events needs one address (or None) per endpoint")
    ranks = list(o.kv_dp_ranks) if isinstance(o.kv_dp_ranks, Sequence) else [o.kv_dp_ranks] * n
    replay = list(o.kv_replay) if o.kv_replay is not None else [None] * n
    if len(ranks) != n or len(replay) != n:
        raise ConfigurationError("kv_dp_ranks and kv_replay need one entry per endpoint")
    if min(ranks) < 1:
        raise ConfigurationError("kv_dp_ranks must be >= 1")
    index = KvEventIndex(
        n,
        block_size=o.kv_block_size,
        speculative_ttl=o.kv_speculative_ttl,
        clock=o.clock,
        watched=[addr is not None for addr in kv_events],
    )
    # data-parallel rank k publishes on the port plus k (vLLM's offset_endpoint_port)
    subscribers = [
        KvEventSubscriber(
            offset_endpoint_port(addr, rank),
            i,
            index,
            rank=rank,
            replay=offset_endpoint_port(rep, rank) if rep is not None else None,
        )
        for i, (addr, rep) in enumerate(zip(kv_events, replay, strict=True))
        if addr is not None
        for rank in range(ranks[i])
    ]
    return index, subscribers


class Dispatcher:
    """Endpoint state and the retry loops (internal; owned by :class:`VllmRouter`)."""

    def __init__(self, endpoints: Sequence[str], o: DispatchOptions) -> None:
        _check_options(endpoints, o)
        self.endpoints = [
            Endpoint(url, CircuitBreaker(o.breaker_threshold, o.breaker_reset, o.clock))
            for url in endpoints
        ]
        urls = [e.base_url for e in self.endpoints]
        if len(set(urls)) != len(urls):
            raise ConfigurationError(f"duplicate endpoints in {urls}")
        self.urls = urls
        self.policy = o.policy
        self.timeout = o.timeout
        self.generation_timeout = o.generation_timeout
        self.connect_timeout = o.connect_timeout
        self.total_timeout = o.total_timeout
        self.max_attempts = o.max_attempts or len(self.endpoints) + 2
        self.backoff_initial = o.backoff_initial
        self.backoff_max = o.backoff_max
        self.clock = o.clock
        self.sink = o.sink
        self.api_key = o.api_key
        self.lock = threading.Lock()
        self.block_chars = o.block_chars
        self.ratio = o.ratio if o.ratio is not None else CharsPerToken(4.0)
        self._capacity_cpt = self.ratio.value  # the ratio the capacity was set with
        caps = _per_endpoint(o.capacity_tokens, len(self.endpoints), "capacity_tokens")
        # KV capacity in tokens per replica (set, or learned from /metrics); the tree's
        # capacity in blocks follows it and the characters-per-token estimate
        self._capacity_tokens: list[int | None] = caps
        self.load = BoundedLoad(
            len(self.endpoints), load_factor=o.load_factor, window=o.load_window
        )
        self.chooser = PrefixChooser(
            len(self.endpoints),
            capacity_blocks=[self._blocks(c) for c in caps],
            load_weight=o.load_weight,
            prefill_rate=o.prefill_rate,
            load_factor=o.load_factor,
            metrics_ttl=max(30.0, 3 * (o.metrics_interval or 0.0)),
            clock=o.clock,
        )
        self.learn_capacity = o.capacity_tokens is None
        self.metrics_interval = o.metrics_interval
        self.metrics_timeout = o.metrics_timeout
        self._metrics_due = 0.0
        self._metrics_lock = threading.Lock()
        self.kv_index, self._subscribers = _kv_subscribers(o, len(self.endpoints))
        self._events_started = False
        self._rr = 0

    # ------------------------------------------------------------------ tokens
    @property
    def text_block_tokens(self) -> float:
        """Tokens one router-side text block stands for in the tree's capacity (the
        ratio then, within :data:`CAPACITY_DEADBAND` of the estimate now)."""
        return self.block_chars / self._capacity_cpt

    def _blocks(self, capacity_tokens: int | None) -> int | None:
        if capacity_tokens is None:
            return None
        return max(1, int(capacity_tokens / self.text_block_tokens))

    def _sync_capacity(self) -> None:
        """The tree's capacity in blocks from the tokens and the ratio now; under the
        lock. The blocks' keys (character windows) never change, only their count."""
        tree = self.chooser.tree
        for i, cap in enumerate(self._capacity_tokens):
            blocks = self._blocks(cap)
            if blocks is not None and tree.capacity(i) != blocks:
                tree.set_capacity(i, blocks)

    def observe_prompt(self, chars: int, tokens: int) -> None:
        """One answered prompt: ``chars`` characters were ``tokens`` tokens (learns the
        characters-per-token ratio unless it is fixed; benchmarks replaying a stream
        call it, :meth:`record_usage` does for real calls)."""
        with self.lock:
            self._learn(chars, tokens)

    def _learn(self, chars: int, tokens: int) -> None:
        if not self.ratio.observe(chars, tokens):
            return
        now = self.ratio.value
        if now > self._capacity_cpt or now < self._capacity_cpt * (1.0 - CAPACITY_DEADBAND):
            self._capacity_cpt = now
            self._sync_capacity()

    # ------------------------------------------------------------------ choice
    def _kv_lookup(self, call: Call) -> None:
        """What the KV events say each replica holds of ``call`` (outside the lock:
        the keys are hashed once per block size, then one dict walk per replica)."""
        index = self.kv_index
        if index is None or call.tokens is None or self.policy != "prefix":
            return
        if call.blocks is None or call.pinned is not None:
            return
        model = call.body.get("model") if call.body is not None else None
        call.kv = index.lookup(
            call.tokens, salt=call.salt, lora=index.lora_of(model), partial=call.tokens_partial
        )

    def _plan(self, call: Call) -> list[Endpoint]:
        """Endpoints to try, best first; only those whose breaker lets a request through."""
        self._kv_lookup(call)
        with self.lock:
            if call.pinned is not None:
                return [call.pinned] if call.pinned.breaker.available() else []
            up = [i for i, e in enumerate(self.endpoints) if e.breaker.available()]
            if not up:
                return []
            start = self._rr % len(up)
            rotated = up[start:] + up[:start]
            if self.policy == "round_robin":
                self._rr += 1
                ranked = rotated
            elif self.policy == "least_loaded":
                self._rr += 1
                now = self.clock()
                ranked = sorted(rotated, key=lambda i: self.chooser.load(i, now))
            elif self.policy == "prefix" and call.blocks is not None:
                cached: list[float] | None = None
                kv = call.kv
                if (
                    kv is not None
                    and call.tokens is not None
                    and any(t is not None for t in kv.tokens)
                ):  # replicas whose events stopped are estimated by the tree
                    tree = self.chooser.tree.match(call.blocks)
                    cached = [
                        t if t is not None else tree[i] * call.block_tokens
                        for i, t in enumerate(kv.tokens)
                    ]
                    if call.tokens_partial:  # the ids of a prefix: the estimate may be more
                        call.prompt_tokens = max(call.prompt_tokens, float(len(call.tokens)))
                    else:
                        call.prompt_tokens = float(len(call.tokens))
                ranked = self.chooser.rank(
                    up,
                    call.blocks,
                    block_tokens=call.block_tokens,
                    prompt_tokens=call.prompt_tokens,
                    session=call.session,
                    cached_tokens=cached,
                )
            elif self.policy == "affinity" and call.key is not None:
                allowed = set(up)
                ranked = [i for i in rendezvous_order(call.key, self.urls) if i in allowed]
                first = self.load.pick(ranked)
                ranked = [first] + [i for i in ranked if i != first]
            else:  # no prompt to route by
                self._rr += 1
                ranked = rotated
            return [self.endpoints[i] for i in ranked]

    def pick(self, call: Call) -> Endpoint | None:
        """The endpoint ``call`` would go to first (counted as assigned)."""
        plan = self._plan(call)
        if plan:
            with self.lock:
                self._assign(plan[0], call)
                self._kv_sent(self.endpoints.index(plan[0]), call, timer=False)
        return plan[0] if plan else None

    def replayed(self, i: int, *, done: bool) -> None:
        """A request picked with :meth:`pick` started (``done=False``) or finished on
        replica ``i`` outside :meth:`send` (benchmarks replaying a stream)."""
        with self.lock:
            step = -1 if done else 1
            self.load.in_flight[i] = max(0, self.load.in_flight[i] + step)
            (self.chooser.finished if done else self.chooser.started)(i)

    def _assign(self, ep: Endpoint, call: Call) -> None:
        """Record that ``call`` goes to ``ep`` (its blocks, session, share); under the lock."""
        if call.blocks is not None and call.pinned is None and self.policy == "prefix":
            i = self.endpoints.index(ep)
            # the prefill it queues there: by the events where they tell, else the tree
            held = call.kv.tokens[i] if call.kv is not None and call.tokens is not None else None
            self.chooser.assign(
                i,
                call.blocks,
                session=call.session,
                prompt_tokens=call.prompt_tokens,
                uncached_tokens=None if held is None else max(0.0, call.prompt_tokens - held),
                block_tokens=call.block_tokens,
            )
        elif call.blocks is not None:  # warm-ups and other policies: the tree only
            self.chooser.tree.insert(self.endpoints.index(ep), call.blocks)

    # ------------------------------------------------------------------ KV events
    def start_events(self) -> None:
        """Connect the KV-event subscribers (once, at the first call)."""
        if self._events_started or not self._subscribers:
            return
        with self.lock:
            if self._events_started:
                return
            self._events_started = True
        for sub in self._subscribers:
            sub.start()

    def close_events(self) -> None:
        """Stop the KV-event subscribers."""
        for sub in self._subscribers:
            sub.close()
        self._events_started = False

    # ------------------------------------------------------------------ live load
    def metrics_due(self) -> bool:
        """Whether ``/metrics`` should be read now (and claim the reading if so)."""
        if self.metrics_interval is None or self.policy not in ("prefix", "least_loaded"):
            return False
        if not self._metrics_lock.acquire(blocking=False):
            return False  # another caller is reading them
        now = self.clock()
        if now < self._metrics_due:
            self._metrics_lock.release()
            return False
        self._metrics_due = now + self.metrics_interval
        return True

    def observe_metrics(self, ep: Endpoint, text: str | None) -> None:
        """Take one endpoint's ``/metrics`` page (None: unreadable)."""
        load = parse_load_metrics(text) if text is not None else None
        if load is None:
            return
        i = self.endpoints.index(ep)
        with self.lock:
            self.chooser.observe(i, load, self.clock())
            if self.kv_index is not None and load.block_size:
                self.kv_index.set_block_size(i, load.block_size, "metrics")
            cap = load.capacity_tokens
            if self.learn_capacity and cap:
                self._capacity_tokens[i] = int(cap)
                self._sync_capacity()

    def _refresh(self, client: httpx.Client | httpx.AsyncClient) -> Flow[None]:
        """Read every endpoint's ``/metrics`` (load and cache size) once."""
        for ep in self.endpoints:
            text: str | None = None
            try:
                url = ep.url_for("metrics", root=True)
                resp = yield from _client_get(client, url, self.metrics_timeout)
                text = resp.text if resp.status_code == 200 else None
            except httpx.HTTPError as exc:
                log.debug("metrics of %s unreadable: %r", ep.base_url, exc)
            self.observe_metrics(ep, text)

    def _next(self, state: _Attempts) -> Endpoint:
        """The next endpoint of the plan that is still available (cycling)."""
        with self.lock:
            for _ in range(len(state.plan)):
                ep = state.plan[state.next_index % len(state.plan)]
                state.next_index += 1
                if ep.breaker.available():
                    return ep
        raise _Exhausted()

    def _wait(self, state: _Attempts) -> Callable[[RetryCallState], float]:
        def wait(rs: RetryCallState) -> float:
            n = rs.attempt_number  # attempts made so far
            if n < len(state.plan):
                return 0.0  # fail over to a fresh replica at once
            rounds = n - len(state.plan)
            delay = min(self.backoff_max, self.backoff_initial * (2.0**rounds))
            return float(delay + random.uniform(0, self.backoff_initial))

        return wait

    def _retrying_kwargs(self, state: _Attempts) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.max_attempts) | stop_after_delay(self.total_timeout),
            "wait": self._wait(state),
            "retry": retry_if_exception_type(_Retryable),
            "reraise": True,
        }

    # ------------------------------------------------------------------ bookkeeping
    def _begin(self, ep: Endpoint, call: Call) -> None:
        with self.lock:
            ep.breaker.acquire()
            ep.requests += 1
            ep.in_flight += 1
            i = self.endpoints.index(ep)
            self.load.in_flight[i] += 1
            self.chooser.started(i)
            self._assign(ep, call)
            self._kv_sent(i, call)

    def _kv_sent(self, i: int, call: Call, *, timer: bool = True) -> None:
        """``call`` goes to replica ``i``: events should follow (``timer``: start its
        staleness clock), and the blocks it will store there count as held until they
        do (speculative entries). Under the lock."""
        index = self.kv_index
        if index is None or call.blocks is None:
            return
        # a prompt whose full blocks the replica holds may store nothing new
        held = call.kv is not None and call.kv.complete[i]
        if held and call.tokens_partial and call.tokens is not None:
            # beyond the prefix, at least a block more to store (estimated)?
            b = index.block_sizes[i]
            held = call.prompt_tokens < (len(call.tokens) // b + 1) * b
        if timer:
            index.sent(i, expect=not held)
        if call.tokens is not None and not held:
            model = call.body.get("model") if call.body is not None else None
            index.expect(i, call.tokens, salt=call.salt, lora=index.lora_of(model), match=call.kv)

    def _finished(self, ep: Endpoint) -> None:
        """One request of ``ep`` is over; under the lock."""
        ep.in_flight -= 1
        i = self.endpoints.index(ep)
        self.load.in_flight[i] -= 1
        self.chooser.finished(i)

    def _failed(self, ep: Endpoint) -> None:
        """One failure of ``ep``; a breaker that opens forgets what the replica held (it
        may come back restarted, with an empty cache). Under the lock."""
        ep.failures += 1
        ep.breaker.failure()
        if ep.breaker.state == OPEN:
            self.chooser.tree.clear(self.endpoints.index(ep))
            if self.kv_index is not None:
                self.kv_index.clear(self.endpoints.index(ep))

    def _release(self, ep: Endpoint, *, ok: bool, reason: str = "") -> None:
        with self.lock:
            self._finished(ep)
            if ok:
                if ep.breaker.success():
                    ep.needs_warmup = True
                    log.info("endpoint %s is back", ep.base_url)
            else:
                self._failed(ep)
                log.warning("endpoint %s failed: %s", ep.base_url, reason)

    def record_usage(self, ep: Endpoint, usage: Any, call: Call | None = None) -> None:
        """Count ``usage`` for ``ep``; with the ``call`` it answers, learn the
        characters-per-token ratio from its prompt."""
        counts = usage_counts(usage)
        if counts is None:
            return
        prompt, cached = counts
        with self.lock:
            ep.prompt_tokens += prompt
            ep.cached_tokens += cached
            if call is not None and call.prompt_chars is not None:
                self._learn(call.prompt_chars, prompt)
        if self.sink is not None:
            self.sink.record_model_usage(prompt, cached)

    def end_stream(
        self, ep: Endpoint, usage: Any, *, failed: bool, call: Call | None = None
    ) -> None:
        """A stream that :meth:`send` opened (for ``call``) is finished (or broke)."""
        if usage is not None:
            self.record_usage(ep, usage, call)
        with self.lock:
            self._finished(ep)
            if failed:
                self._failed(ep)

    def _request(
        self,
        client: httpx.Client | httpx.AsyncClient,
        ep: Endpoint,
        call: Call,
        timeout: httpx.Timeout,
    ) -> httpx.Request:
        url = ep.url_for(call.path, root=call.root)
        if call.params:
            url = f"{url}?{call.params}"
        headers = {"accept-encoding": "identity", **dict(call.headers)}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        content = call.content
        if call.body is not None:
            content = json.dumps(call.body).encode("utf-8")
            headers["content-type"] = "application/json"
        return client.build_request(
            call.method, url, content=content, headers=headers, timeout=timeout
        )

    def attempt_timeout(self, call: Call, started: float) -> httpx.Timeout:
        """One attempt's timeouts: connecting is quick or fails over; a non-streaming
        generation may read for ``generation_timeout`` (vLLM sends nothing before the
        whole answer), anything else for ``timeout`` between bytes; all within what is
        left of ``total_timeout``."""
        left = max(0.05, self.total_timeout - (self.clock() - started))
        read = min(self.generation_timeout if call.generation else self.timeout, left)
        return httpx.Timeout(read, connect=min(self.connect_timeout, read))

    def _judge(self, ep: Endpoint, call: Call, resp: httpx.Response) -> None:
        """After the headers (and, unless streaming, the body) arrived."""
        if is_retryable_status(resp.status_code):
            self._release(ep, ok=False, reason=f"HTTP {resp.status_code}")
            raise _Retryable(ep, f"HTTP {resp.status_code}")
        if call.stream:
            if resp.status_code < 400:
                with self.lock:  # stays in flight until end_stream
                    if ep.breaker.success():
                        ep.needs_warmup = True
            return  # an error body is read (and the endpoint released) by the caller
        self._release(ep, ok=True)
        if call.record and resp.status_code < 400 and is_generation_path(call.path):
            try:
                data = resp.json()
            except ValueError:
                return
            if isinstance(data, dict):
                self.record_usage(ep, data.get("usage"), call)

    def _error(self, call: Call, state: _Attempts) -> BackendError:
        what = f"{call.method} {call.path}"
        if not state.tried:
            names = ", ".join(self.urls if call.pinned is None else [call.pinned.base_url])
            return BackendError(
                f"{what}: no endpoint available (circuit breakers open: {names})",
                endpoint=names,
            )
        detail = "; ".join(f"{ep.base_url} ({reason})" for ep, reason in state.tried)
        names = ", ".join(dict.fromkeys(ep.base_url for ep, _ in state.tried))
        return BackendError(
            f"{what} failed after {len(state.tried)} attempt(s) on every endpoint tried: {detail}",
            endpoint=names,
        )

    # ------------------------------------------------------------------ sending
    def _attempts(self, call: Call) -> tuple[_Attempts, float]:
        """A call's plan of endpoints and its start; no endpoint: the error."""
        state = _Attempts(self._plan(call))
        started = self.clock()
        if not state.plan:
            raise self._error(call, state)
        return state, started

    def _prepare(
        self, client: httpx.Client | httpx.AsyncClient, call: Call, state: _Attempts, started: float
    ) -> tuple[Endpoint, httpx.Request]:
        """The next endpoint of the plan, taken, and the request to send it."""
        ep = self._next(state)
        self._begin(ep, call)
        return ep, self._request(client, ep, call, self.attempt_timeout(call, started))

    def _unsent(self, state: _Attempts, ep: Endpoint, exc: httpx.TransportError) -> _Retryable:
        """A request that never got an answer: the endpoint released as failed."""
        reason = f"{type(exc).__name__}: {exc}"
        state.tried.append((ep, reason))
        state.last_error = exc
        self._release(ep, ok=False, reason=reason)
        return _Retryable(ep, reason)

    def _refusal(
        self, state: _Attempts, ep: Endpoint, call: Call, resp: httpx.Response
    ) -> _Retryable | None:
        """:meth:`_judge`'s verdict: ``None``, or the retry (recorded as the call's last
        error) that the caller raises once it closed ``resp``."""
        try:
            self._judge(ep, call, resp)
        except _Retryable as exc:
            state.tried.append((ep, exc.reason))
            state.last_error = httpx.HTTPStatusError(
                f"{exc.reason} from {ep.base_url}", request=resp.request, response=resp
            )
            return exc
        return None

    def send(self, client: httpx.Client, call: Call) -> tuple[httpx.Response, Endpoint]:
        """Send ``call``; retry, fail over; the response is read unless ``call.stream``.

        Raises:
            BackendError: Every attempt failed, or no endpoint was available.
        """
        return run_sync(self._send(client, call))

    async def asend(self, client: httpx.AsyncClient, call: Call) -> tuple[httpx.Response, Endpoint]:
        """Async twin of :meth:`send`."""
        return await run_async(self._send(client, call))

    def _send(
        self, client: httpx.Client | httpx.AsyncClient, call: Call
    ) -> Flow[tuple[httpx.Response, Endpoint]]:
        """:meth:`send` and :meth:`asend`, written once: tenacity decides each retry and
        its wait, which the flow's driver sleeps (``asyncio.sleep`` under ``asend``)."""
        self.start_events()
        if self.metrics_due():
            try:
                yield from self._refresh(client)
            finally:
                self._metrics_lock.release()
        state, started = self._attempts(call)
        waits: list[float] = []  # what tenacity would sleep before the next attempt
        try:
            for attempt in Retrying(sleep=waits.append, **self._retrying_kwargs(state)):
                if waits:
                    yield from sleep(waits.pop())
                with attempt:
                    return (yield from self._attempt(client, call, state, started))
        except (_Retryable, _Exhausted):
            raise self._error(call, state) from state.last_error
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(
        self,
        client: httpx.Client | httpx.AsyncClient,
        call: Call,
        state: _Attempts,
        started: float,
    ) -> Flow[tuple[httpx.Response, Endpoint]]:
        ep, request = self._prepare(client, call, state, started)
        try:
            resp = yield from _client_send(client, request, call.stream)
        except httpx.TransportError as exc:
            raise self._unsent(state, ep, exc) from exc
        refusal = self._refusal(state, ep, call, resp)
        if refusal is not None:
            yield from _response_close(resp)
            raise refusal
        if call.stream and resp.status_code >= 400:
            yield from _response_read(resp)
            self._release(ep, ok=True)
        return resp, ep


# the HTTP steps of a flow: a sync client's and response's methods, or under the async
# driver the coroutines of an ``AsyncClient`` (whose ``send``/``get`` are coroutines) and
# of its responses (``aclose``, ``aread``)
def _client_send(client: Any, request: httpx.Request, stream: bool) -> Flow[httpx.Response]:
    return call_twin(client.send, twin(client, "send"), request, stream=stream)


def _client_get(client: Any, url: str, timeout: float) -> Flow[httpx.Response]:
    return call_twin(client.get, twin(client, "get"), url, timeout=timeout)


def _response_close(resp: httpx.Response) -> Flow[None]:
    return call_twin(resp.close, resp.aclose)


def _response_read(resp: httpx.Response) -> Flow[bytes]:
    return call_twin(resp.read, resp.aread)
