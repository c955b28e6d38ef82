"""``LayeredCache``: exact → template → semantic (difference analysis, verifier, threshold).

Cheapest check first; an embedding is never computed for a request the exact layer can
answer. Request logic lives in generator "flows" (:mod:`agent_cache._flow`) shared by the
sync and async methods.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from agent_cache import _request as rq
from agent_cache import semantic, tracing
from agent_cache._breaker import CircuitBreaker
from agent_cache._flow import Flow, Op, run_async, run_sync
from agent_cache._lease import Lease, Pause
from agent_cache.degrade import ModelGate, NegativeCache, Overloaded, looks_refused
from agent_cache.differences import analyze
from agent_cache.errorbound import ErrorBound
from agent_cache.errors import AgentCacheError, ConfigurationError, SerializationError
from agent_cache.judging import AnswerJudge, Pending
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
from agent_cache.savings import PriceTable, Usage, usage_from
from agent_cache.singleflight import SingleFlight
from agent_cache.stats import HIT, CacheStats, StatsRecorder, StatsSink

__all__ = ["DEFAULT_THRESHOLD", "CacheHit", "CachePolicy", "Explanation", "LayeredCache"]

log = logging.getLogger("agent_cache")

#: Cosine similarity (all-MiniLM-L6-v2) a candidate that passed the difference analysis
#: needs (an *equivalent* one needs only ``semantic.EQUIVALENT_FLOOR``). It is what
#: ``calibrate --target-precision 0.85`` picks on a question-disjoint half of the QQP
#: development pairs (lower 95 % bound 0.857); on the other half, never seen, it measured
#: precision 0.894 (docs/benchmarks.md, semantic section). Calibrate on your own data.
DEFAULT_THRESHOLD = 0.92
DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"

CachePolicy = Literal["use", "bypass", "no_store", "refresh"]
VectorBackend = Literal["sqlite", "memory", "chroma"]
_VECTOR_BACKENDS = ("sqlite", "memory", "chroma")
_PREFIX = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{1,198}[a-zA-Z0-9]")
_POLICIES = ("use", "bypass", "no_store", "refresh")
_LOCK_POLL_S = 0.05
_WAIT_LEASES = 12  # a waiter gives up on a live (renewing) lease holder after 12 leases
_PAUSE = Pause()
_HOUSEKEEP_EVERY = 16  # writes (per process) between two housekeeping passes
_HOUSEKEEP_BATCH = 256  # expired entries purged per pass at most
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
        namespace: the namespace it was served from (what :meth:`LayeredCache.feedback`
            evicts from and judges in).
        similarity: the cosine similarity of a semantic hit (``score`` may be the
            verifier's), ``None`` otherwise.
        expires_at: when the served entry expires (the cache's clock), ``None`` for
            never or unknown (entries written before this field existed).
        usage: the tokens the model call that produced the answer reported (what
            serving it saved), ``None`` when none were reported.
    """

    response: Any
    layer: str
    score: float | None
    matched_prompt: str
    key: str
    namespace: str = "default"
    similarity: float | None = None
    expires_at: float | None = None
    usage: Usage | None = None


@dataclass(frozen=True)
class Fetched:
    """What :meth:`LayeredCache.fetch` returns: the value and where it came from.

    Attributes:
        value: the served or computed value (what :meth:`LayeredCache.get_or_compute`
            returns).
        hit: the entry served (layer, score, usage it saved); ``None`` when the value
            was computed, by this caller or by a concurrent one.
        computed: this caller ran ``compute()`` (a miss it paid for). ``hit is None and
            not computed``: the value was coalesced from a concurrent identical miss (or
            a short-lived negative entry), which cost this caller nothing.
    """

    value: Any
    hit: CacheHit | None = None
    computed: bool = False


@dataclass(frozen=True)
class Explanation:
    """Why each candidate would be served or refused for a query (``print()`` it).

    Attributes:
        query: the question.
        namespace: where it was looked up.
        threshold: the similarity threshold in force there.
        verdicts: one :class:`~agent_cache.semantic.Verdict` per candidate, servable
            first; ``verdicts[0].outcome == "serve"`` means the cache would serve it.
    """

    query: str
    namespace: str
    threshold: float
    verdicts: tuple[semantic.Verdict, ...]

    @property
    def served(self) -> semantic.Verdict | None:
        return next((v for v in self.verdicts if v.outcome == "serve"), None)

    def __str__(self) -> str:
        lines = [f"{self.query!r} in {self.namespace!r} (threshold {self.threshold:.3f}):"]
        if not self.verdicts:
            lines.append("  no candidate in scope")
        for v in self.verdicts:
            head = f"{v.outcome}{f' ({v.reason})' if v.reason else ''}"
            lines.append(
                f"  {head}: {v.candidate.text!r} similarity {v.candidate.similarity:.3f}"
                + (f", verifier {v.verifier:.3f}" if v.verifier is not None else "")
            )
            if v.analysis is not None:
                lines += [f"      {d}" for d in v.analysis.differences]
        return "\n".join(lines)


