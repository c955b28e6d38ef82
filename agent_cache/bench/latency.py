"""``agent-cache bench latency``: semantic lookups under load, per embedding backend.

One run, written as one section of ``docs/benchmarks.md`` (between
``<!-- bench:latency:start -->`` and ``<!-- bench:latency:end -->``):

1. **Same vectors?** Cosine agreement of ONNX fp32 / int8 rows with the torch rows, how
   many trap-suite pairs change decision (the engine's rule: not refused by
   :func:`agent_cache.differences.analyze` and similarity ≥ the default threshold, or an
   equivalent pair ≥ the equivalence floor), and the QQP precision at the default
   threshold per backend.
2. **Latency**: ``LayeredCache.lookup`` semantic misses (exact miss, embed, k-NN over the
   embedded SQLite store, verdicts) at each store size (5,000 and 100,000 by default), 1
   and 8 concurrent callers (threads), for the default chain (ONNX fp32 behind the
   micro-batcher), ONNX fp32 without it and ONNX int8; GPTCache (same MiniLM model
   through its ``SBERT`` embedder, SQLite + FAISS, same entries and queries) as the peer.
   p50/p95/p99 per call, lookups/s, the 8-vs-1 scaling and the p50 against GPTCache's.
3. **Where the time goes**: after the timed cells of a size, the default contender again
   at 1 and 8 callers with every stage timed (tokenize, ONNX run, k-NN pass, change-log
   refresh, metadata read, analysis, store reads, the callers' waits, the rest).

Contenders alternate in rounds (the order rotates every round), as in ``bench core``.
Stored entries are random unit vectors (the same for every contender, GPTCache included);
queries are distinct real questions, so every lookup embeds and searches and none hits.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import threading
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent_cache import _request as rq
from agent_cache.batching import MicroBatcher
from agent_cache.bench.core import (
    _environment,
    _load1,
    _pct,
    _query_texts,
    _scope_of,
    _unit,
    default_trap_path,
    finish_run,
)
from agent_cache.cache import DEFAULT_THRESHOLD, LayeredCache
from agent_cache.calibrate import curve, load_pairs, score_queries
from agent_cache.embedders import MemoEmbedder, SentenceTransformerEmbedder, resolve_model_path
from agent_cache.errors import ConfigurationError
from agent_cache.onnx_embedder import OnnxEmbedder, default_threads
from agent_cache.protocols import Embedder, MetaValue
from agent_cache.stores.sqlite import SQLiteStore
from agent_cache.vectors import _int8
from agent_cache.vectors._search import search_threads
from agent_cache.vectors.sqlite import SQLiteVectorStore

__all__ = ["SECTION_END", "SECTION_START", "run_latency_bench"]

SECTION_START = "<!-- bench:latency:start -->"
SECTION_END = "<!-- bench:latency:end -->"
EQUIVALENT_FLOOR = 0.5
BACKEND_NAMES = {"torch": "torch", "fp32": "ONNX fp32", "int8": "ONNX int8"}
#: the latency contenders (backend|micro-batching); ``fp32|on`` is ``LayeredCache(path)``'s
#: default chain. torch is in the vector checks only: its lookups cost minutes of the run.
CONTENDERS = ("fp32|on", "fp32|off", "int8|on")
DEFAULT = "fp32|on"


# ---------------------------------------------------------------------------- 1. vectors
def _embed_all(embedder: Embedder, texts: Sequence[str], step: int = 64) -> np.ndarray:
    parts = [embedder.embed(list(texts[i : i + step])) for i in range(0, len(texts), step)]
    return np.vstack(parts).astype(np.float32)


def _agreement(raws: dict[str, Embedder], texts: Sequence[str]) -> dict[str, Any]:
    ref = _embed_all(raws["torch"], texts)
    out: dict[str, Any] = {"texts": len(texts)}
    for name in ("fp32", "int8"):
        cos = np.sum(_embed_all(raws[name], texts) * ref, axis=1)
        out[name] = {
            "min": float(cos.min()),
            "p1": float(np.percentile(cos, 1)),
            "mean": float(cos.mean()),
        }
    return out


def _decide(analysis: Any, cosine: float) -> bool:
    if analysis.refused:
        return False
    return cosine >= DEFAULT_THRESHOLD or (analysis.equivalent and cosine >= EQUIVALENT_FLOOR)


def _trap(raws: dict[str, Embedder], path: Path) -> dict[str, Any]:
    from agent_cache.differences import analyze

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    queries, stored = [r["query"] for r in rows], [r["stored"] for r in rows]
    analyses = [analyze(q, s) for q, s in zip(queries, stored, strict=True)]
    cos = {
        name: np.sum(_embed_all(e, queries) * _embed_all(e, stored), axis=1)
        for name, e in raws.items()
    }
    base = [_decide(a, float(c)) for a, c in zip(analyses, cos["torch"], strict=True)]
    out: dict[str, Any] = {"pairs": len(rows), "path": str(path)}
    for name in ("fp32", "int8"):
        mine = [_decide(a, float(c)) for a, c in zip(analyses, cos[name], strict=True)]
        changed = [i for i, (x, y) in enumerate(zip(base, mine, strict=True)) if x != y]
        out[name] = {
            "changed": len(changed),
            "examples": [
                {**rows[i], "torch": float(cos["torch"][i]), name: float(cos[name][i])}
                for i in changed[:3]
            ],
            "max_abs_delta": float(np.max(np.abs(cos[name] - cos["torch"]))),
        }
    out["served_torch"] = sum(base)
    return out


def _qqp(raws: dict[str, Embedder], data: Path, pairs_n: int, seed: int) -> dict[str, Any]:
    every = load_pairs(data)
    pairs = load_pairs(data, limit=pairs_n, seed=seed)
    out: dict[str, Any] = {"pairs": len(pairs)}
    for name, raw in raws.items():
        queries = score_queries(pairs, raw, judge_with=every)
        (point,) = curve(queries, [DEFAULT_THRESHOLD])
        out[name] = {"precision": point.precision, "hit_rate": point.hit_rate, "hits": point.hits}
    return out


# ---------------------------------------------------------------------------- 2. latency
def _gptcache(tmp: Path, model_dir: str, dim: int) -> tuple[Any, Callable[[str], Any]]:
    """A GPTCache ``Cache`` as its docs set it up (SQLite + FAISS), and its lookup."""
    from gptcache import Cache, Config
    from gptcache.adapter.api import get
    from gptcache.embedding import SBERT
    from gptcache.manager import CacheBase, VectorBase, get_data_manager
    from gptcache.processor.pre import get_prompt
    from gptcache.similarity_evaluation.distance import SearchDistanceEvaluation

    sbert = SBERT(model_dir)
    manager = get_data_manager(
        CacheBase("sqlite", sql_url=f"sqlite:///{tmp / 'gptcache.db'}"),
        VectorBase("faiss", dimension=dim, index_path=str(tmp / "gptcache.faiss")),
    )
    cache = Cache()
    cache.init(
        pre_embedding_func=get_prompt,
        embedding_func=sbert.to_embeddings,
        data_manager=manager,
        similarity_evaluation=SearchDistanceEvaluation(),
        config=Config(similarity_threshold=DEFAULT_THRESHOLD),
    )
    return cache, lambda q: get(q, cache_obj=cache)


def _drive(lookup: Callable[[], Any], callers: int, seconds: float) -> tuple[list[float], int]:
    """Run ``lookup`` from ``callers`` threads for ``seconds``: per-call times, calls."""
    samples: list[list[float]] = [[] for _ in range(callers)]
    start = threading.Barrier(callers + 1)
    stop_at = [0.0]

    def worker(mine: list[float]) -> None:
        start.wait()
        clock = time.perf_counter
        while True:
            t0 = clock()
            lookup()
            t1 = clock()
            mine.append(t1 - t0)
            if t1 >= stop_at[0]:
                return

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in samples]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + seconds
    start.wait()
    for t in threads:
        t.join()
    flat = [x for s in samples for x in s]
    return flat, len(flat)


def _fill(
    vs: SQLiteVectorStore,
    gpt_manager: Any,
    scope: str,
    vecs: np.ndarray,
    first: int,
    tag: str = "",
) -> None:
    ids = [f"ac1:bench-{tag}{first + i}" for i in range(len(vecs))]
    metas: list[dict[str, MetaValue]] = [
        {
            "scope": scope,
            "namespace": "default",
            "key": id_,
            "text": f"stored question {id_}",
            "expires_at": rq.NO_EXPIRY,
        }
        for id_ in ids
    ]
    vs.add(ids, vecs, metas)
    if gpt_manager is not None:
        texts = [f"stored question {id_}" for id_ in ids]
        gpt_manager.import_data(
            texts, [f"answer {id_}" for id_ in ids], list(vecs), [None] * len(ids)
        )


def _bench_latency(
    tmp: Path,
    raws: dict[str, Embedder],
    sizes: Sequence[int],
    callers: Sequence[int],
    queries: list[str],
    scale: float,
    peer: bool,
    seed: int,
    log: Callable[[str], None],
    breakdown_s: float = 4.0,
) -> dict[str, Any]:
    dim = int(raws["fp32"].embed(["dimension probe"]).shape[1])
    store = SQLiteStore(tmp / "latency.sqlite3")
    vs = SQLiteVectorStore(store)
    chains: dict[str, Embedder] = {}
    batchers: dict[str, MicroBatcher] = {}
    for key in CONTENDERS:
        name, batching = key.split("|")
        if batching == "on":
            batchers[name] = MicroBatcher(raws[name])
            chains[key] = MemoEmbedder(batchers[name])
        else:
            chains[key] = MemoEmbedder(raws[name])
    caches = {
        key: LayeredCache(path=None, embedder=chain, kv_store=store, vector_store=vs)
        for key, chain in chains.items()
    }
    # each embedder searches its own scope (int8 vectors are never compared with fp32
    # ones): every scope gets the same entries, GPTCache once
    scopes = list(dict.fromkeys(_scope_of(c) for c in caches.values()))
    counter = itertools.count()

    def next_query() -> str:
        return queries[next(counter) % len(queries)]

    def lookup_on(cache: LayeredCache) -> Callable[[], Any]:
        return lambda: cache.lookup(next_query())

    lookups: dict[str, Callable[[], Any]] = {key: lookup_on(c) for key, c in caches.items()}
    gpt_manager = gpt_cache = None
    notes: list[str] = []
    if peer:
        try:
            gpt_cache, gpt_get = _gptcache(tmp, resolve_model_path("all-MiniLM-L6-v2"), dim)
            gpt_manager = gpt_cache.data_manager
            lookups["gptcache|-"] = lambda: gpt_get(next_query())
        except ImportError as exc:
            notes.append(f"GPTCache not measured: {exc} (pip install 'agent-cache[bench]')")
    for fn in lookups.values():  # load every model, warm every path
        for _ in range(3):
            fn()
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    breakdowns: list[dict[str, Any]] = []
    filled = 0
    for size in sorted(set(sizes)):
        t0 = time.perf_counter()
        while filled < size:
            batch = min(5000, size - filled)
            vecs = _unit(rng, batch, dim)
            for j, scope in enumerate(scopes):
                _fill(vs, gpt_manager if j == 0 else None, scope, vecs, filled, f"{j}-")
            filled += batch
        fill_s = time.perf_counter() - t0
        cells = [(key, n) for n in callers for key in lookups]
        per_cell = scale * (3.0 + 3.0 * size / 100_000)
        rounds = 3
        log(
            f"  latency @ {size:,}: filled in {fill_s:.0f} s; {len(cells)} cells, "
            f"~{per_cell * len(cells):.0f} s"
        )
        samples: dict[tuple[str, int], list[float]] = {c: [] for c in cells}
        walls: dict[tuple[str, int], list[float]] = {c: [0.0, 0.0] for c in cells}
        for r in range(rounds):
            order = cells[r % len(cells) :] + cells[: r % len(cells)]
            if r % 2:
                order.reverse()
            for cell in order:
                key, n = cell
                for _ in range(n):  # one untimed call per caller: the previous cell's queue
                    lookups[key]()
                began = time.perf_counter()
                got, calls = _drive(lookups[key], n, per_cell / rounds)
                walls[cell][0] += time.perf_counter() - began
                walls[cell][1] += calls
                samples[cell] += got
        for cell in cells:
            key, n = cell
            s = samples[cell]
            rows.append(
                {
                    "size": size,
                    "contender": key,
                    "callers": n,
                    "p50": _pct(s, 50) * 1e3,
                    "p95": _pct(s, 95) * 1e3,
                    "p99": _pct(s, 99) * 1e3,
                    "n": len(s),
                    "throughput": walls[cell][1] / max(walls[cell][0], 1e-9),
                    "load": _load1(),
                }
            )
            log(
                f"    {key:<14} x{n}: p50 {rows[-1]['p50']:7.2f} ms  p99 {rows[-1]['p99']:7.2f}"
                f" ms  {rows[-1]['throughput']:7.1f}/s"
            )
        for n in callers:
            stage_times = _breakdown(caches[DEFAULT], vs, lookups[DEFAULT], n, scale * breakdown_s)
            breakdowns.append({"size": size, "callers": n, **stage_times})
            log(
                f"    breakdown x{n}: {stage_times['lookups']} lookups, "
                f"{stage_times['per_s']:.0f}/s (instrumented)"
            )
    vs.refresh()
    entries_by_scope = [len(vs._partitions[s]) if s in vs._partitions else 0 for s in scopes]
    exact = _bench_exact_untouched(caches["fp32|on"], chains["fp32|on"])
    batch_stats = {
        name: {"batches": b.batches, "requests": b.requests, "texts": b.texts}
        for name, b in batchers.items()
    }
    search = {"passes": vs._combiner.passes, "queries": vs._combiner.queries}
    for b in batchers.values():
        b.close()
    if gpt_cache is not None:  # its atexit hook would write the FAISS index into tmp
        gpt_cache.data_manager = types.SimpleNamespace(close=lambda: None)
    for cache in caches.values():
        cache.close()
    vs.close()
    store.close()
    return {
        "rows": rows,
        "breakdown": breakdowns,
        "entries_by_scope": entries_by_scope,
        "notes": notes,
        "exact": exact,
        "batchers": batch_stats,
        "search": search,
        "dim": dim,
    }


class _Stages:
    """Wall time per stage of a lookup, by wrapping the stage's callable on the bench's own
    objects (restored by :meth:`undo`); each sample is timed on the thread that runs it."""

    def __init__(self) -> None:
        self.total: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.rows = 0  # texts in the ONNX runs
        self.positions = 0  # token positions (real and padding) in the ONNX runs
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []

    def add(self, label: str, seconds: float) -> None:
        with self._lock:
            self.total[label] = self.total.get(label, 0.0) + seconds
            self.calls[label] = self.calls.get(label, 0) + 1

    def timed(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock = time.perf_counter

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(label, clock() - t0)

        return wrapper

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        had = name in vars(owner)  # an instance attribute or a module's name
        setattr(owner, name, self.timed(label, original))
        if had:
            self._undo.append(lambda: setattr(owner, name, original))
        else:
            self._undo.append(lambda: delattr(owner, name))

    def undo(self) -> None:
        for step in reversed(self._undo):
            step()
        self._undo.clear()


class _TimedSession:
    """An ONNX Runtime session whose runs are timed and whose inputs are counted."""

    def __init__(self, inner: Any, stages: _Stages) -> None:
        self._inner = inner
        self._stages = stages

    def run(self, names: Any, feeds: dict[str, Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return self._inner.run(names, feeds)
        finally:
            self._stages.add("ONNX run", time.perf_counter() - t0)
            ids = feeds["input_ids"]
            with self._stages._lock:
                self._stages.rows += int(ids.shape[0])
                self._stages.positions += int(ids.size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TimedTokenizer:
    def __init__(self, inner: Any, stages: _Stages) -> None:
        self._inner = inner
        self.encode_batch = stages.timed("tokenize", inner.encode_batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


#: the breakdown's rows: (label, what it times)
STAGES = (
    ("lookup", "a whole `lookup` call, as its caller sees it"),
    ("embed (caller)", "the caller's wait for its vector: queue, linger, the shared pass"),
    ("tokenize", "`tokenizers` encode_batch, in the batcher's thread"),
    ("ONNX run", "`InferenceSession.run`, in the batcher's thread"),
    ("k-NN query (caller)", "the caller's wait for its matches: the shared pass included"),
    ("k-NN pass", "one pass over the matrix: product, expiry mask, top k"),
    ("change-log refresh", "the SQLite read of other processes' vector writes"),
    ("metadata read", "one SQLite query for the matches' metadata"),
    ("analysis", "`semantic.screen`: difference analysis and thresholds"),
    ("store reads", "the exact layer's reads (version counter, the exact key)"),
)


def _breakdown(
    cache: LayeredCache,
    vs: SQLiteVectorStore,
    lookup: Callable[[], Any],
    callers: int,
    seconds: float,
) -> dict[str, Any]:
    """Where the time of the default contender's lookups goes, ``callers`` at once."""
    from agent_cache import semantic
    from agent_cache.vectors import sqlite as sqlite_vectors

    stages = _Stages()
    model = _onnx_of(cache.embedder)
    store = cache.kv_store
    if model is not None and model._session is not None:
        session, tokenizer = model._session, model._tokenizer
        model._session = _TimedSession(session, stages)
        model._tokenizer = _TimedTokenizer(tokenizer, stages)
    stages.wrap(cache, "lookup", "lookup")
    stages.wrap(cache.embedder, "embed", "embed (caller)")
    stages.wrap(vs, "query", "k-NN query (caller)")
    stages.wrap(vs, "refresh", "change-log refresh")
    stages.wrap(vs, "_metadata", "metadata read")
    stages.wrap(sqlite_vectors, "_search_partition", "k-NN pass")
    stages.wrap(semantic, "screen", "analysis")
    stages.wrap(store, "get", "store reads")
    stages.wrap(store, "get_counter", "store reads")
    try:
        began = time.perf_counter()
        _, calls = _drive(lookup, callers, seconds)
        wall = time.perf_counter() - began
    finally:
        stages.undo()
        if model is not None and isinstance(model._session, _TimedSession):
            model._session, model._tokenizer = session, tokenizer
    return {
        "lookups": calls,
        "per_s": calls / max(wall, 1e-9),
        "total": stages.total,
        "calls": stages.calls,
        "onnx_rows": stages.rows,
        "onnx_positions": stages.positions,
        "load": _load1(),
    }


