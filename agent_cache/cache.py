"""``LayeredCache``: exact → template → semantic (guards, reranker, threshold) → model.

Cheapest check first; an embedding is never computed for a request the exact layer can
answer. Request logic lives in generator "flows" (:mod:`agent_cache._flow`) shared by the
sync and async methods.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from agent_cache import _request as rq
from agent_cache._flow import Flow, Op, run_async, run_sync
from agent_cache.errors import ConfigurationError, SerializationError
from agent_cache.guards import check_guards
from agent_cache.keys import Template, digest, templates_from
from agent_cache.policy import TtlPolicy, is_cacheable
from agent_cache.protocols import (
    Embedder,
    KVStore,
    MetaValue,
    Reranker,
    VectorMatch,
    VectorStore,
)
from agent_cache.singleflight import SingleFlight
from agent_cache.stats import CacheStats, StatsRecorder

__all__ = ["DEFAULT_THRESHOLD", "CacheHit", "CachePolicy", "LayeredCache"]

log = logging.getLogger("agent_cache")

#: Cosine similarity (all-MiniLM-L6-v2) at or above which a guarded candidate is served.
#: Measured on 5,000 QQP dev pairs (docs/benchmarks.md): the lowest threshold from which
#: precision stays >= 0.85 with the guards (0.869 at hit rate 0.261); the static design
#: needs 0.95 for that precision and then hits 0.248. A wrong hit is worse than a miss:
#: calibrate your own data (``agent-cache calibrate``) before lowering it.
DEFAULT_THRESHOLD = 0.94
DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"

CachePolicy = Literal["use", "bypass", "no_store", "refresh"]
_POLICIES = ("use", "bypass", "no_store", "refresh")
_LOCK_POLL_S = 0.05
T = TypeVar("T")


@dataclass(frozen=True)
class CacheHit:
    """A served answer.

    Attributes:
        response: the stored JSON value.
        layer: ``"exact"``, ``"template"`` or ``"semantic"``.
        score: cosine similarity, or the reranker's score when one verified the hit;
            ``None`` for exact and template hits.
        matched_prompt: the stored prompt whose answer is served.
        key: the stored entry's key.
    """

    response: Any
    layer: str
    score: float | None
    matched_prompt: str
    key: str


class LayeredCache:
    """The layered result cache. See DESIGN.md for the request flow.

    Args:
        path: directory for the embedded default (SQLite exact layer + Chroma persistent
            vectors); ``None`` keeps everything in memory.
        redis_url: exact layer on Redis instead of SQLite/memory.
        chroma_url: vectors on a Chroma server, e.g. ``"http://127.0.0.1:8000"``.
        embedder: model name, local path, or an object with ``embed(texts)``.
        reranker: ``"BAAI/bge-reranker-base"``, a CrossEncoder name/path, or an object
            with ``score(query, candidates)``.
        threshold: cosine similarity in [0, 1] a candidate needs (higher is stricter);
            ``None``: :data:`DEFAULT_THRESHOLD` or the calibrated value from ``config``.
        thresholds: per-namespace thresholds.
        config: path of a JSON written by ``agent-cache calibrate``.
        shadow: run the semantic layer and record what it would serve, never serve it.
        bypass_rate: share of lookups sent straight to the model (a control group).
        max_error_rate: when the measured wrong-hit rate of a namespace (shadow
            disagreements and :meth:`feedback`) exceeds this, its threshold is raised.
        ttl_policy: TTL tiers and jitter (:class:`~agent_cache.policy.TtlPolicy`).
        templates: ``{name: pattern | [patterns]}`` parameterized prompts.
        case_sensitive: namespaces whose prompts are not case-folded (code).
        exact_only: namespaces that never use the semantic layer (tool results).
        rerank_threshold: minimum reranker score in [0, 1] when a reranker is set.
        top_k: candidates fetched from the vector store.
        clock: seconds, injectable for tests; ``sleep`` likewise for paced invalidation.
        kv_store / vector_store: backends given directly (anything with the protocols).

    Example:
        >>> cache = LayeredCache(path=None, embedder=HashEmbedder())  # doctest: +SKIP
        >>> cache.store("What is RAG?", "Retrieval-augmented generation.")
        >>> cache.lookup("what is  rag?").layer
        'exact'
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = ".agent_cache",
        *,
        redis_url: str | None = None,
        chroma_url: str | None = None,
        embedder: str | Embedder = DEFAULT_EMBEDDER,
        reranker: str | Reranker | None = None,
        threshold: float | None = None,
        thresholds: Mapping[str, float] | None = None,
        config: str | os.PathLike[str] | None = None,
        shadow: bool = False,
        bypass_rate: float = 0.0,
        max_error_rate: float | None = None,
        ttl_policy: TtlPolicy | None = None,
        templates: Mapping[str, str | Sequence[str]] | None = None,
        case_sensitive: Collection[str] = ("code",),
        exact_only: Collection[str] = ("tools", "steps"),
        rerank_threshold: float = 0.5,
        top_k: int = 5,
        max_prompt_bytes: int = rq.MAX_PROMPT_BYTES,
        singleflight_timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        kv_store: KVStore | None = None,
        vector_store: VectorStore | None = None,
        seed: int | None = None,
    ) -> None:
        file_cfg = _read_config(config) if config is not None else {}
        self.threshold = _check_threshold(
            threshold if threshold is not None else file_cfg.get("threshold", DEFAULT_THRESHOLD)
        )
        merged = dict(file_cfg.get("thresholds", {}))
        merged.update(thresholds or {})
        self.thresholds = {ns: _check_threshold(t) for ns, t in merged.items()}
        if not 0.0 <= bypass_rate <= 1.0:
            raise ConfigurationError("bypass_rate must be in [0, 1]")
        if max_error_rate is not None and not 0.0 < max_error_rate < 1.0:
            raise ConfigurationError("max_error_rate must be in (0, 1)")
        if top_k < 1:
            raise ConfigurationError("top_k must be >= 1")
        self.path = Path(path) if path is not None else None
        self.redis_url = redis_url
        self.chroma_url = chroma_url
        self.shadow = shadow
        self.bypass_rate = bypass_rate
        self.max_error_rate = max_error_rate
        self.ttl_policy = ttl_policy or TtlPolicy(seed=seed)
        self.templates: list[Template] = list(templates_from(templates))
        self.case_sensitive = frozenset(case_sensitive)
        self.exact_only = frozenset(exact_only)
        self.rerank_threshold = _check_threshold(rerank_threshold)
        self.top_k = top_k
        self.max_prompt_bytes = max_prompt_bytes
        self.clock = clock
        self.sleep = sleep
        self._embedder_spec = embedder
        self._reranker_spec = reranker
        self._kv: KVStore | None = kv_store
        self._vectors: VectorStore | None = vector_store
        self._owned: list[Any] = []
        self._embedder: Embedder | None = None
        self._reranker: Reranker | None = None
        self._reranker_ready = reranker is None
        self._init_lock = threading.Lock()
        self._rng = random.Random(seed)
        self._stats = StatsRecorder()
        self._flight = SingleFlight(singleflight_timeout)
        self._shadow_pending: OrderedDict[str, Any] = OrderedDict()
        self._judged: dict[str, list[int]] = {}  # namespace -> [judged, wrong]

    # ------------------------------------------------------------------ backends (lazy)
    @property
    def kv_store(self) -> KVStore:
        if self._kv is None:
            with self._init_lock:
                if self._kv is None:
                    self._kv = self._own(_make_kv(self.path, self.redis_url))
        return self._kv

    @property
    def vector_store(self) -> VectorStore:
        if self._vectors is None:
            with self._init_lock:
                if self._vectors is None:
                    self._vectors = self._own(_make_vectors(self.path, self.chroma_url))
        return self._vectors

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from agent_cache.embedders import embedder_from

            with self._init_lock:
                if self._embedder is None:
                    self._embedder = embedder_from(self._embedder_spec)
        return self._embedder

    @property
    def reranker(self) -> Reranker | None:
        if not self._reranker_ready:
            from agent_cache.rerankers import reranker_from

            with self._init_lock:
                if not self._reranker_ready:
                    self._reranker = reranker_from(self._reranker_spec)
                    self._reranker_ready = True
        return self._reranker

    def _own(self, backend: T) -> T:
        self._owned.append(backend)
        return backend

    # ------------------------------------------------------------------ configuration
    def threshold_for(self, namespace: str) -> float:
        """The similarity threshold in force for ``namespace``."""
        return self.thresholds.get(namespace, self.threshold)

    def add_template(self, name: str, patterns: str | Sequence[str]) -> None:
        """Register a parameterized prompt: ``add_template("order", "status of order {id}")``."""
        pats = (patterns,) if isinstance(patterns, str) else tuple(patterns)
        self.templates.append(Template(name, pats))

    def _prepare(
        self, prompt: Any, llm_string: Any, namespace: Any, context: Any, template_version: Any
    ) -> rq.Request:
        return rq.prepare(
            prompt,
            llm_string=llm_string,
            namespace=namespace,
            context=context,
            template_version=template_version,
            casefold=namespace not in self.case_sensitive,
            templates=self.templates,
            max_prompt_bytes=self.max_prompt_bytes,
        )

    def _semantic_on(self, req: rq.Request) -> bool:
        return req.template is None and req.namespace not in self.exact_only

    # ------------------------------------------------------------------ flows (pure logic)
    def _lookup_flow(self, req: rq.Request, now: float) -> Flow[tuple[CacheHit | None, str]]:
        version = yield Op(self.kv_store, "get_counter", (rq.version_counter(req.namespace),))
        keys = rq.keys_for(req, version)
        raw = yield Op(self.kv_store, "get", (keys.primary, now))
        if raw is not None:
            layer = "template" if keys.template else "exact"
            return self._hit(raw, layer, None, keys.primary), keys.exact
        if not self._semantic_on(req):
            return None, keys.exact
        vectors = yield Op(self.embedder, "embed", ([req.prompt],))
        matches: list[VectorMatch] = yield Op(
            self.vector_store,
            "query",
            (vectors[0],),
            {"k": self.top_k, "scope": keys.scope, "now": now},
        )
        threshold = self.threshold_for(req.namespace)
        passed: list[tuple[VectorMatch, float]] = []
        for m in matches:
            if m.score < threshold:
                continue
            refused = check_guards(
                req.prompt,
                str(m.metadata.get("text", "")),
                case_sensitive=req.namespace in self.case_sensitive,
            )
            if refused:
                self._stats.incr(f"refused:{refused}")
                continue
            passed.append((m, m.score))
        reranker = self.reranker if passed else None
        if reranker is not None:
            texts = [str(m.metadata.get("text", "")) for m, _ in passed]
            scores = yield Op(reranker, "score", (req.prompt, texts))
            verified = [(m, float(s)) for (m, _), s in zip(passed, scores, strict=True)]
            refused_n = sum(1 for _, s in verified if s < self.rerank_threshold)
            if refused_n:
                self._stats.incr("refused:reranker", refused_n)
            passed = sorted(
                ((m, s) for m, s in verified if s >= self.rerank_threshold),
                key=lambda ms: -ms[1],
            )
        for m, score in passed:
            key = str(m.metadata.get("key", m.id))
            raw = yield Op(self.kv_store, "get", (key, now))
            if raw is None:  # expired, evicted or invalidated: drop the stale vector
                yield Op(self.vector_store, "delete", ([m.id],))
                continue
            return self._hit(raw, "semantic", score, key), keys.exact
        return None, keys.exact

    def _hit(self, raw: str, layer: str, score: float | None, key: str) -> CacheHit:
        record = rq.decode_record(raw, key)
        tokens = record.get("t")
        saved = tokens if isinstance(tokens, int) else rq.estimate_tokens(record["r"])
        self._stats.incr("tokens_saved", saved)
        return CacheHit(record["r"], layer, score, str(record.get("p", "")), key)

    def _store_flow(
        self,
        req: rq.Request,
        response: Any,
        *,
        ttl: float | None,
        tags: Sequence[str],
        tokens: int | None,
        now: float,
    ) -> Flow[str]:
        version = yield Op(self.kv_store, "get_counter", (rq.version_counter(req.namespace),))
        keys = rq.keys_for(req, version)
        ttl_s, tier = self.ttl_policy.ttl_for(req.normalized, ttl)
        expires = self.ttl_policy.expires_at(now, ttl_s)
        record = rq.encode_record(req.prompt, response, tokens=tokens, created=now, tier=tier)
        yield Op(
            self.kv_store,
            "set",
            (keys.primary, record),
            {"namespace": req.namespace, "expires_at": expires, "tags": tuple(tags), "now": now},
        )
        if self._semantic_on(req):
            vectors = yield Op(self.embedder, "embed", ([req.prompt],))
            sem_expires = self.ttl_policy.semantic_expires_at(now, expires)
            meta = {
                "scope": keys.scope,
                "namespace": req.namespace,
                "key": keys.primary,
                "text": req.prompt[:2000],
                "expires_at": rq.NO_EXPIRY if sem_expires is None else sem_expires,
            }
            yield Op(self.vector_store, "add", ([keys.primary], vectors[:1], [meta]))
        self._judge_shadow(req.namespace, keys.exact, response)
        return keys.primary

    # ------------------------------------------------------------------ lookup
    def _begin_lookup(self, policy: str) -> bool:
        """Count the lookup; False when it must not read the cache at all."""
        if policy not in _POLICIES:
            raise ConfigurationError(f"policy must be one of {_POLICIES}, not {policy!r}")
        self._stats.incr("lookups")
        if policy in ("bypass", "refresh"):
            self._stats.incr("bypassed")
            return False
        if self.bypass_rate and self._rng.random() < self.bypass_rate:
            self._stats.incr("control")
            return False
        return True

    def _finish_lookup(
        self, outcome: tuple[CacheHit | None, str], started: float
    ) -> CacheHit | None:
        hit, query_key = outcome
        elapsed = time.perf_counter() - started
        if hit is not None and hit.layer == "semantic" and self.shadow:
            self._stats.incr("shadow:would_hit")
            self._shadow_pending[query_key] = hit.response
            while len(self._shadow_pending) > 10_000:
                self._shadow_pending.popitem(last=False)
            hit = None
        if hit is None:
            self._stats.incr("misses")
            self._stats.latency("miss", elapsed)
        else:
            self._stats.incr(f"hit:{hit.layer}")
            self._stats.latency(hit.layer, elapsed)
        return hit

    def _failed(self, exc: Exception, what: str) -> None:
        if isinstance(exc, ConfigurationError):
            raise exc
        self._stats.incr("errors")
        log.warning("agent-cache %s failed, serving as a miss: %s", what, exc, exc_info=exc)

    def lookup(
        self,
        prompt: str,
        llm_string: str = "",
        namespace: str = "default",
        *,
        context: Any = None,
        template_version: str = "",
        policy: CachePolicy = "use",
    ) -> CacheHit | None:
        """Look a prompt up: exact, then template, then semantic.

        Args:
            prompt: the question (for a chat: the last user turn).
            llm_string: model identity (name, version, sampling parameters, bound tools).
            namespace: a scope with its own threshold, version and invalidation.
            context: whatever else changes the answer (system prompt, earlier turns,
                retrieved documents): part of the exact key and an exact filter on the
                semantic search.
            template_version: bump when the prompt template changes.
            policy: ``"use"``; ``"bypass"``/``"refresh"`` skip reading.

        Returns:
            A :class:`CacheHit`, or ``None`` on a miss. A failing store is a logged miss.

        Example:
            >>> cache.lookup("What is RAG?")  # doctest: +SKIP
        """
        req = self._prepare(prompt, llm_string, namespace, context, template_version)
        if not self._begin_lookup(policy):
            return None
        started = time.perf_counter()
        try:
            outcome = run_sync(self._lookup_flow(req, self.clock()))
        except Exception as exc:  # ours (BackendError) or a backend's own exception type
            self._failed(exc, "lookup")
            outcome = None, ""
        return self._finish_lookup(outcome, started)

    async def alookup(
        self,
        prompt: str,
        llm_string: str = "",
        namespace: str = "default",
        *,
        context: Any = None,
        template_version: str = "",
        policy: CachePolicy = "use",
    ) -> CacheHit | None:
        """Async twin of :meth:`lookup`."""
        req = self._prepare(prompt, llm_string, namespace, context, template_version)
        if not self._begin_lookup(policy):
            return None
        started = time.perf_counter()
        try:
            outcome = await run_async(self._lookup_flow(req, self.clock()))
        except Exception as exc:
            self._failed(exc, "lookup")
            outcome = None, ""
        return self._finish_lookup(outcome, started)

    # ------------------------------------------------------------------ store
    def _begin_store(self, response: Any, tags: Iterable[str]) -> tuple[bool, tuple[str, ...]]:
        rq.check_json(response)  # SerializationError before anything is written
        tag_list = tuple(tags)
        if any(not isinstance(t, str) or not t for t in tag_list):
            raise ConfigurationError("tags must be non-empty strings")
        if not is_cacheable(response):
            self._stats.incr("skipped_stores")
            return False, tag_list
        return True, tag_list

    def store(
        self,
        prompt: str,
        response: Any,
        llm_string: str = "",
        namespace: str = "default",
        *,
        context: Any = None,
        template_version: str = "",
        ttl: float | None = None,
        tags: Iterable[str] = (),
        tokens: int | None = None,
    ) -> str:
        """Store a JSON-serializable answer; returns its key.

        Errors and empty answers are not stored (counted as ``skipped_stores``). ``ttl``
        overrides the policy's tiers; ``tags`` feed :meth:`invalidate`; ``tokens`` is what
        the model spent, counted as saved on every later hit.

        Raises:
            SerializationError: the response is not JSON-serializable (nothing written).
            ConfigurationError: bad prompt, namespace, ttl or tags (nothing written).
        """
        req = self._prepare(prompt, llm_string, namespace, context, template_version)
        ok, tag_list = self._begin_store(response, tags)
        if not ok:
            return rq.keys_for(req, 0).primary
        try:
            key = run_sync(
                self._store_flow(
                    req, response, ttl=ttl, tags=tag_list, tokens=tokens, now=self.clock()
                )
            )
        except (ConfigurationError, SerializationError):
            raise
        except Exception as exc:
            self._failed(exc, "store")
            return rq.keys_for(req, 0).primary
        self._stats.incr("stores")
        return key

    async def astore(
        self,
        prompt: str,
        response: Any,
        llm_string: str = "",
        namespace: str = "default",
        *,
        context: Any = None,
        template_version: str = "",
        ttl: float | None = None,
        tags: Iterable[str] = (),
        tokens: int | None = None,
    ) -> str:
        """Async twin of :meth:`store`."""
        req = self._prepare(prompt, llm_string, namespace, context, template_version)
        ok, tag_list = self._begin_store(response, tags)
        if not ok:
            return rq.keys_for(req, 0).primary
        try:
            key = await run_async(
                self._store_flow(
                    req, response, ttl=ttl, tags=tag_list, tokens=tokens, now=self.clock()
                )
            )
        except (ConfigurationError, SerializationError):
            raise
        except Exception as exc:
            self._failed(exc, "store")
            return rq.keys_for(req, 0).primary
        self._stats.incr("stores")
        return key

    def store_many(
        self,
        items: Iterable[tuple[str, Any]],
        llm_string: str = "",
        namespace: str = "default",
        *,
        ttl: float | None = None,
        tags: Iterable[str] = (),
        batch_size: int = 256,
    ) -> list[str]:
        """Bulk load ``(prompt, response)`` pairs, embedding questions in batches.

        Example:
            >>> cache.store_many([("What is RAG?", "Retrieval...")])  # doctest: +SKIP
        """
        tag_list = tuple(tags)
        pending = [
            (self._prepare(p, llm_string, namespace, None, ""), r)
            for p, r in items
            if self._begin_store(r, tag_list)[0]
        ]
        version = self.kv_store.get_counter(rq.version_counter(namespace))
        now = self.clock()
        out: list[str] = []
        for start in range(0, len(pending), batch_size):
            chunk = pending[start : start + batch_size]
            ids: list[str] = []
            texts: list[str] = []
            metas: list[dict[str, MetaValue]] = []
            for req, response in chunk:
                keys = rq.keys_for(req, version)
                ttl_s, tier = self.ttl_policy.ttl_for(req.normalized, ttl)
                expires = self.ttl_policy.expires_at(now, ttl_s)
                record = rq.encode_record(req.prompt, response, tokens=None, created=now, tier=tier)
                self.kv_store.set(
                    keys.primary,
                    record,
                    namespace=namespace,
                    expires_at=expires,
                    tags=tag_list,
                    now=now,
                )
                out.append(keys.primary)
                if self._semantic_on(req):
                    sem = self.ttl_policy.semantic_expires_at(now, expires)
                    ids.append(keys.primary)
                    texts.append(req.prompt)
                    metas.append(
                        {
                            "scope": keys.scope,
                            "namespace": namespace,
                            "key": keys.primary,
                            "text": req.prompt[:2000],
                            "expires_at": rq.NO_EXPIRY if sem is None else sem,
                        }
                    )
            if ids:
                self.vector_store.add(ids, self.embedder.embed(texts), metas)
            self._stats.incr("stores", len(chunk))
        return out

    # ------------------------------------------------------------------ single-flight
    def _flight_key(self, req: rq.Request) -> str:
        return digest(
            req.namespace, req.llm_hash, req.template_version, req.context_hash, req.normalized
        )

    def get_or_compute(
        self,
        prompt: str,
        compute: Callable[[], Any],
        llm_string: str = "",
        namespace: str = "default",
        *,
        context: Any = None,
        template_version: str = "",
        policy: CachePolicy = "use",
        ttl: float | None = None,
        tags: Iterable[str] = (),
        tokens: int | Callable[[Any], int | None] | None = None,
    ) -> Any:
        """Return the cached answer, or compute it once for all concurrent callers.

        ``compute()`` runs only on a miss; concurrent identical misses (threads) share one
        call; a waiter gives up after ``singleflight_timeout`` seconds and computes itself.
        ``tokens`` may be a function of the computed value (e.g. its usage).

        Example:
            >>> cache.get_or_compute("What is RAG?", lambda: llm("What is RAG?"))  # doctest: +SKIP
        """
        req = self._prepare(prompt, llm_string, namespace, context, template_version)
        hit = self.lookup(
            prompt,
            llm_string,
            namespace,
            context=context,
            template_version=template_version,
            policy=policy,
        )
        if hit is not None:
            return hit.response
        tag_list = tuple(tags)

        flight_key = self._flight_key(req)

        def compute_and_store() -> Any:
            started = time.perf_counter()
            value = compute()
            self._stats.latency("model", time.perf_counter() - started)
            if policy != "no_store" and is_cacheable(value):
                n = tokens(value) if callable(tokens) else tokens
                self.store(
                    prompt,
                    value,
                    llm_string,
                    namespace,
                    context=context,
                    template_version=template_version,
                    ttl=ttl,
                    tags=tag_list,
                    tokens=n,
                )
            return value

        def run() -> Any:
            lock = self._cross_process_lock(flight_key)
            if lock is None:
                return compute_and_store()
            name, token = lock
            if token is None:  # another process computes: wait for its write, then degrade
                deadline = time.monotonic() + self._flight.timeout
                while time.monotonic() < deadline:
                    time.sleep(_LOCK_POLL_S)
                    hit = self._peek(req)
                    if hit is not None:
                        self._stats.incr("coalesced")
                        return hit.response
                return compute_and_store()
            try:
                return compute_and_store()
            finally:
                self._unlock(name, token)

        value, ran = self._flight.do(flight_key, run)
        if not ran:
            self._stats.incr("coalesced")
        return value

    async def aget_or_compute(
        self,
        prompt: str,
        compute: Callable[[], Awaitable[Any]],
        llm_string: str = "",
        namespace: str = "default",
        *,
        context: Any = None,
        template_version: str = "",
        policy: CachePolicy = "use",
        ttl: float | None = None,
        tags: Iterable[str] = (),
        tokens: int | Callable[[Any], int | None] | None = None,
    ) -> Any:
        """Async twin of :meth:`get_or_compute`; ``compute`` is an async function."""
        req = self._prepare(prompt, llm_string, namespace, context, template_version)
        hit = await self.alookup(
            prompt,
            llm_string,
            namespace,
            context=context,
            template_version=template_version,
            policy=policy,
        )
        if hit is not None:
            return hit.response
        tag_list = tuple(tags)

        flight_key = self._flight_key(req)

        async def compute_and_store() -> Any:
            started = time.perf_counter()
            value = await compute()
            self._stats.latency("model", time.perf_counter() - started)
            if policy != "no_store" and is_cacheable(value):
                n = tokens(value) if callable(tokens) else tokens
                await self.astore(
                    prompt,
                    value,
                    llm_string,
                    namespace,
                    context=context,
                    template_version=template_version,
                    ttl=ttl,
                    tags=tag_list,
                    tokens=n,
                )
            return value

        async def run() -> Any:
            lock = await asyncio.to_thread(self._cross_process_lock, flight_key)
            if lock is None:
                return await compute_and_store()
            name, token = lock
            if token is None:
                deadline = time.monotonic() + self._flight.timeout
                while time.monotonic() < deadline:
                    await asyncio.sleep(_LOCK_POLL_S)
                    hit = await asyncio.to_thread(self._peek, req)
                    if hit is not None:
                        self._stats.incr("coalesced")
                        return hit.response
                return await compute_and_store()
            try:
                return await compute_and_store()
            finally:
                await asyncio.to_thread(self._unlock, name, token)

        value, ran = await self._flight.ado(flight_key, run)
        if not ran:
            self._stats.incr("coalesced")
        return value

    def _cross_process_lock(self, flight_key: str) -> tuple[str, str | None] | None:
        """Single-flight across processes on a shared store (SQLite file, Redis).

        ``None``: the store has no locks (memory), or it failed (degrade to computing).
        ``(name, token)``: we hold the lock; ``(name, None)``: another process holds it.
        """
        try_lock = getattr(self.kv_store, "try_lock", None)
        if try_lock is None:
            return None
        name = f"flight:{flight_key}"
        token = uuid.uuid4().hex
        try:
            held = try_lock(name, token, self._flight.timeout)
        except Exception as exc:
            self._failed(exc, "lock")
            return None
        return name, token if held else None

    def _unlock(self, name: str, token: str) -> None:
        try:
            self.kv_store.unlock(name, token)  # type: ignore[attr-defined]
        except Exception as exc:
            self._failed(exc, "unlock")

    def _peek(self, req: rq.Request) -> CacheHit | None:
        """The exact/template record another process may just have written (no stats)."""
        try:
            version = self.kv_store.get_counter(rq.version_counter(req.namespace))
            key = rq.keys_for(req, version).primary
            raw = self.kv_store.get(key, self.clock())
            if raw is None:
                return None
            record = rq.decode_record(raw, key)
        except Exception as exc:
            self._failed(exc, "lookup")
            return None
        return CacheHit(record["r"], "exact", None, str(record.get("p", "")), key)

    # ------------------------------------------------------------------ invalidation
    def _invalidate_flow(self, tags: Sequence[str], batch_size: int, pause: float) -> Flow[int]:
        removed = 0
        for tag in tags:
            while True:
                keys = yield Op(self.kv_store, "keys_for_tag", (tag, batch_size))
                if not keys:
                    break
                yield Op(self.vector_store, "delete", (keys,))
                removed += yield Op(self.kv_store, "delete", (keys,))
                if pause:
                    yield Op(self, "sleep", (pause,))
        return removed

    def invalidate(self, tags: Iterable[str], *, batch_size: int = 500, pause: float = 0.0) -> int:
        """Delete every entry carrying any of ``tags``, in batches of ``batch_size`` with
        ``pause`` seconds between batches (so a big purge does not stall the store).
        Returns the number of entries removed.

        Example:
            >>> cache.invalidate(tags=["doc:42"])  # doctest: +SKIP
        """
        tag_list = _check_tags(tags, batch_size)
        return run_sync(self._invalidate_flow(tag_list, batch_size, pause))

    async def ainvalidate(
        self, tags: Iterable[str], *, batch_size: int = 500, pause: float = 0.0
    ) -> int:
        """Async twin of :meth:`invalidate`."""
        tag_list = _check_tags(tags, batch_size)
        return await run_async(self._invalidate_flow(tag_list, batch_size, pause))

    def bump_version(self, namespace: str = "default") -> int:
        """Invalidate a whole namespace in O(1): every key embeds the namespace's version."""
        return self.kv_store.incr(rq.version_counter(namespace))

    async def abump_version(self, namespace: str = "default") -> int:
        return await run_async(_single(Op(self.kv_store, "incr", (rq.version_counter(namespace),))))

    def clear(self, namespace: str | None = None) -> None:
        """Remove every entry (of one namespace, or all)."""
        self.kv_store.clear(namespace)
        self.vector_store.clear(namespace)

    async def aclear(self, namespace: str | None = None) -> None:
        await run_async(_single(Op(self.kv_store, "clear", (namespace,))))
        await run_async(_single(Op(self.vector_store, "clear", (namespace,))))

    # ------------------------------------------------------------------ measurement
    def stats(self) -> CacheStats:
        """Hits per layer, misses, pass-through, latency and tokens saved."""
        return self._stats.snapshot()

    def reset_stats(self) -> None:
        self._stats.reset()

    def record_model_usage(self, prompt_tokens: int, cached_tokens: int | None) -> None:
        """Record a model call's prompt tokens and the server's cached tokens (KV layer)."""
        self._stats.incr("kv_prompt_tokens", max(0, int(prompt_tokens)))
        self._stats.incr("kv_cached_tokens", max(0, int(cached_tokens or 0)))

    def feedback(self, hit: CacheHit, correct: bool, namespace: str = "default") -> None:
        """Report whether a served semantic hit was right (drives ``max_error_rate``)."""
        if hit.layer == "semantic":
            self._judge(namespace, wrong=not correct)

    def _judge_shadow(self, namespace: str, query_key: str, response: Any) -> None:
        if query_key not in self._shadow_pending:
            return
        would = self._shadow_pending.pop(query_key)
        agree = _same_answer(would, response)
        self._stats.incr("shadow:agreed" if agree else "shadow:disagreed")
        self._judge(namespace, wrong=not agree)

    def _judge(self, namespace: str, *, wrong: bool) -> None:
        if self.max_error_rate is None:
            return
        judged = self._judged.setdefault(namespace, [0, 0])
        judged[0] += 1
        judged[1] += int(wrong)
        if judged[0] >= 20 and judged[1] / judged[0] > self.max_error_rate:
            new = min(0.995, self.threshold_for(namespace) + 0.01)
            log.warning(
                "agent-cache: wrong-hit rate %.1f%% > %.1f%% in %r; threshold raised to %.3f",
                100 * judged[1] / judged[0],
                100 * self.max_error_rate,
                namespace,
                new,
            )
            self.thresholds[namespace] = new
            self._stats.incr("threshold_raised")
            judged[0] = judged[1] = 0

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the backends this cache created (never those passed in)."""
        for backend in self._owned:
            backend.close()
        self._owned.clear()

    def __enter__(self) -> LayeredCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> LayeredCache:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def _single(op: Op) -> Flow[Any]:
    return (yield op)


def _same_answer(a: Any, b: Any) -> bool:
    def text(v: Any) -> str:
        if isinstance(v, Mapping):
            v = v.get("text", v.get("content", v))
        s = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
        return " ".join(s.split()).casefold()

    return text(a) == text(b)


def _check_threshold(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"thresholds are similarities in [0, 1], got {value!r}")
    return float(value)


def _check_tags(tags: Iterable[str], batch_size: int) -> list[str]:
    if isinstance(tags, str):
        raise ConfigurationError("tags must be a list of strings, not one string")
    tag_list = list(tags)
    if any(not isinstance(t, str) or not t for t in tag_list):
        raise ConfigurationError("tags must be non-empty strings")
    if batch_size < 1:
        raise ConfigurationError("batch_size must be >= 1")
    return tag_list


def _read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read config {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"config {path} must hold a JSON object")
    return data


def _make_kv(path: Path | None, redis_url: str | None) -> KVStore:
    if redis_url:
        from agent_cache.stores import RedisStore

        return RedisStore(redis_url)
    if path is not None:
        from agent_cache.stores import SQLiteStore

        return SQLiteStore(path / "exact.sqlite3")
    from agent_cache.stores import MemoryStore

    return MemoryStore()


def _make_vectors(path: Path | None, chroma_url: str | None) -> VectorStore:
    if chroma_url:
        from agent_cache.vectors import ChromaVectorStore

        return ChromaVectorStore(url=chroma_url)
    if path is not None:
        from agent_cache.vectors import ChromaVectorStore

        return ChromaVectorStore(path=str(path / "vectors"))
    from agent_cache.vectors import MemoryVectorStore

    return MemoryVectorStore()
