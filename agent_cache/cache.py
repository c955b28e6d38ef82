"""``LayeredCache``: exact → template → semantic (difference analysis, verifier, threshold).

The class is a thin front over the pipeline, whose parts each live in a module of their
own: :mod:`agent_cache._parts` builds them from the constructor's arguments (grouped in
a few configs), :mod:`agent_cache._calls` checks each request's arguments once and
prepares it; :mod:`agent_cache._lookup` reads, :mod:`agent_cache._write` writes,
:mod:`agent_cache._trust` judges, :mod:`agent_cache._fetch` and :mod:`agent_cache._stream`
compute once for all concurrent callers (``docs/architecture.md``).

Each request's logic is written once, as a generator "flow" (:mod:`agent_cache._flow`);
every sync method runs it with ``run_sync`` and its ``a``-twin with ``run_async``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal, Unpack

from agent_cache import _request as rq
from agent_cache._backends import VectorBackend
from agent_cache._flow import run_async, run_sync
from agent_cache._hits import CacheHit, Explanation, Fetched
from agent_cache._parts import assemble
from agent_cache._settings import Setting
from agent_cache._stream import AStreamed, Streamed
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
    """The layered result cache: exact, then template, then semantic (the request flow:
    ``docs/architecture.md``).

    ``path``: the directory of the embedded default (one SQLite database, shared safely by
    every process on the machine; ``None``: in memory). The keywords choose the backends,
    the model gate and degradation, the semantic layer, trust and measurement: each one,
    its default and its meaning in ``docs/configuration.md``. The tunable ones are also
    attributes (``cache.threshold = 0.9``), checked as the constructor checks them.

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
        p = assemble(args, default_threshold=DEFAULT_THRESHOLD)
        self._settings, self._backends, self._stats = p.settings, p.backends, p.stats
        self._negative, self._trust, self._bound = p.negative, p.trust, p.trust.bound
        self._reader, self._writer, self._calls = p.reader, p.writer, p.calls
        self._fetcher, self._streams, self.request_judge = p.fetcher, p.streams, p.request_judge
        b = p.backends
        self.path, self.redis_url, self.chroma_url = b.path, b.redis_url, b.chroma_url
        self.vector_backend, self.prefix, self.on_corrupt = b.vector_backend, prefix, on_corrupt
        self.backend_timeout, self.circuit_reset = b.backend_timeout, b.circuit_reset
        p.watch(self)  # sinks that count entries (Prometheus) watch this cache

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

    # ------------------------------------------------------------------ configuration
    def threshold_for(self, namespace: str) -> float:
        """The similarity threshold in force for ``namespace`` (with ``max_error_rate``:
        the one the judged evidence supports)."""
        return self._trust.threshold_for(rq.check_name(namespace))

    def add_template(self, name: str, patterns: str | Sequence[str]) -> None:
        """Register a parameterized prompt: ``add_template("order", "status of order {id}")``."""
        pats = (patterns,) if isinstance(patterns, str) else tuple(patterns)
        self.templates.append(Template(name, pats))

    def _prepare(self, *args: Any) -> rq.Request:
        """The one preparation of a request (:meth:`agent_cache._calls.Calls.prepare`)."""
        return self._calls.prepare(*args)

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
        return run_sync(self._calls.read(prompt, llm_string, namespace, options))

    async def alookup(
        self,
        prompt: str,
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.ReadArgs],
    ) -> CacheHit | None:
        """Async twin of :meth:`lookup`."""
        return await run_async(self._calls.read(prompt, llm_string, namespace, options))

    def contains(
        self,
        prompt: str,
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.ScopeArgs],
    ) -> bool:
        """Whether ``prompt`` has an exact entry (no embedding, no stats): what a
        resumable bulk load skips."""
        return self._calls.contains(prompt, llm_string, namespace, options)

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
        reads back ``{"1": "a"}``), a subclass of ``str``, ``int``, ``float``, ``dict`` or
        ``list`` (an ``IntEnum`` reads back an ``int``). ``exact=False``: a codec's payload,
        whose decoder restores the value (JSON then normalizes those to plain types).

        Raises:
            SerializationError: the response is not JSON-serializable, or would not
                read back equal with equal types (nothing written).
            ConfigurationError: bad prompt, namespace, ttl or tags (nothing written).
        """
        return run_sync(self._calls.store(prompt, response, llm_string, namespace, options))

    async def astore(
        self,
        prompt: str,
        response: Any,
        llm_string: str = "",
        namespace: str = "default",
        **options: Unpack[rq.StoreArgs],
    ) -> str:
        """Async twin of :meth:`store`."""
        flow = self._calls.store(prompt, response, llm_string, namespace, options)
        return await run_async(flow)

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
        flow = self._calls.store_many(items, llm_string, namespace, ttl, tags, batch_size)
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

        ``compute()`` runs only on a miss; concurrent identical misses share one call
        (threads and tasks of this process through an in-process flight, other processes
        through a lease of ``singleflight_timeout`` seconds on the shared store, SQLite
        file or Redis, renewed while ``compute`` runs, expiring by itself if its holder
        dies). The value computed is returned even when storing it fails (counted in
        ``stats().errors``). ``ttl``, ``tags``, ``context``, ``template_version`` and
        ``verbatim`` as in :meth:`store`; ``tokens`` may be a function of the value.
        ``policy``: ``"use"``; ``"refresh"`` calls the model and overwrites; ``"no_store"``
        reads but never writes; ``"bypass"`` neither (as if there were no cache).

        ``encode``/``decode`` put a codec between the caller's objects and the stored JSON
        (what the adapters stand on): on a miss ``encode(value)`` is the payload stored
        (:data:`agent_cache.NOT_STORED`: not stored, counted in ``stats().counters
        ["not_stored"]``; an ``encode`` that raises: counted in ``encode_errors``, the value
        still returned); on a hit ``decode(payload)`` rebuilds the object (one that raises
        marks an incompatible entry: counted in ``decode_errors``, evicted and computed
        again, never raised). Concurrent identical misses get the leader's value.

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
        plan = self._calls.plan(prompt, compute, llm_string, namespace, options)
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
        plan = self._calls.plan(prompt, compute, llm_string, namespace, options)
        return await run_async(self._fetcher.fetch_flow(plan))

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
        args = (prompt, start_stream, llm_string, namespace, options, encode, decode)
        return self._streams.fetch(self._calls.stream_plan(*args), start_stream, join)

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
        args = (prompt, start_stream, llm_string, namespace, options, encode, decode)
        return await self._streams.afetch(self._calls.stream_plan(*args), start_stream, join)

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
        return run_sync(self._calls.invalidate(tags, namespace, batch_size, pause))

    async def ainvalidate(
        self,
        tags: Iterable[str],
        namespace: str = "default",
        *,
        batch_size: int = 500,
        pause: float = 0.0,
    ) -> int:
        """Async twin of :meth:`invalidate`."""
        return await run_async(self._calls.invalidate(tags, namespace, batch_size, pause))

    def invalidate_all_namespaces(
        self, tags: Iterable[str], *, batch_size: int = 500, pause: float = 0.0
    ) -> int:
        """Delete the entries carrying any of ``tags`` in **every** namespace of this
        deployment (a global purge, e.g. a document deleted for every tenant)."""
        return run_sync(self._calls.invalidate_in(tags, None, batch_size, pause))

    async def ainvalidate_all_namespaces(
        self, tags: Iterable[str], *, batch_size: int = 500, pause: float = 0.0
    ) -> int:
        """Async twin of :meth:`invalidate_all_namespaces`."""
        return await run_async(self._calls.invalidate_in(tags, None, batch_size, pause))

    def bump_version(self, namespace: str = "default") -> int:
        """Invalidate a whole namespace in O(1): every key embeds the namespace's version."""
        return run_sync(self._calls.bump(namespace))

    async def abump_version(self, namespace: str = "default") -> int:
        """Async twin of :meth:`bump_version`."""
        return await run_async(self._calls.bump(namespace))

    def clear(self, namespace: str | None = None) -> None:
        """Remove every entry (of one namespace, or all: ``None``). A namespace that is
        not a non-empty str is a ConfigurationError (nothing is deleted)."""
        run_sync(self._calls.clear(namespace))

    async def aclear(self, namespace: str | None = None) -> None:
        """Async twin of :meth:`clear`."""
        await run_async(self._calls.clear(namespace))

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
        run_sync(self._calls.feedback(hit, correct, namespace))

    async def afeedback(self, hit: CacheHit, correct: bool, namespace: str | None = None) -> None:
        """Async twin of :meth:`feedback`."""
        await run_async(self._calls.feedback(hit, correct, namespace))

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
        return self._calls.explain(query, candidate, llm_string, namespace, options)

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