def _ceiling(
    embedder: Embedder, texts: Sequence[str], cores: int, batch: int = 8
) -> dict[str, Any]:
    """What batching can buy on these cores, measured on the model itself.

    The CPU time (``time.thread_time``, so other load on the machine does not count) of
    one text embedded alone against one text of a batch of ``batch`` similar-length texts
    (sorted by length, as the micro-batcher groups them). With one intra-op thread a run
    works on the calling thread; ``cores`` such runs at once is the most the hardware
    gives, so ``cores * alone / batched`` bounds what many callers gain over one while
    the model is the work of a lookup."""
    sample = sorted(list(dict.fromkeys(texts))[: batch * 12], key=len)
    if len(sample) < batch:
        return {}
    embedder.embed(sample[:batch])  # warm the session and its allocator
    began = time.thread_time()
    for text in sample:
        embedder.embed([text])
    alone = (time.thread_time() - began) / len(sample)
    began = time.thread_time()
    for start in range(0, len(sample), batch):
        embedder.embed(sample[start : start + batch])
    batched = (time.thread_time() - began) / len(sample)
    return {
        "texts": len(sample),
        "batch": batch,
        "alone_ms": alone * 1000,
        "batched_ms": batched * 1000,
        "cores": cores,
        "ceiling": cores * alone / batched if batched > 0 else None,
    }


