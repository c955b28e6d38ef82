"""The front's argument handling, written once for each sync method and its async twin.

Every public method of :class:`~agent_cache.LayeredCache` starts the same way: its
per-request keyword arguments checked once (:meth:`agent_cache._request.Options.of`,
against the TypedDict of what the method takes), the request prepared once
(:func:`agent_cache._request.prepare`), then a flow handed to a driver. :class:`Calls`
builds that flow (or the :class:`~agent_cache._fetch.Plan` of a fetch or a stream), so
the sync method runs it with ``run_sync`` and its ``a``-twin with ``run_async``, each in
one line. The I/O steps are the typed helpers of :mod:`agent_cache._io`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent_cache import _io as io
from agent_cache import _request as rq
from agent_cache._backends import Backends
from agent_cache._fetch import Codec, Compute, Plan
from agent_cache._flow import Flow, run_sync
from agent_cache._hits import CacheHit, Explanation
from agent_cache._lookup import Reader
from agent_cache._settings import Settings
from agent_cache._trust import Trust
from agent_cache._write import Writer, check_invalidation_tags, check_namespace

__all__ = ["Calls"]


class Calls:
    """The bodies the front's sync/async pairs share (one cache's)."""

    def __init__(
        self, settings: Settings, backends: Backends, reader: Reader, writer: Writer, trust: Trust
    ) -> None:
        self._s = settings
        self._b = backends
        self._reader = reader
        self._writer = writer
        self._trust = trust

    def prepare(
        self,
        prompt: Any,
        llm_string: Any,
        namespace: Any,
        context: Any,
        template_version: Any,
        verbatim: bool = False,
    ) -> rq.Request:
        """The one preparation of a request (validation, normalization, template match)."""
        s = self._s
        return rq.prepare(
            prompt,
            llm_string=llm_string,
            namespace=namespace,
            context=context,
            template_version=template_version,
            casefold=namespace not in s.case_sensitive,
            templates=() if verbatim else s.templates,
            max_prompt_bytes=s.max_prompt_bytes,
            verbatim=verbatim,
        )

    def begin(
        self,
        method: str,
        accepted: Any,
        prompt: Any,
        llm_string: Any,
        namespace: Any,
        given: Mapping[str, object],
    ) -> tuple[rq.Request, rq.Options]:
        """The per-request options ``given`` checked once (a mistyped keyword is a
        ``TypeError`` naming ``LayeredCache.<method>()``), the request prepared."""
        o = rq.Options.of(accepted, method, given)
        req = self.prepare(prompt, llm_string, namespace, o.context, o.template_version, o.verbatim)
        return req, o

    def read(
        self, prompt: str, llm_string: str, namespace: str, given: Mapping[str, object]
    ) -> Flow[CacheHit | None]:
        req, opts = self.begin("lookup", rq.ReadArgs, prompt, llm_string, namespace, given)
        return self._reader.read_flow(req, opts.policy, llm_string)

    def contains(
        self, prompt: str, llm_string: str, namespace: str, given: Mapping[str, object]
    ) -> bool:
        req, _ = self.begin("contains", rq.ScopeArgs, prompt, llm_string, namespace, given)
        return self._reader.peek(req) is not None

    def store(
        self,
        prompt: str,
        response: Any,
        llm_string: str,
        namespace: str,
        given: Mapping[str, object],
    ) -> Flow[str]:
        req, o = self.begin("store", rq.StoreArgs, prompt, llm_string, namespace, given)
        return self._writer.store_flow(
            req, response, ttl=o.ttl, tags=o.tags, tokens=o.tokens, exact=o.exact
        )

    def store_many(
        self,
        items: Iterable[tuple[str, Any]],
        llm_string: str,
        namespace: str,
        ttl: float | None,
        tags: Iterable[str],
        batch_size: int,
    ) -> Flow[list[str]]:
        opts = rq.Options.of(rq.StoreArgs, "store_many", {"ttl": ttl, "tags": tags})
        reqs = [(self.prepare(p, llm_string, namespace, None, ""), r) for p, r in items]
        return self._writer.store_many_flow(
            reqs, namespace, ttl=opts.ttl, tags=opts.tags, batch_size=batch_size
        )

    def plan(
        self,
        prompt: str,
        compute: Callable[[], Any],
        llm_string: str,
        namespace: str,
        given: Mapping[str, object],
        method: str = "fetch",
    ) -> Plan:
        """The one :class:`~agent_cache._fetch.Plan` of a fetch or a stream, its
        arguments checked before the model is called."""
        req, o = self.begin(method, rq.FetchArgs, prompt, llm_string, namespace, given)
        codec = Codec(o.encode, o.decode)
        return Plan(req, Compute(compute), llm_string, o.policy, o.ttl, o.tags, o.tokens, codec)

    def stream_plan(
        self,
        prompt: str,
        start_stream: Callable[[], Any],
        llm_string: str,
        namespace: str,
        given: Mapping[str, object],
        encode: Callable[[Any], Any] | None,
        decode: Callable[[Any], Any] | None,
    ) -> Plan:
        """A stream's plan: its options with its codec, checked as :meth:`plan` checks."""
        coded = {**given, "encode": encode, "decode": decode}
        return self.plan(prompt, start_stream, llm_string, namespace, coded, "fetch_stream")

    def invalidate(
        self, tags: Iterable[str], namespace: str, batch_size: int, pause: float
    ) -> Flow[int]:
        return self.invalidate_in(tags, check_namespace(namespace), batch_size, pause)

    def invalidate_in(
        self, tags: Iterable[str], namespace: str | None, batch_size: int, pause: float
    ) -> Flow[int]:
        """The entries of ``namespace`` (``None``: of every namespace) tagged ``tags``."""
        tag_list = check_invalidation_tags(tags, batch_size)
        return self._writer.invalidate_flow(tag_list, namespace, batch_size, pause)

    def bump(self, namespace: str) -> Flow[int]:
        ns = rq.check_name(namespace)
        version = yield from io.kv_incr(self._b.kv, rq.version_counter(ns))
        self._reader.saw_version(ns, version)  # this cache's next reads and writes key on it
        return version

    def clear(self, namespace: str | None) -> Flow[Any]:
        ns = rq.check_name(namespace, allow_none=True)
        return _ops(io.kv_clear(self._b.kv, ns), io.vector_clear(self._b.vectors, ns))

    def feedback(self, hit: CacheHit, correct: bool, namespace: str | None) -> Flow[None]:
        ns = rq.check_name(hit.namespace if namespace is None else namespace)
        return self._trust.feedback_flow(hit, correct, ns)

    def explain(
        self,
        query: str,
        candidate: str | None,
        llm_string: str,
        namespace: str,
        given: Mapping[str, object],
    ) -> Explanation:
        req, opts = self.begin("explain", rq.ScopeArgs, query, llm_string, namespace, given)
        verdicts = run_sync(self._reader.explain_flow(req, candidate))
        threshold = self._trust.threshold_for(req.namespace)
        earlier = self.earlier_layer(req, candidate, llm_string, opts)
        return Explanation(req.prompt, req.namespace, threshold, tuple(verdicts), earlier)

    def earlier_layer(
        self, req: rq.Request, candidate: str | None, llm_string: str, opts: rq.Options
    ) -> str | None:
        """``"exact"`` or ``"template"`` when that layer answers before the semantic one:
        for a ``candidate``, when both normalize to one key; else when the store holds
        an entry under the query's key."""
        if candidate is not None:
            other = self.prepare(
                candidate, llm_string, req.namespace, opts.context, opts.template_version
            )
            if other.normalized == req.normalized:
                return "exact"
            if req.template is not None and other.template == req.template:
                return "template"
            return None
        kv = self._b.kv
        version = kv.get_counter(rq.version_counter(req.namespace))
        keys, now = rq.keys_for(req, version), self._s.clock()
        if kv.get(keys.exact, now) is not None:
            return "exact"
        if keys.template is not None and kv.get(keys.template, now) is not None:
            return "template"
        return None


def _ops(*flows: Flow[Any]) -> Flow[Any]:
    """``flows`` one after the other; returns the last one's result."""
    result = None
    for flow in flows:
        result = yield from flow
    return result
