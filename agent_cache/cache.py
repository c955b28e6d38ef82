"""``LayeredCache``: exact → template → semantic (difference analysis, verifier, threshold).

The class is a thin front: it validates its arguments, prepares each request once
(:func:`agent_cache._request.prepare`) and hands it to the pipeline, whose parts each
live in a module of their own:

- :mod:`agent_cache._backends`: the backend factory (stores, embedder, reranker, breakers);
- :mod:`agent_cache._lookup`: exact and template keys, then candidate selection and
  verification in the semantic layer (:mod:`agent_cache.semantic` decides);
- :mod:`agent_cache._write`: stores, bulk loads, quotas, housekeeping, invalidation;
- :mod:`agent_cache._trust`: shadow mode, audits, exploration, feedback, the error bound;
- :mod:`agent_cache._fetch`: ``get_or_compute``: single-flight in the process and across
  processes (:mod:`agent_cache._lease`), the model gate, negative entries, refresh-ahead.

Each request's logic is written once, as a generator "flow" (:mod:`agent_cache._flow`);
every sync method runs it with ``run_sync`` and its ``a``-twin with ``run_async``.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal, Unpack

from agent_cache import _io as io
from agent_cache import _request as rq
from agent_cache._backends import Backends, VectorBackend, report_failure
from agent_cache._fetch import Codec, Compute, Fetcher, Plan
from agent_cache._flow import Flow, run_async, run_sync
from agent_cache._hits import CacheHit, Explanation, Fetched
from agent_cache._lookup import Reader
from agent_cache._settings import Setting, Settings, args_for, sinks_from
from agent_cache._stream import AStreamed, Streamed, Streams
from agent_cache._trust import Trust
from agent_cache._write import Writer, check_invalidation_tags, check_namespace
from agent_cache.degrade import ModelGate, NegativeCache
from agent_cache.keys import Template
from agent_cache.policy import TtlPolicy
from agent_cache.protocols import Embedder, KVStore, Reranker, VectorStore
from agent_cache.savings import PriceTable
from agent_cache.stats import CacheStats, StatsRecorder, StatsSink

__all__ = ["DEFAULT_THRESHOLD", "CacheHit", "CachePolicy", "Explanation", "Fetched", "LayeredCache"]

#: Cosine similarity (all-MiniLM-L6-v2) a candidate that passed the difference analysis
#: needs (an *equivalent* one needs only ``semantic.EQUIVALENT_FLOOR``). It is what
#: ``calibrate --target-precision 0.85`` picks on a question-disjoint half of the QQP
#: development pairs (lower 95 % bound 0.857); on the other half, never seen, it measured
#: precision 0.894 (docs/benchmarks.md, semantic section). Calibrate on your own data.
DEFAULT_THRESHOLD = 0.92
DEFAULT_EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"

CachePolicy = rq.CachePolicy


class LayeredCache:
    """The layered result cache (the request flow: ``docs/architecture.md``).

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
            least recently used (memory) or oldest-written (SQLite, Redis) entries, so
            one tenant's traffic never evicts another's.
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
        request_judge: your model (a callable ``prompt -> str``, a LangChain model, a
            LlamaIndex LLM, a ``VllmRouter``, or an :class:`agent_cache.judge.Judge`),
            asked "do these two requests ask for the same answer?" when the best
            candidate is close but not servable (a cosine just below the threshold, or
            an unexplained word substitution); off (``None``) by default.
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
            ``stats().cost_saved`` and ``agent_cache_cost_saved_usd_total``. None assumed.

    Example:
        >>> from agent_cache.testing import HashEmbedder
        >>> cache = LayeredCache(path=None, embedder=HashEmbedder())
        >>> key = cache.store("What is RAG?", "Retrieval-augmented generation.", tags=["doc:1"])
        >>> cache.lookup("what is  rag?").layer
        'exact'
        >>> cache.get_or_compute("What is RAG?", lambda: "never called")
        'Retrieval-augmented generation.'
        >>> cache.invalidate(tags=["doc:1"]), cache.lookup("What is RAG?")
        (1, None)
        >>> cache.lookup("What is RAG?", ttl=60)
        Traceback (most recent call last):
        ...
        TypeError: LayeredCache.lookup() got an unexpected keyword argument 'ttl'
    """

    # the settings every part of the pipeline reads at call time (agent_cache._settings)
    threshold: Setting[float] = Setting()
    thresholds: Setting[dict[str, float]] = Setting()
    shadow: Setting[bool] = Setting()
    bypass_rate: Setting[float] = Setting()
    max_error_rate: Setting[float | None] = Setting()
    audit_rate: Setting[float] = Setting()
    explore_rate: Setting[float] = Setting()
    rerank_threshold: Setting[float] = Setting()
    top_k: Setting[int] = Setting()
    case_sensitive: Setting[frozenset[str]] = Setting()
    exact_only: Setting[frozenset[str]] = Setting()
    templates: Setting[list[Template]] = Setting()
    max_prompt_bytes: Setting[int] = Setting()
    ttl_policy: Setting[TtlPolicy] = Setting()
    quotas: Setting[dict[str, int]] = Setting()
    fallbacks: Setting[dict[str, Any]] = Setting()
    refresh_ahead: Setting[float | None] = Setting()
    clock: Setting[Callable[[], float]] = Setting()
    sleep: Setting[Callable[[float], None]] = Setting()

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
        request_judge: Any = None,
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
        args = {name: value for name, value in locals().items() if name != "self"}
        self._settings = Settings.from_args(args, default=DEFAULT_THRESHOLD)
        self._backends = b = Backends(**args_for(Backends, args))
        b.on_error = self._failed  # background vector batches that fail, counted
        self.path, self.redis_url, self.chroma_url = b.path, b.redis_url, b.chroma_url
        self.vector_backend, self.prefix, self.on_corrupt = b.vector_backend, prefix, on_corrupt
        self.backend_timeout, self.circuit_reset = b.backend_timeout, b.circuit_reset
        gate = ModelGate(
            max_model_calls,
            shared_limit=shared_model_calls,
            queue=model_queue,
            wait=model_wait,
            store=lambda: b.kv,
            name=f"model:{prefix}",
            on_error=self._failed,
        )
        self._negative = NegativeCache(negative_ttl) if negative_ttl is not None else None
        self._stats = StatsRecorder(
            prices if isinstance(prices, PriceTable) else PriceTable(prices), sinks_from(metrics)
        )
        for sink in self._stats.sinks:
            watch = getattr(sink, "watch", None)
            if watch is not None:
                watch(self)
        rng = random.Random(seed)
        s, stats, failed = self._settings, self._stats, self._failed
        self._trust = Trust(s, b, stats, rng=rng, failed=failed, judge=judge)
        self._bound = self._trust.bound
        from agent_cache.judge import judge_from

        self.request_judge = judge_from(request_judge)
        self._reader = Reader(
            s, b, self._trust, stats, rng=rng, failed=failed, judge=self.request_judge
        )
        self._writer = Writer(s, b, self._reader, self._trust, stats, failed=failed)
        self._fetcher = Fetcher(
            s,
            b,
            self._reader,
            self._writer,
            stats,
            gate=gate,
            negative=self._negative,
            timeout=singleflight_timeout,
            failed=failed,
        )
        self._streams = Streams(self._reader, self._fetcher)

    # ------------------------------------------------------------------ backends (lazy)
    @property
    def kv_store(self) -> KVStore:
        return self._backends.kv

    @property
    def vector_store(self) -> VectorStore:
        return self._backends.vectors

    @property
    def embedder(self) -> Embedder:
        return self._backends.embedder

    @property
    def reranker(self) -> Reranker | None:
        return self._backends.reranker

    def health(self) -> dict[str, str]:
        """The circuit state of each shared backend this cache has used:
        ``{"exact": "closed" | "open" | "half_open", "semantic": ...}`` (empty for the
        embedded default, which has no server to lose)."""
        return self._backends.health()

    def _failed(self, exc: Exception, what: str) -> None:
        report_failure(self._stats, exc, what)

    # ------------------------------------------------------------------ configuration
    def threshold_for(self, namespace: str) -> float:
        """The similarity threshold in force for ``namespace`` (with ``max_error_rate``:
        the one the judged evidence supports)."""
        return self._trust.threshold_for(rq.check_name(namespace))

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
        """The one preparation of a request (validation, normalization, template match)."""
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

    def _begin(
        self,
        method: str,
        accepted: Any,
        prompt: Any,
        llm_string: Any,
        namespace: Any,
        given: Mapping[str, object],
    ) -> tuple[rq.Request, rq.Options]:
        """What every sync method and its async twin start with: the per-request options
        ``given`` checked once (:meth:`agent_cache._request.Options.of`), the request
        prepared."""
        o = rq.Options.of(accepted, method, given)
        req = self._prepare(
            prompt, llm_string, namespace, o.context, o.template_version, o.verbatim
        )
        return req, o

    # ------------------------------------------------------------------ lookup
    def lookup(
        self,
        prompt: str,
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.ReadArgs],
    ) -> CacheHit | None:
        """Look a prompt up: exact, then template, then semantic.

        Args:
            prompt: the question (for a chat: the last user turn).
            llm_string: model identity (name, version, sampling parameters, bound tools).
            namespace: a scope with its own threshold, version and invalidation.
            context: whatever else changes the answer (system prompt, earlier turns,
                retrieved documents): part of the exact key and an exact filter on the
                semantic search.
            template_version: bump when the prompt template changes (default ``""``).
            policy: ``"use"`` (default); ``"bypass"``/``"refresh"`` skip reading.
            verbatim: key on the prompt exactly as given (tool arguments, code): no
                Unicode, whitespace or case normalization, no template, no semantic layer.

        Returns:
            A :class:`CacheHit`, or ``None`` on a miss. A failing store is a logged miss.
        """
        return run_sync(self._read(prompt, llm_string, namespace, options))

    async def alookup(
        self,
        prompt: str,
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.ReadArgs],
    ) -> CacheHit | None:
        """Async twin of :meth:`lookup`."""
        return await run_async(self._read(prompt, llm_string, namespace, options))

    def _read(
        self, prompt: str, llm_string: str, namespace: str, given: Mapping[str, object]
    ) -> Flow[CacheHit | None]:
        req, opts = self._begin("lookup", rq.ReadArgs, prompt, llm_string, namespace, given)
        return self._reader.read_flow(req, opts.policy, llm_string)

    def contains(
        self,
        prompt: str,
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.ScopeArgs],
    ) -> bool:
        """Whether ``prompt`` has an exact entry (no embedding, no stats): what a
        resumable bulk load skips."""
        req, _ = self._begin("contains", rq.ScopeArgs, prompt, llm_string, namespace, options)
        return self._reader.peek(req) is not None

    # ------------------------------------------------------------------ store
    def store(
        self,
        prompt: str,
        response: Any,
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.StoreArgs],
    ) -> str:
        """Store a JSON-serializable answer; returns its key.

        Errors and empty answers are not stored (counted as ``skipped_stores``). ``ttl``
        overrides the policy's tiers; ``tags`` feed :meth:`invalidate`; ``tokens`` is what
        the model spent, counted as saved on every later hit: its reported usage
        (``{"prompt_tokens": .., "completion_tokens": ..}``, LangChain's
        ``usage_metadata``, or ``{"input": .., "output": ..}``) or one int (a total);
        ``context``, ``template_version`` and ``verbatim`` as in :meth:`lookup`.

        A response that would read back as something else is refused (``exact``, the
        default): a tuple (read back as a list), a non-``str`` mapping key (``{1: "a"}``
        reads back ``{"1": "a"}``), a subclass of ``str``/``int``/``float``/``dict``/
        ``list`` (an ``IntEnum`` reads back an ``int``). ``exact=False`` is for a codec's
        payload whose decoder restores the value (JSON then normalizes those to plain
        types).

        Raises:
            SerializationError: the response is not JSON-serializable, or would not
                read back equal with equal types (nothing written).
            ConfigurationError: bad prompt, namespace, ttl or tags (nothing written).
        """
        return run_sync(self._store(prompt, response, llm_string, namespace, options))

    async def astore(
        self,
        prompt: str,
        response: Any,
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.StoreArgs],
    ) -> str:
        """Async twin of :meth:`store`."""
        return await run_async(self._store(prompt, response, llm_string, namespace, options))

    def _store(
        self,
        prompt: str,
        response: Any,
        llm_string: str,
        namespace: str,
        given: Mapping[str, object],
    ) -> Flow[str]:
        req, o = self._begin("store", rq.StoreArgs, prompt, llm_string, namespace, given)
        return self._writer.store_flow(
            req, response, ttl=o.ttl, tags=o.tags, tokens=o.tokens, exact=o.exact
        )

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

        Each pair is stored as :meth:`store` would store it (quota, housekeeping, the
        judging of a withheld semantic candidate included).
        """
        opts = rq.Options.of(rq.StoreArgs, "store_many", {"ttl": ttl, "tags": tags})
        reqs = [(self._prepare(p, llm_string, namespace, None, ""), r) for p, r in items]
        flow = self._writer.store_many_flow(
            reqs, namespace, ttl=opts.ttl, tags=opts.tags, batch_size=batch_size
        )
        return run_sync(flow)

    # ------------------------------------------------------------------ get or compute
    def get_or_compute(
        self,
        prompt: str,
        compute: Callable[[], Any],
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.FetchArgs],
    ) -> Any:
        """Return the cached answer, or compute it once for all concurrent callers:
        ``fetch(...).value``.

        ``compute()`` runs only on a miss; concurrent identical misses share one call:
        threads and tasks of this process through an in-process flight, other processes
        through a lease on the shared store (SQLite file, Redis) of
        ``singleflight_timeout`` seconds, renewed while ``compute`` runs and expiring by
        itself if its holder dies. The value computed is always returned, even when
        storing it fails (counted in ``stats().errors``). ``ttl``, ``tags``,
        ``context``, ``template_version`` and ``verbatim`` as in :meth:`store`;
        ``tokens`` may also be a function of the computed value (e.g. its usage).
        ``policy``: ``"use"``; ``"refresh"`` calls the model and overwrites;
        ``"no_store"`` reads but never writes; ``"bypass"`` neither reads nor writes
        (the request goes to the model as if there were no cache).

        ``encode``/``decode`` put a codec between the caller's objects and the stored
        JSON (what the framework adapters stand on): on a miss the computed value is
        returned as is and ``encode(value)`` is the payload stored, or
        :data:`agent_cache.NOT_STORED` to return it without storing it (counted in
        ``stats().counters["not_stored"]``); an ``encode`` that raises is counted
        (``encode_errors``) and the value still returned. On a hit ``decode(payload)``
        rebuilds the object; a ``decode`` that raises marks an incompatible entry, which
        is counted (``decode_errors``), evicted and computed again, never raised.
        Concurrent identical misses all get the leader's value, not its payload.

        Raises:
            ConfigurationError: bad prompt, ``ttl``, ``tags``, ``encode`` or ``decode``,
                before ``compute`` runs.
        """
        return self.fetch(prompt, compute, llm_string, namespace, **options).value

    async def aget_or_compute(
        self,
        prompt: str,
        compute: Callable[[], Awaitable[Any]],
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.FetchArgs],
    ) -> Any:
        """Async twin of :meth:`get_or_compute`; ``compute`` is an async function."""
        return (await self.afetch(prompt, compute, llm_string, namespace, **options)).value

    def fetch(
        self,
        prompt: str,
        compute: Callable[[], Any],
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.FetchArgs],
    ) -> Fetched:
        """:meth:`get_or_compute`, returning where the value came from as well.

        What the adapters stand on: a hit is marked (``hit.layer``, ``hit.score``) and
        reports no tokens; a computed value is the one miss the model was paid for;
        a coalesced one (``hit is None and not computed``) cost nothing either. With
        ``encode``/``decode`` (as in :meth:`get_or_compute`) ``value`` is the caller's
        object and ``hit.response`` the stored payload it was decoded from.
        """
        plan = self._plan("fetch", rq.FetchArgs, prompt, compute, llm_string, namespace, options)
        return run_sync(self._fetcher.fetch_flow(plan))

    async def afetch(
        self,
        prompt: str,
        compute: Callable[[], Awaitable[Any]],
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.FetchArgs],
    ) -> Fetched:
        """Async twin of :meth:`fetch`; ``compute`` is an async function."""
        plan = self._plan("fetch", rq.FetchArgs, prompt, compute, llm_string, namespace, options)
        return await run_async(self._fetcher.fetch_flow(plan))

    def _plan(
        self,
        method: str,
        accepted: Any,
        prompt: str,
        compute: Callable[[], Any],
        llm_string: str,
        namespace: str,
        given: Mapping[str, object],
    ) -> Plan:
        """The one :class:`~agent_cache._fetch.Plan` of a fetch or a stream (its
        arguments already checked by :meth:`_begin`)."""
        req, o = self._begin(method, accepted, prompt, llm_string, namespace, given)
        codec = Codec(o.encode, o.decode)
        return Plan(req, Compute(compute), llm_string, o.policy, o.ttl, o.tags, o.tokens, codec)

    # ------------------------------------------------------------------ streams
    def fetch_stream(
        self,
        prompt: str,
        start_stream: Callable[[], Iterable[Any]],
        llm_string: str = "",
        namespace: str = "default",
        *,
        join: Callable[[list[Any]], Any],
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
        **options: Unpack[rq.StreamArgs],
    ) -> Streamed[Any]:
        """:meth:`fetch` for a streamed answer: one model stream for all concurrent
        identical misses of this process, recorded and stored once it has ended.

        A hit (``got.served``; ``got.hit``) iterates nothing: replay ``got.value``. On a
        miss, iterate the chunks: one caller's ``start_stream()`` runs, every concurrent
        identical request yields the same chunks live (``got.coalesced``: it cost
        nothing). When the stream ends normally ``join(chunks)`` is the JSON value stored
        (``None``: not stored), as :meth:`fetch` stores (policy, ``ttl``, ``tags``,
        ``tokens`` as a function of the joined value); a stream that fails or that every
        reader abandons stores nothing. Details in :mod:`agent_cache._stream`.

        With ``encode``/``decode`` (as in :meth:`get_or_compute`), ``join(chunks)`` is the
        caller's object: ``encode(value)`` is the JSON payload stored (or
        :data:`~agent_cache.NOT_STORED`), and a hit's ``got.value`` is
        ``decode(hit.response)``. A payload ``decode`` raises on is an unreadable entry:
        evicted, and the request streams from the model as a miss, stored anew.

        Raises:
            ConfigurationError: bad prompt, ``ttl`` or ``tags``, before the model is called.
        """
        args = (prompt, start_stream, llm_string, namespace, self._coded(options, encode, decode))
        plan = self._plan("fetch_stream", rq.FetchArgs, *args)
        return self._streams.fetch(plan, start_stream, join)

    async def afetch_stream(
        self,
        prompt: str,
        start_stream: Callable[[], Any],
        llm_string: str = "",
        namespace: str = "default",
        *,
        join: Callable[[list[Any]], Any],
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
        **options: Unpack[rq.StreamArgs],
    ) -> AStreamed[Any]:
        """Async twin of :meth:`fetch_stream`: ``start_stream()`` returns an async
        iterator (or an awaitable of one); iterate the result with ``async for``."""
        args = (prompt, start_stream, llm_string, namespace, self._coded(options, encode, decode))
        plan = self._plan("fetch_stream", rq.FetchArgs, *args)
        return await self._streams.afetch(plan, start_stream, join)

    @staticmethod
    def _coded(
        options: Mapping[str, object],
        encode: Callable[[Any], Any] | None,
        decode: Callable[[Any], Any] | None,
    ) -> dict[str, object]:
        """A stream's options with its codec (checked as :meth:`fetch`'s are)."""
        return {**options, "encode": encode, "decode": decode}

    # ------------------------------------------------------------------ invalidation
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
        """
        return run_sync(self._invalidate(tags, check_namespace(namespace), batch_size, pause))

    async def ainvalidate(
        self,
        tags: Iterable[str],
        namespace: str = "default",
        *,
        batch_size: int = 500,
        pause: float = 0.0,
    ) -> int:
        """Async twin of :meth:`invalidate`."""
        ns = check_namespace(namespace)
        return await run_async(self._invalidate(tags, ns, batch_size, pause))

    def invalidate_all_namespaces(
        self, tags: Iterable[str], *, batch_size: int = 500, pause: float = 0.0
    ) -> int:
        """Delete the entries carrying any of ``tags`` in **every** namespace of this
        deployment (a global purge, e.g. a document deleted for every tenant)."""
        return run_sync(self._invalidate(tags, None, batch_size, pause))

    async def ainvalidate_all_namespaces(
        self, tags: Iterable[str], *, batch_size: int = 500, pause: float = 0.0
    ) -> int:
        """Async twin of :meth:`invalidate_all_namespaces`."""
        return await run_async(self._invalidate(tags, None, batch_size, pause))

    def _invalidate(
        self, tags: Iterable[str], namespace: str | None, batch_size: int, pause: float
    ) -> Flow[int]:
        tag_list = check_invalidation_tags(tags, batch_size)
        return self._writer.invalidate_flow(tag_list, namespace, batch_size, pause)

    def bump_version(self, namespace: str = "default") -> int:
        """Invalidate a whole namespace in O(1): every key embeds the namespace's version."""
        return run_sync(self._bump(namespace))

    async def abump_version(self, namespace: str = "default") -> int:
        """Async twin of :meth:`bump_version`."""
        return await run_async(self._bump(namespace))

    def _bump(self, namespace: str) -> Flow[int]:
        return _ops(io.kv_incr(self.kv_store, rq.version_counter(rq.check_name(namespace))))

    def clear(self, namespace: str | None = None) -> None:
        """Remove every entry (of one namespace, or all: ``None``). A namespace that is
        not a non-empty str is a ConfigurationError (nothing is deleted)."""
        run_sync(self._clear(namespace))

    async def aclear(self, namespace: str | None = None) -> None:
        """Async twin of :meth:`clear`."""
        await run_async(self._clear(namespace))

    def _clear(self, namespace: str | None) -> Flow[Any]:
        ns = rq.check_name(namespace, allow_none=True)
        return _ops(io.kv_clear(self.kv_store, ns), io.vector_clear(self.vector_store, ns))

    def housekeep(self) -> None:
        """Run one housekeeping pass now (writes run one every few calls by themselves):
        purge a bounded batch of expired entries, tag rows and vectors."""
        run_sync(self._writer.housekeep_flow(self.clock(), force=True))

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
            >>> from agent_cache.testing import HashEmbedder
            >>> cache = LayeredCache(path=None, embedder=HashEmbedder())
            >>> key = cache.store("how do I cancel my order?", "Orders > Cancel.")
            >>> hit = cache.lookup("How do I cancel my order?")
            >>> cache.feedback(hit, correct=False)  # evicted: never served again
            >>> cache.lookup("How do I cancel my order?") is None
            True
        """
        ns = rq.check_name(hit.namespace if namespace is None else namespace)
        run_sync(self._trust.feedback_flow(hit, correct, ns))

    async def afeedback(self, hit: CacheHit, correct: bool, namespace: str | None = None) -> None:
        """Async twin of :meth:`feedback`."""
        ns = rq.check_name(hit.namespace if namespace is None else namespace)
        await run_async(self._trust.feedback_flow(hit, correct, ns))

    def error_estimate(self, namespace: str = "default") -> dict[str, float | int]:
        """The judged evidence at or above ``namespace``'s threshold: ``judged``,
        ``wrong``, ``wrong_rate``, ``upper_bound`` (one-sided 95 % Wilson) and the
        ``threshold`` the evidence supports."""
        return self._bound.estimate(rq.check_name(namespace))

    def explain(
        self,
        query: str,
        candidate: str | None = None,
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.ScopeArgs],
    ) -> Explanation:
        """Why the semantic layer would serve or refuse each candidate for ``query``.

        With ``candidate``, that stored question is judged (no store is read); without,
        the top-k stored questions in the query's scope are.
        """
        req, opts = self._begin("explain", rq.ScopeArgs, query, llm_string, namespace, options)
        verdicts = run_sync(self._reader.explain_flow(req, candidate))
        threshold = self.threshold_for(req.namespace)
        earlier = self._earlier_layer(req, candidate, llm_string, opts)
        return Explanation(req.prompt, req.namespace, threshold, tuple(verdicts), earlier)

    def _earlier_layer(
        self, req: rq.Request, candidate: str | None, llm_string: str, opts: rq.Options
    ) -> str | None:
        """``"exact"`` or ``"template"`` when that layer answers before the semantic one:
        for a ``candidate``, when both normalize to one key; else when the store holds
        an entry under the query's key."""
        if candidate is not None:
            other = self._prepare(
                candidate, llm_string, req.namespace, opts.context, opts.template_version
            )
            if other.normalized == req.normalized:
                return "exact"
            if req.template is not None and other.template == req.template:
                return "template"
            return None
        version = self._backends.kv.get_counter(rq.version_counter(req.namespace))
        keys = rq.keys_for(req, version)
        now = self._settings.clock()
        if self._backends.kv.get(keys.exact, now) is not None:
            return "exact"
        if keys.template is not None and self._backends.kv.get(keys.template, now) is not None:
            return "template"
        return None

    # ------------------------------------------------------------------ lifecycle
    def warm(self) -> LayeredCache:
        """Load now what the first requests would otherwise pay for: the stores are opened,
        the embedding model is loaded and runs once, and the difference analysis's data
        is read (once per process). Returns the cache, so ``LayeredCache(...).warm()``.

        Without it a new process's first semantic store + lookup takes ~1 s; after it,
        tens of milliseconds (``docs/benchmarks.md``, first hour).
        """
        from agent_cache.differences import warm as warm_analysis

        self._backends.kv  # noqa: B018 - opens the store
        self._backends.vectors  # noqa: B018
        self._backends.embedder.embed(["warm up the embedding model"])
        warm_analysis()
        return self

    def close(self) -> None:
        """Close the backends this cache created (never those passed in), stop its threads
        and give back its share of the embedding model (the last cache using it frees it).
        """
        self._backends.close()
        if self.request_judge is not None:
            self.request_judge.close()

    def __enter__(self) -> LayeredCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> LayeredCache:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def _ops(*flows: Flow[Any]) -> Flow[Any]:
    """``flows`` one after the other; returns the last one's result."""
    result = None
    for flow in flows:
        result = yield from flow
    return result