def _onnx_of(embedder: Any) -> OnnxEmbedder | None:
    while embedder is not None and not isinstance(embedder, OnnxEmbedder):
        embedder = getattr(embedder, "inner", None)
    return embedder


def _bench_exact_untouched(cache: LayeredCache, chain: Embedder) -> dict[str, Any]:
    """Exact hits on the ONNX + batching cache: their time, and that nothing was embedded."""
    assert isinstance(chain, MemoEmbedder)
    prompts = [f"exact question {i}?" for i in range(200)]
    for i, p in enumerate(prompts):
        cache.store(p, {"answer": i})
    misses = chain.misses
    times = []
    for _ in range(5):
        for p in prompts:
            t0 = time.perf_counter()
            hit = cache.lookup(p)
            times.append(time.perf_counter() - t0)
            assert hit is not None and hit.layer == "exact"
    return {
        "p50_us": _pct(times, 50) * 1e6,
        "p95_us": _pct(times, 95) * 1e6,
        "embedded": chain.misses - misses,
        "n": len(times),
    }


# ---------------------------------------------------------------------------- markdown
def _row(rows: list[dict[str, Any]], size: int, key: str, n: int) -> dict[str, Any] | None:
    for r in rows:
        if r["size"] == size and r["contender"] == key and r["callers"] == n:
            return r
    return None