class LayeredCache:
    """The layered result cache. See DESIGN.md for the request flow.

    Args:
        path: directory for the embedded default: one SQLite database
            (``exact.sqlite3``) holding entries and vectors, shared safely by every
            process on the machine; ``None`` keeps everything in memory.
        redis_url: exact layer on Redis instead of SQLite/memory.
        chroma_url: vectors on a Chroma server, e.g. ``"http://127.0.0.1:8000"``.
        vector_backend: ``"sqlite"`` (the default with a ``path``), ``"memory"``, or
            ``"chroma"`` (embedded Chroma in ``path/vectors``: one process only, Chroma's
            ``PersistentClient`` is not process-safe); ignored with ``chroma_url``.
        prefix: the deployment's name on shared servers: Redis keys live under
            ``"{prefix}:"`` and Chroma vectors in the collection ``prefix``, so two
            applications with different prefixes never read, clear or clean up each
            other's entries. Letters, digits, ``.``, ``_`` and ``-`` (3-200 characters).
        on_corrupt: a corrupt SQLite file (``path``): ``"raise"`` a ``BackendError``
            naming it at first use (never served as silent misses), or ``"rebuild"``:
            move it aside with a warning and start empty.
        backend_timeout: seconds a call to Redis or a Chroma server may take (connecting
            included) before it fails, and is served as a miss; ``None``: no limit.
        circuit_reset: a Redis or Chroma server that failed 3 calls in a row is not
            called for this many seconds (its calls are instant misses), then one probe
            call tells whether it is back; ``None``: no circuit breaker.
        max_model_calls: at most this many ``compute`` calls of :meth:`get_or_compute`
            at once in this process; ``shared_model_calls``: in the whole deployment
            (slots in Redis while it answers). A caller waits in a queue of at most
            ``model_queue`` for ``model_wait`` seconds, then gets its namespace's
            ``fallbacks`` answer (not stored) or an ``Overloaded`` error.
        negative_ttl: seconds during which a prompt whose answer was empty or a refusal
            gets that answer again without a model call (per process); ``None``: off.
        quotas: ``{namespace: entries}``: a namespace past its budget evicts its own
            least recently used (memory) or oldest-written (SQLite) entries, so one
            tenant's traffic never evicts another's (memory and SQLite stores).
        refresh_ahead: seconds before an entry expires during which a
            :meth:`get_or_compute` hit still serves it but starts one background
            refresh (one per key in the deployment), so a hot key never expires into a
            burst of model calls; ``None``: off.
        embedder: model name, local path, or an object with ``embed(texts)``.
        reranker: ``"BAAI/bge-reranker-base"``, a CrossEncoder name/path, or an object
            with ``score(query, candidates)``.
        threshold: cosine similarity in [0, 1] a candidate needs (higher is stricter);
            ``None``: :data:`DEFAULT_THRESHOLD` or the calibrated value from ``config``.
        thresholds: per-namespace thresholds.
        config: path of a JSON written by ``agent-cache calibrate``.
        shadow: run the semantic layer and record what it would serve, never serve it.
        bypass_rate: share of lookups sent straight to the model (a control group).
        max_error_rate: keep each namespace's wrong-hit rate under this bound: its
            threshold follows the judged evidence (feedback, shadow, audited and
            explored hits; :mod:`agent_cache.errorbound`), shared by every process.
        audit_rate: with ``max_error_rate``, the share of would-be semantic hits sent to
            the model anyway and judged against its answer (the evidence above the
            threshold).
        explore_rate: with ``max_error_rate``, the share of candidates just below the
            threshold judged the same way (the evidence that lets it come down).
        judge: ``judge(query, stored_answer, fresh_answer) -> bool`` for answers whose
            similarity is in the grey zone (e.g. your own model as a judge).
        ttl_policy: TTL tiers and jitter (:class:`~agent_cache.policy.TtlPolicy`).
        templates: ``{name: pattern | [patterns]}`` parameterized prompts.
        case_sensitive: namespaces whose prompts are not case-folded (code).
        exact_only: namespaces that never use the semantic layer (tool results).
        rerank_threshold: minimum reranker score in [0, 1] when a reranker without a
            trained combiner is set (a verifier from ``agent-cache train-verifier``
            brings its own calibrated cut).
        top_k: candidates fetched from the vector store.
        clock: seconds, injectable for tests; ``sleep`` likewise for paced invalidation.
        kv_store / vector_store: backends given directly (anything with the protocols).
        metrics: where every event also goes: a sink such as
            :class:`agent_cache.metrics.PrometheusMetrics` (or several), or ``True`` for
            Prometheus metrics in ``prometheus_client``'s default registry.
        prices: money per million tokens per model, ``{model: (input, output)}`` (or a
            :class:`~agent_cache.savings.PriceTable`): what a hit saves, in
            ``stats().cost_saved`` and ``agent_cache_cost_saved_total``. None assumed.

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
        vector_backend: VectorBackend | None = None,
        prefix: str = "agent_cache",
        on_corrupt: Literal["raise", "rebuild"] = "raise",
        backend_timeout: float | None = 2.0,
        circuit_reset: float | None = 5.0,
        max_model_calls: int | None = None,
        shared_model_calls: int | None = None,
        model_queue: int = 64,
        model_wait: float = 30.0,
        fallbacks: Mapping[str, Any] | None = None,
        negative_ttl: float | None = None,
        refresh_ahead: float | None = None,
        quotas: Mapping[str, int] | None = None,
        embedder: str | Embedder = DEFAULT_EMBEDDER,
        reranker: str | Reranker | None = None,
        threshold: float | None = None,
        thresholds: Mapping[str, float] | None = None,
        config: str | os.PathLike[str] | None = None,
        shadow: bool = False,
        bypass_rate: float = 0.0,
        max_error_rate: float | None = None,
        audit_rate: float = 0.1,
        explore_rate: float = 0.2,
        judge: Callable[[str, str, str], bool] | None = None,
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
        metrics: StatsSink | Iterable[StatsSink] | bool | None = None,
        prices: PriceTable | Mapping[str, tuple[float, float]] | None = None,
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
        for name, rate in (("audit_rate", audit_rate), ("explore_rate", explore_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ConfigurationError(f"{name} must be in [0, 1]")
        if top_k < 1:
            raise ConfigurationError("top_k must be >= 1")
        self.path = Path(path) if path is not None else None
        self.redis_url = redis_url
        self.chroma_url = chroma_url
        if vector_backend is not None and vector_backend not in _VECTOR_BACKENDS:
            raise ConfigurationError(
                f"vector_backend must be one of {_VECTOR_BACKENDS}, not {vector_backend!r}"
            )
        self.vector_backend = vector_backend
        if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
            raise ConfigurationError(
                f"prefix needs 3-200 characters from [a-zA-Z0-9._-], starting and ending "
                f"with a letter or digit; got {prefix!r}"
            )
        self.prefix = prefix
        if on_corrupt not in ("raise", "rebuild"):
            raise ConfigurationError(f"on_corrupt must be 'raise' or 'rebuild', not {on_corrupt!r}")
        self.on_corrupt = on_corrupt
        if backend_timeout is not None and (
            isinstance(backend_timeout, bool)
            or not isinstance(backend_timeout, int | float)
            or not backend_timeout > 0
        ):
            raise ConfigurationError(
                f"backend_timeout must be > 0 seconds or None, not {backend_timeout!r}"
            )
        self.backend_timeout = backend_timeout
        if circuit_reset is not None and (
            isinstance(circuit_reset, bool)
            or not isinstance(circuit_reset, int | float)
            or not circuit_reset > 0
        ):
            raise ConfigurationError(
                f"circuit_reset must be > 0 seconds or None, not {circuit_reset!r}"
            )
        self.circuit_reset = circuit_reset
        self._breakers: dict[str, CircuitBreaker] = {}
        self._writes = itertools.count(1)
        self._gate = ModelGate(
            max_model_calls,
            shared_limit=shared_model_calls,
            queue=model_queue,
            wait=model_wait,
            store=lambda: self.kv_store,
            name=f"model:{prefix}",
            on_error=self._failed,
        )
        self.fallbacks = dict(fallbacks or {})
        self._negative = NegativeCache(negative_ttl) if negative_ttl is not None else None
        if refresh_ahead is not None and not (
            isinstance(refresh_ahead, int | float) and refresh_ahead > 0
        ):
            raise ConfigurationError(f"refresh_ahead must be > 0 seconds, not {refresh_ahead!r}")
        self.refresh_ahead = refresh_ahead
        self.quotas = dict(quotas or {})
        if any(
            isinstance(q, bool) or not isinstance(q, int) or q < 1 for q in self.quotas.values()
        ):
            raise ConfigurationError(f"quotas are entry counts >= 1, got {self.quotas!r}")
        self._refreshing: set[str] = set()
        self._refresh_lock = threading.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.shadow = shadow
        self.bypass_rate = bypass_rate
        self.max_error_rate = max_error_rate
        self.audit_rate = audit_rate
        self.explore_rate = explore_rate
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
        self._init_lock = threading.RLock()  # vector_store may build kv_store
        self._rng = random.Random(seed)
        self._stats = StatsRecorder(
            prices if isinstance(prices, PriceTable) else PriceTable(prices),
            _sinks(metrics),
        )
        for sink in self._stats.sinks:
            watch = getattr(sink, "watch", None)
            if watch is not None:
                watch(self)
        self._flight = SingleFlight(singleflight_timeout)
        self._judge = AnswerJudge(judge=judge)
        # judged evidence per namespace, in the shared store; it drives the threshold
        # only with max_error_rate, but feedback is always recorded (for calibration)
        self._bound = ErrorBound(
            max_error_rate if max_error_rate is not None else 0.05,
            lambda: self.kv_store,
            base=lambda ns: self.thresholds.get(ns, self.threshold),
            clock=time.monotonic,
        )

    # ------------------------------------------------------------------ backends (lazy)
    @property
    def kv_store(self) -> KVStore:
        if self._kv is None:
            with self._init_lock:
                if self._kv is None:
                    self._kv = self._own(
                        _make_kv(
                            self.path,
                            self.redis_url,
                            self.prefix,
                            self.on_corrupt,
                            self.backend_timeout,
                            self._breaker("exact", self.redis_url),
                        )
                    )
        return self._kv

    @property
    def vector_store(self) -> VectorStore:
        if self._vectors is None:
            with self._init_lock:
                if self._vectors is None:
                    self._vectors = self._own(self._make_vectors())
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

    def _make_vectors(self) -> VectorStore:
        kind = self.vector_backend or ("sqlite" if self.path is not None else "memory")
        if self.chroma_url:
            from agent_cache.vectors import ChromaVectorStore

            return ChromaVectorStore(
                url=self.chroma_url,
                collection=self.prefix,
                timeout=self.backend_timeout,
                breaker=self._breaker("semantic", self.chroma_url),
            )
        if kind == "memory" or self.path is None:
            from agent_cache.vectors import MemoryVectorStore

            return MemoryVectorStore()
        if kind == "chroma":
            from agent_cache.vectors import ChromaVectorStore

            return ChromaVectorStore(path=str(self.path / "vectors"), collection=self.prefix)
        from agent_cache.stores import SQLiteStore
        from agent_cache.vectors import SQLiteVectorStore

        kv = self.kv_store
        if isinstance(kv, SQLiteStore):  # entries and vectors commit together
            return SQLiteVectorStore(kv)
        return SQLiteVectorStore(self.path / "vectors.sqlite3")

    def _breaker(self, layer: str, url: str | None) -> CircuitBreaker | None:
        if self.circuit_reset is None or not url:
            return None
        kind = "Redis" if layer == "exact" else "Chroma server"
        breaker = CircuitBreaker(
            f"{kind} {url}", reset_after=self.circuit_reset, layer=layer, endpoint=url
        )
        self._breakers[layer] = breaker
        return breaker

    def health(self) -> dict[str, str]:
        """The circuit state of each shared backend this cache has used:
        ``{"exact": "closed" | "open" | "half_open", "semantic": ...}`` (empty for the
        embedded default, which has no server to lose)."""
        return {layer: b.state for layer, b in self._breakers.items()}

    def _joint_vectors(self) -> bool:
        """True when the vector store lives in the KV store's database (one transaction)."""
        from agent_cache.vectors.sqlite import SQLiteVectorStore

        vs = self.vector_store
        return isinstance(vs, SQLiteVectorStore) and vs.store is self.kv_store

    def _vector_meta(
        self, req: rq.Request, keys: rq.Keys, now: float, expires: float | None
    ) -> dict[str, MetaValue]:
        sem_expires = self.ttl_policy.semantic_expires_at(now, expires)
        return {
            "scope": keys.scope,
            "namespace": req.namespace,
            "key": keys.primary,
            "text": req.prompt[:2000],
            "expires_at": rq.NO_EXPIRY if sem_expires is None else sem_expires,
        }

    def _own(self, backend: T) -> T:
        self._owned.append(backend)
        return backend

    # ------------------------------------------------------------------ configuration
    def threshold_for(self, namespace: str) -> float:
        """The similarity threshold in force for ``namespace`` (with ``max_error_rate``:
        the one the judged evidence supports)."""
        if self.max_error_rate is not None:
            try:
                return self._bound.threshold(namespace)
            except Exception as exc:  # the store failed: the configured threshold
                self._failed(exc, "error bound")
        return self.thresholds.get(namespace, self.threshold)

    def _semantic_policy(
        self, namespace: str, threshold: float | None = None
    ) -> semantic.SemanticPolicy:
        reranker = self.reranker
        return semantic.SemanticPolicy(
            threshold=self.threshold_for(namespace) if threshold is None else threshold,
            rerank_threshold=self.rerank_threshold,
            combiner=getattr(reranker, "combiner", None),
            case_sensitive=namespace in self.case_sensitive,
        )

    def add_template(self, name: str, patterns: str | Sequence[str]) -> None:
        """Register a parameterized prompt: ``add_template("order", "status of order {id}")``."""
        pats = (patterns,) if isinstance(patterns, str) else tuple(patterns)
        self.templates.append(Template(name, pats))

    def _prepare(
        self,
        prompt: Any,
        llm_string: Any,
        namespace: Any,
        context: Any,
        template_version: Any,
        verbatim: bool = False,
    ) -> rq.Request:
        return rq.prepare(
            prompt,
            llm_string=llm_string,
            namespace=namespace,
            context=context,
            template_version=template_version,
            casefold=namespace not in self.case_sensitive,
            templates=() if verbatim else self.templates,
            max_prompt_bytes=self.max_prompt_bytes,
            verbatim=verbatim,
        )

    def _semantic_on(self, req: rq.Request) -> bool:
        return req.template is None and not req.verbatim and req.namespace not in self.exact_only

    # ------------------------------------------------------------------ flows (pure logic)
    def _lookup_flow(self, req: rq.Request, now: float) -> Flow[_Outcome]:
        version = yield Op(self.kv_store, "get_counter", (rq.version_counter(req.namespace),))
        keys = rq.keys_for(req, version)
        with tracing.span("exact", namespace=req.namespace) as sp:
            raw = yield Op(self.kv_store, "get", (keys.primary, now))
            tracing.annotate(sp, outcome="miss" if raw is None else HIT)
        if raw is not None:
            layer = "template" if keys.template else "exact"
            return _Outcome(self._hit(raw, layer, None, keys.primary, req.namespace), keys.exact)
        if not self._semantic_on(req):
            return _Outcome(None, keys.exact)
        with tracing.span("semantic", namespace=req.namespace) as sp:
            outcome = yield from self._semantic_flow(req, keys, now)
            tracing.annotate(
                sp,
                outcome=HIT if outcome.hit else outcome.refused or "miss",
                score=outcome.hit.score if outcome.hit else None,
            )
        return outcome

    def _semantic_flow(self, req: rq.Request, keys: rq.Keys, now: float) -> Flow[_Outcome]:
        vectors = yield Op(self.embedder, "embed", ([req.prompt],))
        matches: list[VectorMatch] = yield Op(
            self.vector_store,
            "query",
            (vectors[0],),
            {"k": self.top_k, "scope": keys.scope, "now": now},
        )
        verdicts = yield from self._verdicts_flow(req, matches)
        refused = None
        for v in verdicts:
            if v.outcome == "refused":
                self._stats.incr(f"refused:{v.reason}", namespace=req.namespace)
                refused = refused or f"refused_{v.reason}"
        for v in verdicts:
            if v.outcome != "serve":
                break  # servable verdicts come first
            raw = yield Op(self.kv_store, "get", (v.candidate.key, now))
            if raw is None:  # expired, evicted or invalidated: drop the stale vector
                yield Op(self.vector_store, "delete", ([v.candidate.id],))
                continue
            hit = self._hit(
                raw,
                "semantic",
                v.score,
                v.candidate.key,
                req.namespace,
                similarity=v.candidate.similarity,
            )
            return _Outcome(hit, keys.exact, query=req.prompt)
        explore = yield from self._explore_flow(req, verdicts, now)
        return _Outcome(None, keys.exact, query=req.prompt, explore=explore, refused=refused)

    def _verdicts_flow(
        self, req: rq.Request, matches: Sequence[VectorMatch]
    ) -> Flow[list[semantic.Verdict]]:
        """The semantic decision (:mod:`agent_cache.semantic`) over the k-NN candidates."""
        threshold = yield Op(self, "threshold_for", (req.namespace,))
        policy = self._semantic_policy(req.namespace, threshold)
        candidates = [
            semantic.Candidate(
                m.id, str(m.metadata.get("key", m.id)), str(m.metadata.get("text", "")), m.score
            )
            for m in matches
        ]
        reranker = self.reranker
        verdicts = semantic.screen(req.prompt, candidates, policy, verifier=reranker is not None)
        pending = [v.candidate.text for v in verdicts if v.outcome == "verify"]
        scores: list[float] = []
        if pending and reranker is not None:
            with tracing.span("verify", namespace=req.namespace, candidates=len(pending)) as sp:
                scores = list((yield Op(reranker, "score", (req.prompt, pending))))
                tracing.annotate(sp, score=max(scores, default=None))
        return semantic.finish(verdicts, scores, policy)

    def _explore_flow(
        self, req: rq.Request, verdicts: Sequence[semantic.Verdict], now: float
    ) -> Flow[Pending | None]:
        """With ``max_error_rate``: now and then, keep the best candidate that just missed
        the threshold, to judge it against the model's answer (the evidence that lets
        the threshold come down)."""
        if self.max_error_rate is None or not self.explore_rate:
            return None
        best = next((v for v in verdicts if v.outcome == "below_threshold"), None)
        if best is None or best.candidate.similarity < self._bound.lowest:
            return None
        if self._rng.random() >= self.explore_rate:
            return None
        analysis = best.analysis or analyze(
            req.prompt, best.candidate.text, case_sensitive=req.namespace in self.case_sensitive
        )
        if analysis.refused:
            return None
        raw = yield Op(self.kv_store, "get", (best.candidate.key, now))
        if raw is None:
            return None
        record = rq.decode_record(raw, best.candidate.key)
        return Pending(
            req.namespace,
            req.prompt,
            best.candidate.text,
            record["r"],
            best.candidate.similarity,
            "explore",
        )

    def _hit(
        self,
        raw: str,
        layer: str,
        score: float | None,
        key: str,
        namespace: str,
        *,
        similarity: float | None = None,
    ) -> CacheHit:
        record = rq.decode_record(raw, key)
        try:
            usage = usage_from(record.get("t"))
        except ConfigurationError:  # a record another writer filled oddly: estimate
            usage = None
        expires = record.get("x")
        return CacheHit(
            record["r"],
            layer,
            score,
            str(record.get("p", "")),
            key,
            namespace,
            similarity,
            expires_at=float(expires) if isinstance(expires, int | float) else None,
            usage=usage,
        )

    def _store_flow(
        self,
        req: rq.Request,
        response: Any,
        *,
        ttl: float | None,
        tags: Sequence[str],
        tokens: int | Mapping[str, Any] | Usage | None,
        now: float,
    ) -> Flow[str]:
        version = yield Op(self.kv_store, "get_counter", (rq.version_counter(req.namespace),))
        keys = rq.keys_for(req, version)
        ttl_s, tier = self.ttl_policy.ttl_for(req.normalized, ttl)
        expires = self.ttl_policy.expires_at(now, ttl_s)
        usage = usage_from(tokens)
        record = rq.encode_record(
            req.prompt,
            response,
            tokens=usage.as_record() if usage else None,
            created=now,
            tier=tier,
            expires=expires,
        )
        embedded = self._semantic_on(req)
        joint = embedded and self._joint_vectors()
        write: dict[str, Any] = {
            "namespace": req.namespace,
            "expires_at": expires,
            "tags": tuple(tags),
            "now": now,
        }
        if joint:  # embed first: the entry and its vector are written in one transaction
            try:
                vectors = yield Op(self.embedder, "embed", ([req.prompt],))
            except Exception as exc:  # no vector: the exact entry is written all the same
                self._failed(exc, "embedding")
            else:
                write["vector"] = vectors[0]
                write["vector_meta"] = self._vector_meta(req, keys, now, expires)
        yield Op(self.kv_store, "set", (keys.primary, record), write)
        if embedded and not joint:
            vectors = yield Op(self.embedder, "embed", ([req.prompt],))
            meta = self._vector_meta(req, keys, now, expires)
            yield Op(self.vector_store, "add", ([keys.primary], vectors[:1], [meta]))
        yield from self._quota_flow(req.namespace)
        yield from self._housekeep_flow(now)
        yield from self._judge_flow(keys.exact, response)
        return keys.primary

    def _housekeep_flow(self, now: float, force: bool = False) -> Flow[None]:
        """Every ``_HOUSEKEEP_EVERY`` writes: purge up to ``_HOUSEKEEP_BATCH`` expired
        entries (their tag rows and vectors with them), and the vectors of entries the
        exact layer's LRU bound evicted, so nothing expired piles up and the vector
        count follows the exact layer's. A failure is logged, never the write's."""
        if not force and next(self._writes) % _HOUSEKEEP_EVERY:
            return
        kv, vectors = self.kv_store, self.vector_store
        joint = self._joint_vectors()
        try:
            if callable(getattr(kv, "housekeep", None)):
                keys = yield Op(kv, "housekeep", (now,), {"limit": _HOUSEKEEP_BATCH})
                if keys and not joint:
                    yield Op(vectors, "delete", (list(keys),))
            if not joint and callable(getattr(vectors, "housekeep", None)):
                yield Op(vectors, "housekeep", (now,), {"limit": _HOUSEKEEP_BATCH})
        except Exception as exc:
            self._failed(exc, "housekeeping")

    def _quota_flow(self, namespace: str) -> Flow[None]:
        """A namespace past its quota evicts its own oldest entries (and their vectors)."""
        keep = self.quotas.get(namespace)
        kv = self.kv_store
        if keep is None or not callable(getattr(kv, "evict_over", None)):
            return
        try:
            keys = yield Op(kv, "evict_over", (namespace, keep))
            if keys:
                self._stats.incr("quota_evicted", len(keys))
                if not self._joint_vectors():
                    yield Op(self.vector_store, "delete", (list(keys),))
        except Exception as exc:
            self._failed(exc, "quota")

    def housekeep(self) -> None:
        """Run one housekeeping pass now (writes run one every few calls by themselves):
        purge a bounded batch of expired entries, tag rows and vectors.

        Example:
            >>> cache.housekeep()  # doctest: +SKIP
        """
        run_sync(self._housekeep_flow(self.clock(), force=True))

    def _judge_flow(self, query_key: str, response: Any) -> Flow[None]:
        """The model answered a query whose semantic candidate we kept: judge it."""
        pending = self._judge.take(query_key)
        if pending is None:
            return
        agree = yield from self._judge.agree_flow(pending, response, self.embedder)
        self._stats.judged(pending.namespace, pending.kind, pending.similarity, agree)
        if agree is not None:
            yield Op(
                self._bound, "record", (pending.namespace, pending.similarity), {"wrong": not agree}
            )

    # ------------------------------------------------------------------ lookup
    def _begin_lookup(self, policy: str, namespace: str) -> bool:
        """Count a lookup that skips the cache; False when it must not read it at all."""
        if policy not in _POLICIES:
            raise ConfigurationError(f"policy must be one of {_POLICIES}, not {policy!r}")
        if policy in ("bypass", "refresh"):
            self._stats.request(namespace, "none", "bypass", 0.0)
            return False
        if self.bypass_rate and self._rng.random() < self.bypass_rate:
            self._stats.request(namespace, "none", "control", 0.0)
            return False
        return True

    def _finish_lookup(
        self, outcome: _Outcome, started: float, namespace: str, llm_string: str
    ) -> CacheHit | None:
        hit = outcome.hit
        elapsed = time.perf_counter() - started
        label = "error" if outcome.error else (outcome.refused or "miss")
        if hit is not None and hit.layer == "semantic":
            kind = ""
            if self.shadow:
                kind = "shadow"
                self._stats.incr("shadow:would_hit", namespace=namespace)
            elif self.max_error_rate is not None and self._rng.random() < self.audit_rate:
                kind = "audit"
                self._stats.incr("audited", namespace=namespace)
            if kind:
                self._judge.expect(
                    outcome.query_key,
                    Pending(
                        hit.namespace,
                        outcome.query,
                        hit.matched_prompt,
                        hit.response,
                        hit.similarity if hit.similarity is not None else 0.0,
                        kind,
                    ),
                )
                hit, label = None, kind
        elif hit is None and outcome.explore is not None:
            self._stats.incr("explored", namespace=namespace)
            self._judge.expect(outcome.query_key, outcome.explore)
        if hit is None:
            layer = "semantic" if label != "miss" and label != "error" else "none"
            self._stats.request(namespace, layer, label, elapsed)
        else:
            layer, label = hit.layer, HIT
            self._stats.request(namespace, layer, label, elapsed)
            self._stats.saved(namespace, llm_string, hit.usage, rq.estimate_tokens(hit.response))
        tracing.annotate(None, layer=layer, outcome=label, score=hit.score if hit else None)
        return hit

    def _failed(self, exc: Exception, what: str) -> None:
        if isinstance(exc, ConfigurationError) or getattr(exc, "fatal", False):
            raise exc  # bad input, or a corrupt file: loud, never a silent miss
        self._stats.incr("errors")
        if getattr(exc, "circuit_open", False):  # already logged once, when it opened
            self._stats.incr("circuit_open")
            log.debug("agent-cache %s skipped, serving as a miss: %s", what, exc)
            return
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
        verbatim: bool = False,
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
            verbatim: key on the prompt exactly as given (tool arguments, code): no
                Unicode, whitespace or case normalization, no template, no semantic layer.

        Returns:
            A :class:`CacheHit`, or ``None`` on a miss. A failing store is a logged miss.

        Example:
            >>> cache.lookup("What is RAG?")  # doctest: +SKIP
        """
        req = self._prepare(prompt, llm_string, namespace, context, template_version, verbatim)
        if not self._begin_lookup(policy, req.namespace):
            return None
        started = time.perf_counter()
        with tracing.span("lookup", namespace=req.namespace):
            try:
                outcome = run_sync(self._lookup_flow(req, self.clock()))
            except Exception as exc:  # ours (BackendError) or a backend's own exception type
                self._failed(exc, "lookup")
                outcome = _Outcome(None, "", error=True)
            return self._finish_lookup(outcome, started, req.namespace, llm_string)

    async def alookup(
        self,
        prompt: str,
        llm_string: str = "",
        namespace: str = "default",
        *,
        context: Any = None,
        template_version: str = "",
        policy: CachePolicy = "use",
        verbatim: bool = False,
    ) -> CacheHit | None:
        """Async twin of :meth:`lookup`."""
        req = self._prepare(prompt, llm_string, namespace, context, template_version, verbatim)
        if not self._begin_lookup(policy, req.namespace):
            return None
        started = time.perf_counter()
        with tracing.span("lookup", namespace=req.namespace):
            try:
                outcome = await run_async(self._lookup_flow(req, self.clock()))
            except Exception as exc:
                self._failed(exc, "lookup")
                outcome = _Outcome(None, "", error=True)
            return self._finish_lookup(outcome, started, req.namespace, llm_string)

    # ------------------------------------------------------------------ store
    def _begin_store(
        self, response: Any, tags: Iterable[str], ttl: Any = None, namespace: str = ""
    ) -> tuple[bool, tuple[str, ...]]:
        tag_list = rq.check_tags(tags)
        rq.check_ttl(ttl)
        rq.check_json(response)  # SerializationError before anything is written
        if not is_cacheable(response):
            self._stats.incr("skipped_stores", namespace=namespace)
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
        tokens: int | Mapping[str, Any] | Usage | None = None,
        verbatim: bool = False,
    ) -> str:
        """Store a JSON-serializable answer; returns its key.

        Errors and empty answers are not stored (counted as ``skipped_stores``). ``ttl``
        overrides the policy's tiers; ``tags`` feed :meth:`invalidate`; ``tokens`` is what
        the model spent, counted as saved on every later hit: its reported usage
        (``{"prompt_tokens": .., "completion_tokens": ..}``, LangChain's
        ``usage_metadata``, or ``{"input": .., "output": ..}``) or one int (a total);
        ``verbatim`` as in :meth:`lookup`.

        Raises:
            SerializationError: the response is not JSON-serializable (nothing written).
            ConfigurationError: bad prompt, namespace, ttl or tags (nothing written).
        """
        req = self._prepare(prompt, llm_string, namespace, context, template_version, verbatim)
        ok, tag_list = self._begin_store(response, tags, ttl, req.namespace)
        if not ok:
            return rq.keys_for(req, 0).primary
        try:
            with tracing.span("store", namespace=req.namespace):
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
        self._stats.incr("stores", namespace=req.namespace)
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
        tokens: int | Mapping[str, Any] | Usage | None = None,
        verbatim: bool = False,
    ) -> str:
        """Async twin of :meth:`store`."""
        req = self._prepare(prompt, llm_string, namespace, context, template_version, verbatim)
        ok, tag_list = self._begin_store(response, tags, ttl, req.namespace)
        if not ok:
            return rq.keys_for(req, 0).primary
        try:
            with tracing.span("store", namespace=req.namespace):
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
        self._stats.incr("stores", namespace=req.namespace)
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
        tag_list = rq.check_tags(tags)
        pending = [
            (self._prepare(p, llm_string, namespace, None, ""), r)
            for p, r in items
            if self._begin_store(r, tag_list, ttl, namespace)[0]
        ]
        version = self.kv_store.get_counter(rq.version_counter(namespace))
        now = self.clock()
        out: list[str] = []
        joint = self._joint_vectors()
        for start in range(0, len(pending), batch_size):
            chunk = pending[start : start + batch_size]
            semantic = [req for req, _ in chunk if self._semantic_on(req)]
            embedded: Iterator[Any] = iter(
                self.embedder.embed([r.prompt for r in semantic]) if semantic else []
            )
            ids: list[str] = []
            vecs: list[Any] = []
            metas: list[dict[str, MetaValue]] = []
            for req, response in chunk:
                keys = rq.keys_for(req, version)
                ttl_s, tier = self.ttl_policy.ttl_for(req.normalized, ttl)
                expires = self.ttl_policy.expires_at(now, ttl_s)
                record = rq.encode_record(
                    req.prompt, response, tokens=None, created=now, tier=tier, expires=expires
                )
                write: dict[str, Any] = {}
                if self._semantic_on(req):
                    vector, meta = next(embedded), self._vector_meta(req, keys, now, expires)
                    if joint:
                        write = {"vector": vector, "vector_meta": meta}
                    else:
                        ids.append(keys.primary)
                        vecs.append(vector)
                        metas.append(meta)
                self.kv_store.set(
                    keys.primary,
                    record,
                    namespace=namespace,
                    expires_at=expires,
                    tags=tag_list,
                    now=now,
                    **write,
                )
                out.append(keys.primary)
            if ids:
                self.vector_store.add(ids, vecs, metas)
            self._stats.incr("stores", len(chunk), namespace=namespace)
            run_sync(self._housekeep_flow(now, force=True))
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
        tokens: int | Mapping[str, Any] | Callable[[Any], Any] | None = None,
        verbatim: bool = False,
    ) -> Any:
        """Return the cached answer, or compute it once for all concurrent callers.

        ``compute()`` runs only on a miss; concurrent identical misses share one call:
        threads and tasks of this process through an in-process flight, other processes
        through a lease on the shared store (SQLite file, Redis) of
        ``singleflight_timeout`` seconds, renewed while ``compute`` runs and expiring by
        itself if its holder dies. The value computed is always returned, even when
        storing it fails (counted in ``stats().errors``). ``tokens`` may be a function
        of the computed value (e.g. its usage); ``verbatim`` as in
        :meth:`lookup`.

        Raises:
            ConfigurationError: bad prompt, ``ttl`` or ``tags``, before ``compute`` runs.

        Example:
            >>> cache.get_or_compute("What is RAG?", lambda: llm("What is RAG?"))  # doctest: +SKIP
        """
        return self.fetch(
            prompt,
            compute,
            llm_string,
            namespace,
            context=context,
            template_version=template_version,
            policy=policy,
            ttl=ttl,
            tags=tags,
            tokens=tokens,
            verbatim=verbatim,
        ).value

    def fetch(
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
        tokens: int | Mapping[str, Any] | Callable[[Any], Any] | None = None,
        verbatim: bool = False,
    ) -> Fetched:
        """:meth:`get_or_compute`, returning where the value came from as well.

        What the adapters stand on: a hit is marked (``hit.layer``, ``hit.score``) and
        reports no tokens; a computed value is the one miss the model was paid for;
        a coalesced one (``hit is None and not computed``) cost nothing either.

        Example:
            >>> got = cache.fetch("What is RAG?", lambda: llm("What is RAG?"))  # doctest: +SKIP
            >>> got.value, got.hit.layer if got.hit else "miss"  # doctest: +SKIP
        """
        req = self._prepare(prompt, llm_string, namespace, context, template_version, verbatim)
        tag_list, ttl = rq.check_tags(tags), rq.check_ttl(ttl)  # before the model is paid
        hit = self.lookup(
            prompt,
            llm_string,
            namespace,
            context=context,
            template_version=template_version,
            policy=policy,
            verbatim=verbatim,
        )
        flight_key = self._flight_key(req)

        def compute_and_store() -> Any:
            with self._gate.admit() as admitted:
                if not admitted:
                    return self._overloaded(req.namespace)
                started = time.perf_counter()
                with tracing.span("model_call", namespace=req.namespace):
                    value = compute()
            n = self._model_called(req.namespace, started, value, tokens)
            refused = self._remember_negative(flight_key, value)
            if policy != "no_store" and is_cacheable(value) and not refused:
                try:
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
                        verbatim=verbatim,
                    )
                except AgentCacheError as exc:  # the paid answer is returned all the same
                    self._store_failed(exc)
            return value

        if hit is not None:
            lease = self._claim_refresh(hit, flight_key)
            if lease is not None:
                threading.Thread(
                    target=self._refresh,
                    args=(flight_key, lease, compute_and_store),
                    name="agent-cache-refresh",
                    daemon=True,
                ).start()
            return Fetched(hit.response, hit)
        found, negative = self._negative_hit(flight_key)
        if found:
            return Fetched(negative)

        def run() -> Fetched:
            lease = self._lease(flight_key)
            hit, held = run_sync(self._contend_flow(req, lease))
            if hit is not None:
                lease.release()
                self._stats.incr("coalesced", namespace=req.namespace)
                return Fetched(hit.response, hit)
            try:
                with lease.renewing():
                    return Fetched(compute_and_store(), computed=True)
            finally:
                lease.release()

        got, ran = self._flight.do(flight_key, run)
        if not ran:
            self._stats.incr("coalesced", namespace=req.namespace)
            return Fetched(got.value, got.hit)
        return got

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
        tokens: int | Mapping[str, Any] | Callable[[Any], Any] | None = None,
        verbatim: bool = False,
    ) -> Any:
        """Async twin of :meth:`get_or_compute`; ``compute`` is an async function."""
        got = await self.afetch(
            prompt,
            compute,
            llm_string,
            namespace,
            context=context,
            template_version=template_version,
            policy=policy,
            ttl=ttl,
            tags=tags,
            tokens=tokens,
            verbatim=verbatim,
        )
        return got.value

    async def afetch(
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
        tokens: int | Mapping[str, Any] | Callable[[Any], Any] | None = None,
        verbatim: bool = False,
    ) -> Fetched:
        """Async twin of :meth:`fetch`; ``compute`` is an async function."""
        req = self._prepare(prompt, llm_string, namespace, context, template_version, verbatim)
        tag_list, ttl = rq.check_tags(tags), rq.check_ttl(ttl)
        hit = await self.alookup(
            prompt,
            llm_string,
            namespace,
            context=context,
            template_version=template_version,
            policy=policy,
            verbatim=verbatim,
        )
        flight_key = self._flight_key(req)

        async def compute_and_store() -> Any:
            async with self._gate.aadmit() as admitted:
                if not admitted:
                    return self._overloaded(req.namespace)
                started = time.perf_counter()
                with tracing.span("model_call", namespace=req.namespace):
                    value = await compute()
            n = self._model_called(req.namespace, started, value, tokens)
            refused = self._remember_negative(flight_key, value)
            if policy != "no_store" and is_cacheable(value) and not refused:
                try:
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
                        verbatim=verbatim,
                    )
                except AgentCacheError as exc:
                    self._store_failed(exc)
            return value

        if hit is not None:
            lease = await asyncio.to_thread(self._claim_refresh, hit, flight_key)
            if lease is not None:
                task = asyncio.create_task(self._arefresh(flight_key, lease, compute_and_store))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return Fetched(hit.response, hit)
        found, negative = self._negative_hit(flight_key)
        if found:
            return Fetched(negative)

        async def run() -> Fetched:
            lease = self._lease(flight_key)
            hit, held = await run_async(self._contend_flow(req, lease))
            if hit is not None:
                await asyncio.to_thread(lease.release)
                self._stats.incr("coalesced", namespace=req.namespace)
                return Fetched(hit.response, hit)
            try:
                with lease.renewing():
                    return Fetched(await compute_and_store(), computed=True)
            finally:
                await asyncio.to_thread(lease.release)

        got, ran = await self._flight.ado(flight_key, run)
        if not ran:
            self._stats.incr("coalesced", namespace=req.namespace)
            return Fetched(got.value, got.hit)
        return got

    # ------------------------------------------------------------------ degradation
    def _overloaded(self, namespace: str) -> Any:
        self._stats.incr("overloaded")
        if namespace in self.fallbacks:
            self._stats.incr("fallbacks")
            return self.fallbacks[namespace]
        raise Overloaded(
            f"no model call slot within {self._gate.wait} s (max_model_calls="
            f"{self._gate.limit}, shared_model_calls={self._gate.shared_limit}, "
            f"model_queue={self._gate.queue}) and no fallback for {namespace!r}",
            layer="model",
        )

    def _negative_hit(self, flight_key: str) -> tuple[bool, Any]:
        if self._negative is None:
            return False, None
        found, value = self._negative.get(flight_key)
        if found:
            self._stats.incr("negative_hits")
        return found, value

    def _remember_negative(self, flight_key: str, value: Any) -> bool:
        """With ``negative_ttl``: keep an empty or refused answer for a few seconds
        (instead of storing it for the entry's TTL); True when it was one."""
        if self._negative is not None and looks_refused(value):
            self._negative.put(flight_key, value)
            return True
        return False

    # ------------------------------------------------------------------ refresh-ahead
    def _claim_refresh(self, hit: CacheHit, flight_key: str) -> Lease | None:
        """The lease of the one caller (in the deployment) that refreshes a hit about to
        expire, or ``None`` (not due, or someone else refreshes it)."""
        if self.refresh_ahead is None or hit.expires_at is None or hit.layer == "semantic":
            return None
        left = hit.expires_at - self.clock()
        if not 0 < left <= self.refresh_ahead:
            return None
        with self._refresh_lock:
            if flight_key in self._refreshing:
                return None
            self._refreshing.add(flight_key)
        lease = Lease(
            self.kv_store, f"refresh:{flight_key}", ttl=self._flight.timeout, on_error=self._failed
        )
        if lease.acquire() is False:  # another process refreshes it
            with self._refresh_lock:
                self._refreshing.discard(flight_key)
            return None
        return lease

    def _refresh(self, flight_key: str, lease: Lease, compute: Callable[[], Any]) -> None:
        try:
            with lease.renewing():
                compute()
            self._stats.incr("refreshed")
        except Exception as exc:  # a background refresh never reaches a caller
            self._stats.incr("errors")
            log.warning("agent-cache refresh-ahead failed: %s", exc)
        finally:
            lease.release()
            with self._refresh_lock:
                self._refreshing.discard(flight_key)

    async def _arefresh(
        self, flight_key: str, lease: Lease, compute: Callable[[], Awaitable[Any]]
    ) -> None:
        try:
            with lease.renewing():
                await compute()
            self._stats.incr("refreshed")
        except Exception as exc:
            self._stats.incr("errors")
            log.warning("agent-cache refresh-ahead failed: %s", exc)
        finally:
            await asyncio.to_thread(lease.release)
            with self._refresh_lock:
                self._refreshing.discard(flight_key)

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

    def _lease(self, flight_key: str) -> Lease:
        return Lease(
            self.kv_store, f"flight:{flight_key}", ttl=self._flight.timeout, on_error=self._failed
        )

    def _contend_flow(self, req: rq.Request, lease: Lease) -> Flow[tuple[CacheHit | None, bool]]:
        """Single-flight across processes on a shared store (SQLite file, Redis).

        Returns ``(hit, held)``: the answer another process stored while we waited, or
        ``(None, True)`` when we hold the lease and must compute, or ``(None, False)``
        when there is no lock to take (memory store, store down: compute, degraded).
        The holder re-checks the cache after taking the lease (the previous holder may
        just have stored the answer). A waiter polls for the answer and contends for the
        lease again whenever it is free (the holder finished without storing, or crashed
        and its lease expired); only after ``_WAIT_LEASES`` lease periods does it give up
        and compute without the lock.
        """
        held = yield Op(lease, "acquire")
        deadline = time.monotonic() + _WAIT_LEASES * self._flight.timeout
        while held is False:
            yield Op(_PAUSE, "sleep", (_LOCK_POLL_S,))
            hit = yield Op(self, "_peek", (req,))
            if hit is not None:
                return hit, False
            if time.monotonic() >= deadline:
                self._stats.incr("lock_timeouts", namespace=req.namespace)
                return None, False
            held = yield Op(lease, "acquire")
        if not held:
            return None, False
        hit = yield Op(self, "_peek", (req,))
        return hit, True

    def _store_failed(self, exc: AgentCacheError) -> None:
        self._stats.incr("errors")
        log.warning("agent-cache could not store a computed answer (returned anyway): %s", exc)

    def contains(
        self,
        prompt: str,
        llm_string: str = "",
        namespace: str = "default",
        *,
        context: Any = None,
        template_version: str = "",
    ) -> bool:
        """Whether ``prompt`` has an exact entry (no embedding, no stats): what a
        resumable bulk load skips.

        Example:
            >>> cache.contains("What is RAG?")  # doctest: +SKIP
        """
        req = self._prepare(prompt, llm_string, namespace, context, template_version)
        return self._peek(req) is not None

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
        return CacheHit(record["r"], "exact", None, str(record.get("p", "")), key, req.namespace)

    # ------------------------------------------------------------------ invalidation
    def _invalidate_flow(
        self, tags: Sequence[str], namespace: str | None, batch_size: int, pause: float
    ) -> Flow[int]:
        removed = 0
        scoped = {"namespace": namespace} if namespace is not None else {}
        for tag in tags:
            while True:
                keys = yield Op(self.kv_store, "keys_for_tag", (tag, batch_size), scoped)
                if not keys:
                    break
                yield Op(self.vector_store, "delete", (keys,))
                removed += yield Op(self.kv_store, "delete", (keys,))
                if pause:
                    yield Op(self, "sleep", (pause,))
        return removed

    def invalidate(
        self,
        tags: Iterable[str],
        namespace: str = "default",
        *,
        batch_size: int = 500,
        pause: float = 0.0,
    ) -> int:
        """Delete the entries of ``namespace`` carrying any of ``tags``, in batches of
        ``batch_size`` with ``pause`` seconds between batches (so a big purge does not
        stall the store). Returns the number of entries removed.

        A namespace is a wall: no other namespace's entries are read or deleted. To purge
        a tag everywhere, call :meth:`invalidate_all_namespaces`.

        Example:
            >>> cache.invalidate(tags=["doc:42"], namespace="faq")  # doctest: +SKIP
        """
        tag_list = _check_tags(tags, batch_size)
        ns = _check_namespace(namespace)
        return run_sync(self._invalidate_flow(tag_list, ns, batch_size, pause))

    async def ainvalidate(
        self,
        tags: Iterable[str],
        namespace: str = "default",
        *,
        batch_size: int = 500,
        pause: float = 0.0,
    ) -> int:
        """Async twin of :meth:`invalidate`."""
        tag_list = _check_tags(tags, batch_size)
        ns = _check_namespace(namespace)
        return await run_async(self._invalidate_flow(tag_list, ns, batch_size, pause))

    def invalidate_all_namespaces(
        self, tags: Iterable[str], *, batch_size: int = 500, pause: float = 0.0
    ) -> int:
        """Delete the entries carrying any of ``tags`` in **every** namespace of this
        deployment (a global purge, e.g. a document deleted for every tenant).

        Example:
            >>> cache.invalidate_all_namespaces(tags=["doc:42"])  # doctest: +SKIP
        """
        tag_list = _check_tags(tags, batch_size)
        return run_sync(self._invalidate_flow(tag_list, None, batch_size, pause))

    async def ainvalidate_all_namespaces(
        self, tags: Iterable[str], *, batch_size: int = 500, pause: float = 0.0
    ) -> int:
        """Async twin of :meth:`invalidate_all_namespaces`."""
        tag_list = _check_tags(tags, batch_size)
        return await run_async(self._invalidate_flow(tag_list, None, batch_size, pause))

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
        """Hits per layer, misses, refusals, latency, tokens and money saved: in total,
        per namespace, and the control group beside the cached traffic."""
        return self._stats.snapshot()

    @property
    def recorder(self) -> StatsRecorder:
        """Where the cache records its events (add a sink with ``recorder.add_sink``)."""
        return self._stats

    def entry_counts(self) -> dict[str, int]:
        """Entries stored: ``{"exact": records, "semantic": vectors}`` (every namespace)."""
        return {"exact": self.kv_store.count(), "semantic": self.vector_store.count()}

    def reset_stats(self) -> None:
        self._stats.reset()

    def record_model_usage(self, prompt_tokens: int, cached_tokens: int | None) -> None:
        """Record a model call's prompt tokens and the server's cached tokens (KV layer)."""
        self._stats.kv_tokens(max(0, int(prompt_tokens)), max(0, int(cached_tokens or 0)))

    def feedback(self, hit: CacheHit, correct: bool, namespace: str | None = None) -> None:
        """Report whether a served hit was right.

        A wrong hit is evicted from every layer (its entry and its vector) so it is never
        served again, and every report is recorded as evidence at the hit's similarity
        (for ``max_error_rate`` and ``error_estimate``), with or without a bound set.

        Example:
            >>> hit = cache.lookup("how do I cancel my order?")  # doctest: +SKIP
            >>> cache.feedback(hit, correct=False)               # doctest: +SKIP
        """
        run_sync(self._feedback_flow(hit, correct, namespace or hit.namespace))

    async def afeedback(self, hit: CacheHit, correct: bool, namespace: str | None = None) -> None:
        """Async twin of :meth:`feedback`."""
        await run_async(self._feedback_flow(hit, correct, namespace or hit.namespace))

    def _feedback_flow(self, hit: CacheHit, correct: bool, namespace: str) -> Flow[None]:
        self._stats.incr("feedback:correct" if correct else "feedback:wrong", namespace=namespace)
        try:
            if hit.layer == "semantic" and hit.similarity is not None:
                yield Op(self._bound, "record", (namespace, hit.similarity), {"wrong": not correct})
            if not correct:
                yield Op(self.vector_store, "delete", ([hit.key],))
                yield Op(self.kv_store, "delete", ([hit.key],))
                self._stats.incr("evicted", namespace=namespace)
        except Exception as exc:  # a failing store is logged, never raised
            self._failed(exc, "feedback")

    def error_estimate(self, namespace: str = "default") -> dict[str, float | int]:
        """The judged evidence at or above ``namespace``'s threshold: ``judged``,
        ``wrong``, ``wrong_rate``, ``upper_bound`` (one-sided 95 % Wilson) and the
        ``threshold`` the evidence supports."""
        return self._bound.estimate(namespace)

    def explain(
        self,
        query: str,
        candidate: str | None = None,
        llm_string: str = "",
        namespace: str = "default",
        *,
        context: Any = None,
        template_version: str = "",
    ) -> Explanation:
        """Why the semantic layer would serve or refuse each candidate for ``query``.

        With ``candidate``, that stored question is judged (no store is read); without,
        the top-k stored questions in the query's scope are.

        Example:
            >>> print(cache.explain("How do I sort a list in descending order?",
            ...                     "How do I sort a list in ascending order?"))  # doctest: +SKIP
        """
        req = self._prepare(query, llm_string, namespace, context, template_version)
        if candidate is not None:
            vectors = self.embedder.embed([req.prompt, candidate])
            cos = float(min(1.0, max(0.0, float(np.dot(vectors[0], vectors[1])))))
            matches = [VectorMatch("candidate", cos, {"key": "", "text": candidate})]
        else:
            version = self.kv_store.get_counter(rq.version_counter(req.namespace))
            keys = rq.keys_for(req, version)
            vector = self.embedder.embed([req.prompt])[0]
            matches = self.vector_store.query(
                vector, k=self.top_k, scope=keys.scope, now=self.clock()
            )
        verdicts = run_sync(self._verdicts_flow(req, matches))
        return Explanation(
            req.prompt, req.namespace, self.threshold_for(req.namespace), tuple(verdicts)
        )

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


def _sinks(metrics: StatsSink | Iterable[StatsSink] | bool | None) -> list[StatsSink]:
    if metrics is None or metrics is False:
        return []
    if metrics is True:
        from agent_cache.metrics import PrometheusMetrics

        return [PrometheusMetrics()]
    if isinstance(metrics, StatsSink) or not isinstance(metrics, Iterable):
        return [metrics]
    return list(metrics)


def _single(op: Op) -> Flow[Any]:
    return (yield op)


@dataclass(frozen=True)
class _Outcome:
    """What a lookup flow found: the hit (or none), the query's exact key, and for the
    judging machinery the query text and an explored candidate."""

    hit: CacheHit | None
    query_key: str
    query: str = ""
    explore: Pending | None = None
    refused: str | None = None  # "refused_<reason>" of the first refused candidate
    error: bool = False  # a store failed: served as a miss


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


def _check_namespace(namespace: Any) -> str:
    if namespace is None:
        raise ConfigurationError(
            "invalidate() works inside one namespace; for a purge of every namespace "
            "call invalidate_all_namespaces()"
        )
    if not isinstance(namespace, str) or not namespace:
        raise ConfigurationError("namespace must be a non-empty str")
    return namespace


def _read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read config {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"config {path} must hold a JSON object")
    return data


def _make_kv(
    path: Path | None,
    redis_url: str | None,
    prefix: str,
    on_corrupt: Literal["raise", "rebuild"],
    timeout: float | None,
    breaker: CircuitBreaker | None = None,
) -> KVStore:
    if redis_url:
        from agent_cache.stores import RedisStore

        return RedisStore(redis_url, prefix=f"{prefix}:", timeout=timeout, breaker=breaker)
    if path is not None:
        from agent_cache.stores import SQLiteStore

        return SQLiteStore(path / "exact.sqlite3", on_corrupt=on_corrupt)
    from agent_cache.stores import MemoryStore

    return MemoryStore()
