"""``get_or_compute``: a lookup, then one model call for all concurrent identical misses.

One flow (:mod:`agent_cache._flow`) for the sync and async twins. On a miss:

1. a short-lived negative entry (``negative_ttl``) answers a junk prompt again;
2. threads and tasks of this process share one call through :class:`SingleFlight`,
   other processes through a lease on the shared store (:func:`~agent_cache._lease.contend_flow`);
3. the leader waits for a model slot (:class:`~agent_cache.degrade.ModelGate`, or the
   namespace's fallback), calls ``compute``, records it and stores the answer (unless
   ``no_store``, not cacheable, or a refusal kept as a negative entry).

With a codec (``encode``/``decode``, what the framework adapters pass) the value a caller
gets is the framework object: ``encode(value)`` is the JSON payload written back (or
:data:`NOT_STORED`: returned, not stored), ``decode(payload)`` rebuilds the object from a
hit. A payload ``decode`` rejects is an incompatible entry: evicted, then computed. An
``encode`` that raises costs the write, never the paid answer. Coalesced callers share the
leader's value, not its payload.

A hit about to expire (``refresh_ahead``) is served and refreshed in the background by
one caller in the deployment (a daemon thread for the sync path, a task for the async
one). The request is prepared once (:class:`Plan`) and used by every step.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from agent_cache import _fork, tracing
from agent_cache import _io as io
from agent_cache import _request as rq
from agent_cache._backends import Backends
from agent_cache._flow import Flow
from agent_cache._hits import CacheHit, Fetched
from agent_cache._lease import Lease, contend_flow
from agent_cache._lookup import Reader
from agent_cache._settings import Settings
from agent_cache._write import Writer
from agent_cache.degrade import ModelGate, NegativeCache, Overloaded, looks_refused
from agent_cache.errors import AgentCacheError, ConfigurationError, SerializationError
from agent_cache.keys import digest
from agent_cache.policy import is_cacheable
from agent_cache.savings import usage_from
from agent_cache.singleflight import SingleFlight
from agent_cache.stats import Count, StatsRecorder

__all__ = ["NOT_STORED", "Codec", "Compute", "Fetcher", "NotStored", "Plan"]

log = logging.getLogger("agent_cache")


class NotStored(enum.Enum):
    """The type of :data:`NOT_STORED` (one member, so that ``is`` tests are typed)."""

    NOT_STORED = "NOT_STORED"

    def __repr__(self) -> str:
        return "agent_cache.NOT_STORED"


#: What an ``encode`` returns for a value to hand back without storing it (an error
#: output, an empty answer, an object with no faithful JSON form).
NOT_STORED: Final[Literal[NotStored.NOT_STORED]] = NotStored.NOT_STORED


@dataclass(frozen=True)
class Codec:
    """Between a caller's objects and the stored JSON payloads (identity when unset)."""

    encode: Callable[[Any], Any] | None = None
    decode: Callable[[Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class Compute:
    """The caller's ``compute``: a function (the sync path) or a coroutine function (the
    async one), called through :func:`agent_cache._io.compute`."""

    fn: Callable[[], Any]


@dataclass(frozen=True)
class Plan:
    """One ``get_or_compute`` call, prepared and validated once."""

    req: rq.Request
    compute: Compute
    llm_string: str
    policy: str
    ttl: float | None
    tags: tuple[str, ...]
    tokens: Any
    codec: Codec = Codec()

    @classmethod
    def of(
        cls,
        req: rq.Request,
        compute: Callable[[], Any],
        llm_string: str,
        policy: str,
        *,
        ttl: Any,
        tags: Iterable[str],
        tokens: Any,
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
    ) -> Plan:
        """Check the write arguments before the model is paid."""
        tag_list, ttl_s = rq.check_tags(tags), rq.check_ttl(ttl)
        for name, fn in (("encode", encode), ("decode", decode)):
            if fn is not None and not callable(fn):
                raise ConfigurationError(f"{name} must be callable, not {type(fn).__name__}")
        codec = Codec(encode, decode)
        return cls(req, Compute(compute), llm_string, policy, ttl_s, tag_list, tokens, codec)

    @property
    def flight_key(self) -> str:
        r = self.req
        return digest(r.namespace, r.llm_hash, r.template_version, r.context_hash, r.normalized)


def _caller_alive() -> Callable[[], bool] | None:
    """For a flow run by the async driver: whether its event loop still runs."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # the sync driver: a thread in its call is alive
        return None
    return lambda: loop.is_running() and not loop.is_closed()


class Fetcher:
    """The get-or-compute path of one cache (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        backends: Backends,
        reader: Reader,
        writer: Writer,
        stats: StatsRecorder,
        *,
        gate: ModelGate,
        negative: NegativeCache | None,
        timeout: float,
        failed: Callable[[Exception, str], None],
    ) -> None:
        self._s = settings
        self._b = backends
        self._reader = reader
        self._writer = writer
        self._stats = stats
        self.gate = gate
        self.negative = negative
        self.flight = SingleFlight(timeout)
        self._failed = failed
        self._refreshing: set[str] = set()
        self._leading: set[str] = set()  # flight keys whose lease this cache's leader holds
        self._inexact: set[str] = set()  # namespaces already warned of an inexact value
        self._refresh_lock = threading.Lock()
        _fork.after_fork_in_child(self, Fetcher._after_fork)

    def _after_fork(self) -> None:
        """In a forked child: a free lock, and none of the parent's leaders here."""
        self._refresh_lock = threading.Lock()
        self._leading = set()

    def fetch_flow(self, plan: Plan) -> Flow[Fetched]:
        req = plan.req
        hit = yield from self._reader.read_flow(req, plan.policy, plan.llm_string)
        if hit is not None:
            ok, value = self._decoded(plan, hit)
            if ok:
                lease = yield from io.call(self.claim_refresh, hit, plan.flight_key)
                if lease is not None:
                    yield from io.spawn(self._refresh_flow(plan, lease))
                return Fetched(value, hit)
            yield from self._evict_flow(hit)
        if plan.policy == "bypass":  # as if there were no cache: no flight, no lease
            return Fetched((yield from self._compute_flow(plan)), computed=True)
        found, negative = (False, None)
        if plan.policy != "refresh":
            found, negative = self._negative_hit(plan.flight_key)
        if found:
            return Fetched(negative)
        got, ran = yield from io.single_flight(
            self.flight, plan.flight_key, lambda: self._lead_flow(plan)
        )
        if not ran:
            self._stats.incr(Count.COALESCED, namespace=req.namespace)
            return Fetched(got.value, got.hit)
        return got

    def _lead_flow(self, plan: Plan) -> Flow[Fetched]:
        """This process's one caller for the key: contend across processes, compute.
        Under ``refresh`` no other process's answer is taken (the stored one is what is
        being replaced): compute at once. A call the in-process flight let through while
        this cache's own leader holds the lease (``compute`` asking for its own key, or a
        follower whose leader's event loop stopped) computes without contending: it would
        wait on itself."""
        if plan.flight_key in self._leading:
            value = yield from self._compute_flow(plan)
            return Fetched(value, computed=True)
        self._leading.add(plan.flight_key)
        try:
            return (yield from self._contend_and_compute(plan))
        finally:
            self._leading.discard(plan.flight_key)

    def _contend_and_compute(self, plan: Plan) -> Flow[Fetched]:
        ns = plan.req.namespace
        if plan.policy == "refresh":
            return Fetched((yield from self._compute_flow(plan)), computed=True)
        lease = Lease(
            self._b.kv, f"flight:{plan.flight_key}", ttl=self.flight.timeout, on_error=self._failed
        )
        hit, _held = yield from contend_flow(lease, lambda: io.call(self._reader.peek, plan.req))
        if hit is not None:
            ok, value = self._decoded(plan, hit)
            if ok:
                yield from io.lease_release(lease)
                self._stats.incr(Count.COALESCED, namespace=ns)
                return Fetched(value, hit)
            yield from self._evict_flow(hit)
        try:
            with lease.renewing(_caller_alive()):
                value = yield from self._compute_flow(plan)
            return Fetched(value, computed=True)
        finally:
            yield from io.lease_release(lease)

    def _compute_flow(self, plan: Plan) -> Flow[Any]:
        """A model slot, the model call, its record, and the write-back."""
        ns = plan.req.namespace
        ticket = yield from self.gate.admit_flow()
        try:
            if not ticket.ok:
                return self._overloaded(ns, plan.codec.decode)
            started = time.perf_counter()
            with tracing.span("model_call", namespace=ns):
                value = yield from io.compute(plan.compute.fn)
        finally:
            if ticket.token:
                yield from io.call(self.gate.release, ticket)
        return (yield from self.settle_flow(plan, started, value))

    def settle_flow(
        self, plan: Plan, started: float, value: Any, *, joined: bool = False
    ) -> Flow[Any]:
        """After a model call (a whole answer, or a stream's joined one): its record,
        the codec's payload, a negative entry for a refusal, else the write-back (unless
        ``no_store``)."""
        n = self._model_called(plan.req.namespace, started, value, plan.tokens)
        payload = self._encoded(plan, value)
        if payload is NOT_STORED:
            return value
        refused = plan.policy != "bypass" and self._remember_negative(
            plan.flight_key, payload, value
        )
        if plan.policy not in ("no_store", "bypass") and is_cacheable(payload) and not refused:
            own = plan.codec.encode is None and not joined  # the caller's own value
            if own and not self._reads_back(plan, payload):
                return value
            try:  # checked above, or a codec's (or a stream's join's) payload
                yield from self._writer.store_flow(
                    plan.req, payload, ttl=plan.ttl, tags=plan.tags, tokens=n, exact=False
                )
            except AgentCacheError as exc:  # the paid answer is returned all the same
                self._stats.incr(Count.ERRORS)
                log.warning(
                    "agent-cache could not store a computed answer (returned anyway): %s", exc
                )
        return value

    def _reads_back(self, plan: Plan, payload: Any) -> bool:
        """Whether the computed value (no codec) reads back from its record equal, with
        equal types (:func:`agent_cache._request.check_exact`); else it is returned, not stored:
        counted (``not_stored`` and ``not_exact``), warned once per namespace."""
        try:
            rq.check_exact(payload)
        except SerializationError as exc:
            if not getattr(exc, "inexact", False):
                return True  # not JSON at all: the write refuses it (counted as an error)
            ns = plan.req.namespace
            self._stats.incr(Count.NOT_STORED, namespace=ns)
            self._stats.incr(Count.NOT_EXACT, namespace=ns)
            with self._refresh_lock:
                first = ns not in self._inexact
                self._inexact.add(ns)
            (log.warning if first else log.debug)(
                "agent-cache: a computed answer in %r was returned, not stored: %s", ns, exc
            )
            return False
        return True

    # ------------------------------------------------------------------ the codec
    def _encoded(self, plan: Plan, value: Any) -> Any:
        """The payload to store for a computed value, or :data:`NOT_STORED`."""
        encode = plan.codec.encode
        if encode is None:
            return value
        ns = plan.req.namespace
        try:
            payload = encode(value)
        except Exception as exc:  # the paid answer is returned all the same
            self._stats.incr(Count.ENCODE_ERRORS, namespace=ns)
            log.warning("agent-cache could not encode a computed answer (not stored): %r", exc)
            return NOT_STORED
        if payload is NOT_STORED:
            self._stats.incr(Count.NOT_STORED, namespace=ns)
        return payload

    def _decoded(self, plan: Plan, hit: CacheHit) -> tuple[bool, Any]:
        """``(True, value)`` for a hit the caller can use; ``(False, None)`` for a
        payload ``decode`` rejects (an entry written by an incompatible writer)."""
        decode = plan.codec.decode
        if decode is None:
            return True, hit.response
        try:
            return True, decode(hit.response)
        except Exception as exc:
            self._stats.incr(Count.DECODE_ERRORS, namespace=hit.namespace)
            log.warning(
                "agent-cache: undecodable entry %s evicted and recomputed: %r", hit.key, exc
            )
            return False, None

    def _evict_flow(self, hit: CacheHit) -> Flow[None]:
        """Remove an entry from every layer (its record and its vector)."""
        try:
            yield from io.vector_delete(self._b.vectors, [hit.key])
            yield from io.kv_delete(self._b.kv, [hit.key])
            self._stats.incr(Count.EVICTED, namespace=hit.namespace)
        except Exception as exc:  # a failing store is logged, never raised
            self._failed(exc, "evict")

    def _model_called(self, namespace: str, started: float, value: Any, tokens: Any) -> Any:
        """Record a model call (latency, reported usage); returns the usage to store."""
        n = tokens(value) if callable(tokens) and is_cacheable(value) else tokens
        n = None if callable(n) else n
        try:
            usage = usage_from(n)
        except ConfigurationError:
            usage = None
        self._stats.model_call(namespace, time.perf_counter() - started, usage)
        return n

    # ------------------------------------------------------------------ degradation
    def _overloaded(self, namespace: str, decode: Callable[[Any], Any] | None = None) -> Any:
        """The namespace's fallback (a payload, decoded like a hit), or :class:`Overloaded`."""
        self._stats.incr(Count.OVERLOADED)
        gate = self.gate
        why = (
            f"no model call slot within {gate.wait} s (max_model_calls="
            f"{gate.limit}, shared_model_calls={gate.shared_limit}, "
            f"model_queue={gate.queue})"
        )
        if namespace not in self._s.fallbacks:
            raise Overloaded(f"{why} and no fallback for {namespace!r}", layer="model")
        self._stats.incr(Count.FALLBACKS)
        fallback = self._s.fallbacks[namespace]
        if decode is None:
            return fallback
        try:
            return decode(fallback)
        except Exception as exc:
            self._stats.incr(Count.DECODE_ERRORS, namespace=namespace)
            raise Overloaded(
                f"{why} and the fallback for {namespace!r} does not decode: {exc!r}",
                layer="model",
            ) from exc

    def _negative_hit(self, flight_key: str) -> tuple[bool, Any]:
        if self.negative is None:
            return False, None
        found, value = self.negative.get(flight_key)
        if found:
            self._stats.incr(Count.NEGATIVE_HITS)
        return found, value

    def _remember_negative(self, flight_key: str, payload: Any, value: Any) -> bool:
        """With ``negative_ttl``: keep an empty or refused answer (judged by its
        ``payload``) for a few seconds instead of storing it for the entry's TTL; True
        when it was one. The caller's ``value`` is what later callers get."""
        if self.negative is not None and looks_refused(payload):
            self.negative.put(flight_key, value)
            return True
        return False

    # ------------------------------------------------------------------ for the stream path
    def decoded_flow(self, plan: Plan, hit: CacheHit) -> Flow[tuple[bool, Any]]:
        """:meth:`_decoded`, a hit ``decode`` rejects evicted (then streamed as a miss)."""
        ok, value = self._decoded(plan, hit)
        if not ok:
            yield from self._evict_flow(hit)
        return ok, value

    def negative_hit(self, flight_key: str) -> tuple[bool, Any]:
        return self._negative_hit(flight_key)

    def count(self, name: str, namespace: str = "") -> None:
        """One more ``name`` in the cache's stats."""
        self._stats.incr(name, namespace=namespace)

    # ------------------------------------------------------------------ refresh-ahead
    def claim_refresh(self, hit: CacheHit, flight_key: str) -> Lease | None:
        """The lease of the one caller (in the deployment) that refreshes a hit about to
        expire, or ``None`` (not due, or someone else refreshes it)."""
        ahead = self._s.refresh_ahead
        if ahead is None or hit.expires_at is None or hit.layer == "semantic":
            return None
        left = hit.expires_at - self._s.clock()
        if not 0 < left <= ahead:
            return None
        with self._refresh_lock:
            if flight_key in self._refreshing:
                return None
            self._refreshing.add(flight_key)
        lease = Lease(
            self._b.kv, f"refresh:{flight_key}", ttl=self.flight.timeout, on_error=self._failed
        )
        if lease.acquire() is False:  # another process refreshes it
            with self._refresh_lock:
                self._refreshing.discard(flight_key)
            return None
        return lease

    def _refresh_flow(self, plan: Plan, lease: Lease) -> Flow[None]:
        try:
            with lease.renewing():
                yield from self._compute_flow(plan)
            self._stats.incr(Count.REFRESHED)
        except Exception as exc:  # a background refresh never reaches a caller
            self._stats.incr(Count.ERRORS)
            log.warning("agent-cache refresh-ahead failed: %s", exc)
        finally:
            yield from io.lease_release(lease)
            with self._refresh_lock:
                self._refreshing.discard(plan.flight_key)