def _label(key: str) -> str:
    name, batching = key.split("|")
    if name == "gptcache":
        return "GPTCache 0.1.44 (SBERT MiniLM, SQLite + FAISS)"
    default = " (the default)" if key == DEFAULT else ""
    return f"{BACKEND_NAMES[name]}, micro-batching {batching}{default}"


def _render_breakdown(cells: list[dict[str, Any]]) -> list[str]:
    """Where the time goes: per lookup, and per call of the shared passes."""
    if not cells:
        return []
    head = " | ".join(
        f"{c['callers']} caller{'s' if c['callers'] > 1 else ''}: ms a lookup"
        f" / calls a lookup / ms a call"
        for c in cells
    )
    lines = [
        "Where the time goes (the default contender, instrumented runs after the timed ones; "
        + ", ".join(
            f"{c['callers']} caller{'s' if c['callers'] > 1 else ''}: {c['lookups']} lookups, "
            f"{c['per_s']:.0f}/s, load {c['load']}"
            for c in cells
        )
        + "). Caller rows are waits as a caller sees them (with 8 callers they include the "
        "queue and the other callers' share of a pass); the others are the work, timed on "
        "the thread that does it (the batcher's for tokenize and ONNX), divided by lookups.",
        "",
        f"| stage | {head} | what it times |",
        "|---|" + "---:|" * len(cells) + "---|",
    ]
    for label, what in STAGES:
        row = []
        for c in cells:
            total, calls, n = c["total"].get(label, 0.0), c["calls"].get(label, 0), c["lookups"]
            if not calls:
                row.append("–")
                continue
            row.append(
                f"{total / max(n, 1) * 1e3:.2f} / {calls / max(n, 1):.2f} / "
                f"{total / calls * 1e3:.2f}"
            )
        lines.append(f"| {label} | " + " | ".join(row) + f" | {what} |")
    other = []
    for c in cells:
        t, n = c["total"], max(c["lookups"], 1)
        rest = t.get("lookup", 0.0) - sum(
            t.get(k, 0.0)
            for k in ("embed (caller)", "k-NN query (caller)", "analysis", "store reads")
        )
        other.append(f"{rest / n * 1e3:.2f}")
    lines.append(
        "| other (Python between the stages, locks) | "
        + " | ".join(other)
        + " | the lookup less the caller rows, the analysis and the store reads |"
    )
    shape = []
    for c in cells:
        runs = c["calls"].get("ONNX run", 0)
        rows_ = c["onnx_rows"]
        shape.append(
            f"{rows_ / runs:.1f} texts a run, {c['onnx_positions'] / max(rows_, 1):.1f} token "
            "positions a text"
            if runs
            else "–"
        )

    lines += [
        "| ONNX batch shape | " + " | ".join(shape) + " | texts per run; padded length |",
        "",
    ]
    return lines


def _rest_ms(cells: Sequence[dict[str, Any]], callers: int) -> float | None:
    """Per lookup, what is not the embedding (k-NN, reads, analysis, Python), at
    ``callers`` callers: the lookup less the caller's wait for its vector."""
    for b in cells:
        if b["callers"] == callers and b["lookups"]:
            total = b["total"]
            return float(total["lookup"] - total["embed (caller)"]) * 1000 / float(b["lookups"])
    return None


def _render_ceiling(
    c: dict[str, Any], few: int, many: int, cells: Sequence[dict[str, Any]] = ()
) -> list[str]:
    if not c or not c.get("ceiling"):
        return []
    alone, batched, cores = c["alone_ms"], c["batched_ms"], c["cores"]
    text = (
        f"The ceiling on these {cores} cores (ONNX fp32, CPU time of the thread, "
        f"{c['texts']} questions): a question embedded alone costs {alone:.2f} ms, one of a "
        f"batch of {c['batch']} similar-length questions {batched:.2f} ms, so for the model "
        f"alone {many} callers can gain at most {cores} × {alone:.2f} / {batched:.2f} = "
        f"{c['ceiling']:.2f}× over {few}"
    )
    rest = _rest_ms(cells, few)
    if rest is not None and rest > 0:
        whole = cores * (alone + rest) / (batched + rest)
        text += (
            f"; a whole lookup also spends {rest:.2f} ms outside the model at {few} caller "
            f"(k-NN, reads, analysis, Python, mostly under the GIL), so with that part "
            f"unshared {cores} × ({alone:.2f} + {rest:.2f}) / ({batched:.2f} + "
            f"{rest:.2f}) = **{whole:.2f}×** is what batching can buy whole lookups "
            "(concurrent k-NN searches do share passes, which lifts the large store a little)"
        )
    return [text + " (issue 22 asks 2.5×).", ""]


def _render(results: dict[str, Any]) -> str:
    env = results["environment"]
    lat = results["latency"]
    rows = lat["rows"]
    sizes = results["args"]["sizes"]
    callers = results["args"]["callers"]
    lines = [
        SECTION_START,
        "## Latency: semantic lookups under load, per embedding backend",
        "",
        f"Measured {env['date']} on {env['cpus']} CPUs ({env['cpu']}), Python {env['python']}, "
        f"onnxruntime {results['versions']['onnxruntime']}, torch {results['versions']['torch']} "
        f"({results['torch_threads']} intra-op threads, its default), ONNX Runtime "
        f"{default_threads()} intra-op thread(s) (`default_threads()`), gptcache "
        f"{results['versions']['gptcache']}. Command: `agent-cache bench latency`; the run took "
        f"{results['elapsed_s'] / 60:.1f} min; 1-minute load average "
        + ", ".join(f"{stage} {value}" for stage, value in results["load"] if value is not None)
        + ". A lookup here is a full `LayeredCache.lookup` semantic miss on the embedded "
        "SQLite store (exact miss, embed one question, k-NN, verdicts); stored entries are "
        "random unit vectors, queries distinct real questions, the same for every contender "
        "(each embedder searches a scope of its own, every scope holds the same entries). "
        "8 callers are 8 threads calling at once; lookups/s counts all of them. torch is in "
        "the vector checks only (its lookups would cost minutes of the run; it was ~3x "
        "slower than ONNX fp32 in earlier runs).",
        "",
    ]
    agree = results.get("agreement")
    if agree:
        lines += [
            "### Same vectors?",
            "",
            f"Cosine between each backend's row and the torch row, on {agree['texts']} texts "
            "(trap-suite and QQP questions):",
            "",
            "| backend | min | 1st percentile | mean |",
            "|---|---:|---:|---:|",
        ]
        for name in ("fp32", "int8"):
            a = agree[name]
            lines.append(
                f"| {BACKEND_NAMES[name]} | {a['min']:.5f} | {a['p1']:.5f} | {a['mean']:.5f} |"
            )
        lines.append("")
    trap = results.get("trap")
    qqp = results.get("qqp")
    if trap or qqp:
        lines += ["| decisions vs torch | ONNX fp32 | ONNX int8 |", "|---|---:|---:|"]
        if trap:
            lines.append(
                f"| trap-suite pairs whose serve/refuse decision changes (of {trap['pairs']}) "
                f"| {trap['fp32']['changed']} | {trap['int8']['changed']} |"
            )
            lines.append(
                f"| largest similarity change on a trap pair | {trap['fp32']['max_abs_delta']:.5f}"
                f" | {trap['int8']['max_abs_delta']:.5f} |"
            )
        if qqp:
            lines.append(
                f"| QQP precision at t = {DEFAULT_THRESHOLD:.2f} (torch "
                f"{qqp['torch']['precision']:.4f}, {qqp['pairs']} pairs): change "
                f"| {qqp['fp32']['precision'] - qqp['torch']['precision']:+.4f} "
                f"| {qqp['int8']['precision'] - qqp['torch']['precision']:+.4f} |"
            )
            lines.append(
                f"| QQP hit rate at t = {DEFAULT_THRESHOLD:.2f} (torch "
                f"{qqp['torch']['hit_rate']:.4f}): change "
                f"| {qqp['fp32']['hit_rate'] - qqp['torch']['hit_rate']:+.4f} "
                f"| {qqp['int8']['hit_rate'] - qqp['torch']['hit_rate']:+.4f} |"
            )
        lines.append("")
        if trap:
            for name in ("int8", "fp32"):
                for ex in trap[name]["examples"]:
                    lines.append(
                        f"- {BACKEND_NAMES[name]} flips ({ex['label']}, {ex['kind']}): "
                        f"“{ex['query']}” / “{ex['stored']}”: torch {ex['torch']:.4f}, "
                        f"{ex[name]:.4f}"
                    )
            lines.append("")
    for note in results.get("notes", []) + lat["notes"]:
        lines += [f"Note: {note}", ""]
    keys = list(dict.fromkeys(r["contender"] for r in rows))
    few, many = min(callers), max(callers)
    for size in sizes:
        lines += [
            f"### {size:,} entries",
            "",
            "| contender | "
            + " | ".join(f"{n} caller{'s' if n > 1 else ''}: p50 / p95 / p99 ms" for n in callers)
            + " | "
            + " | ".join(f"lookups/s, {n}" for n in callers)
            + f" | {many} callers vs {few} | p50 at {few} vs GPTCache |",
            "|---|" + "---:|" * (2 * len(callers) + 2),
        ]
        peer = _row(rows, size, "gptcache|-", few)
        for key in keys:
            cells = []
            for n in callers:
                r = _row(rows, size, key, n)
                cells.append(f"{r['p50']:.1f} / {r['p95']:.1f} / {r['p99']:.1f}" if r else "–")
            for n in callers:
                r = _row(rows, size, key, n)
                cells.append(f"{r['throughput']:.0f}" if r else "–")
            lo, hi = _row(rows, size, key, few), _row(rows, size, key, many)
            cells.append(
                f"{hi['throughput'] / lo['throughput']:.2f}×"
                if lo and hi and lo["throughput"]
                else "–"
            )
            cells.append(
                f"{peer['p50'] / lo['p50']:.2f}× faster"
                if peer and lo and lo["p50"] and key != "gptcache|-"
                else "–"
            )
            lines.append(f"| {_label(key)} | " + " | ".join(cells) + " |")
        lines.append("")
        cells_here = [b for b in lat.get("breakdown", []) if b["size"] == size]
        lines += _render_ceiling(results.get("ceiling") or {}, few, many, cells_here)
        lines += _render_breakdown(cells_here)
    ex = lat["exact"]
    lines += [
        f"Exact hits on the ONNX + micro-batching cache: p50 {ex['p50_us']:.0f} µs, p95 "
        f"{ex['p95_us']:.0f} µs over {ex['n']} hits, {ex['embedded']} texts embedded (an exact "
        "hit never reaches the embedder). Micro-batching formed "
        + ", ".join(
            f"{BACKEND_NAMES[n]}: {b['requests']} requests in {b['batches']} passes"
            for n, b in lat["batchers"].items()
        )
        + " over the whole run."
        + (
            f" Concurrent k-NN searches shared passes over the matrix: {lat['search']['queries']}"
            f" searches in {lat['search']['passes']} passes (one matrix product per pass,"
            f" {search_threads()} BLAS thread(s), `search_threads()`; from"
            f" {_int8.MIN_ROWS:,} rows in a scope an int8 first pass"
            f"{'' if _int8.available() else ' (not available here)'} with exact float32"
            " rescoring, the same top k)."
            if "search" in lat
            else ""
        ),
        "",
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- entry point
def run_latency_bench(
    *,
    out: Path,
    data: Path | None = None,
    trap: Path | None = None,
    sizes: Sequence[int] = (5_000, 100_000),
    callers: Sequence[int] = (1, 8),
    pairs: int = 2000,
    peer: bool = True,
    raws: dict[str, Embedder] | None = None,
    time_scale: float = 1.0,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the latency benchmark, print it and write its section of ``out``.

    Args:
        out: the markdown file (``docs/benchmarks.md``); only our section is replaced.
        data: QQP labeled pairs (queries, and the precision check); ``None``: synthetic
            questions and no QQP row.
        trap: the trap suite (``query, stored, label, kind`` JSON lines); default
            ``tests/data/trap_pairs.jsonl`` of the current directory (the repository
            root) if there; no decision check without one.
        sizes: store sizes; callers: concurrent caller counts.
        pairs: QQP pairs sampled for the precision check (0 skips it).
        peer: measure GPTCache (needs ``agent-cache[bench]``).
        raws: the three embedders by ``torch`` / ``fp32`` / ``int8`` (tests pass fakes).
        time_scale: multiplies every timing budget.

    Returns:
        Every measurement, JSON-ready, plus ``"markdown"``.
    """
    if not sizes or any(s < 1 for s in sizes) or not callers or any(c < 1 for c in callers):
        raise ConfigurationError("sizes and callers must be positive")
    if time_scale <= 0:
        raise ConfigurationError("time_scale must be > 0")
    began = time.perf_counter()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    trap = trap if trap is not None else default_trap_path()
    notes: list[str] = []
    if raws is None:
        raws = {
            "torch": SentenceTransformerEmbedder(),
            "fp32": OnnxEmbedder(precision="fp32"),
            "int8": OnnxEmbedder(precision="int8"),
        }
    try:
        import torch

        torch_threads: int | None = int(torch.get_num_threads())
    except ImportError:
        torch_threads = None
    from agent_cache.bench.core import _version

    results: dict[str, Any] = {
        "environment": _environment(),
        "versions": {d: _version(d) for d in ("onnxruntime", "torch", "gptcache")},
        "torch_threads": torch_threads,
        "args": {"sizes": sorted(set(sizes)), "callers": sorted(set(callers)), "pairs": pairs},
        "load": [("start", _load1())],
        "notes": notes,
    }
    queries = list(itertools.islice(_query_texts(data, seed), 20_000))
    texts = queries[:400]
    if trap is not None and trap.is_file():
        log("trap suite: decisions per backend ...")
        results["trap"] = _trap(raws, trap)
        rows = trap.read_text(encoding="utf-8").splitlines()
        texts = texts + [json.loads(r)["query"] for r in rows if r][:200]
    else:
        notes.append("trap suite not found (pass --trap FILE): no decision check.")
    log("cosine agreement ...")
    results["agreement"] = _agreement(raws, texts)
    if data is not None and pairs > 0:
        log(f"QQP precision on {pairs} pairs per backend ...")
        results["qqp"] = _qqp(raws, data, pairs, seed)
    log("the model's ceiling ...")
    results["ceiling"] = _ceiling(raws["fp32"], queries[:2000], os.cpu_count() or 1)
    results["load"].append(("after the vector checks", _load1()))
    with tempfile.TemporaryDirectory(prefix="agent-cache-latency-") as tmpdir:
        log("latency ...")
        results["latency"] = _bench_latency(
            Path(tmpdir), raws, sizes, callers, queries, time_scale, peer, seed, log
        )
    finish_run(
        results, began, _render, out, log, start_marker=SECTION_START, end_marker=SECTION_END
    )
    return results
