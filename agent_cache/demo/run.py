"""``agent-cache demo``: a RAG workload and an agent workload, asked twice, on a real model.

Pass 1 asks the original questions through :class:`~agent_cache.LayeredCache` (mostly
misses: the model answers and the answers are stored). The baseline then sends the pass-2
phrasings straight to the model with no cache, to measure "without the cache" for the very
requests of pass 2. Pass 2 asks the paraphrases (and a near-miss) through the cache.

By default the model is SmolLM2-135M-Instruct on a local llama.cpp server started for the
run (:class:`~agent_cache.local_llm.LocalLlamaServer`); ``--llm-url`` points at any
OpenAI-compatible server instead (vLLM, ...). Nothing is downloaded. Misses go to the
model through :class:`~agent_cache.vllm.VllmRouter` with that one endpoint (retries,
usage and cached-token counts as for a vLLM fleet).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from agent_cache.demo.corpus import (
    AGENT_TASKS,
    RAG_QUESTIONS,
    TEMPLATES,
    TOOL_DELAY_S,
    TOOLS,
    Doc,
    retrieve,
    route_tool,
)
from agent_cache.errors import BackendError
from agent_cache.keys import canonical_json
from agent_cache.usage import ModelUsage, response_usage
from agent_cache.vllm import VllmRouter

if TYPE_CHECKING:
    from agent_cache import CacheStats, LayeredCache

__all__ = ["add_arguments", "main", "run_demo"]

MAX_TOKENS = 64
TOOL_TTL_S = 300.0
PROMPT_VERSION = "demo-v1"
SYSTEM_RAG = (
    "You are the support assistant of Acme Cloud. Answer in one or two sentences, "
    "using only the documents."
)
SYSTEM_AGENT = (
    "You are the support agent of Acme Cloud. Answer the customer in one sentence, "
    "using only the tool result."
)
MODEL = "model"  # ``served_by`` of a request the model answered


@dataclass
class Row:
    """One request of one phase, as measured."""

    phase: str  # "pass1" | "baseline" | "pass2"
    workload: str  # "rag" | "agent"
    question: str
    expect: str | None
    served_by: str  # MODEL, or the cache layer that answered
    score: float | None
    matched: str | None
    tool: str | None  # None (RAG), "called", or "cache:<layer>"
    latency_s: float
    tokens_spent: int
    tokens_saved: int
    answer: str
    kv_cached_tokens: int = 0  # prompt tokens the server reported as served from its KV cache


class _Workloads:
    """Runs one RAG question or agent task, with or without the cache."""

    def __init__(
        self, router: VllmRouter, model: str, cache: LayeredCache | None, llm_string: str
    ) -> None:
        self.router = router
        self.model = model
        self.cache = cache
        self.llm_string = llm_string

    def _answer(
        self,
        *,
        phase: str,
        workload: str,
        question: str,
        expect: str | None,
        messages: list[dict[str, str]],
        context: str,
        tool: str | None,
        start: float,
    ) -> Row:
        cache = self.cache
        hit = None
        if cache is not None:
            hit = cache.lookup(
                question, llm_string=self.llm_string, namespace=workload, context=context
            )
        if hit is not None:
            usage = hit.response.get("usage", {})
            saved = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
            return Row(phase, workload, question, expect, hit.layer, hit.score,
                       hit.matched_prompt, tool, time.perf_counter() - start, 0, saved,
                       str(hit.response.get("text", "")))  # fmt: skip
        text, usage = _chat(self.router, self.model, messages)
        if cache is not None:
            cache.record_model_usage(usage.prompt_tokens, usage.cached_tokens)
            cache.store(
                question,
                {"text": text, "usage": usage.as_dict()},
                llm_string=self.llm_string,
                namespace=workload,
                context=context,
                tokens=usage.total_tokens,
            )
        return Row(phase, workload, question, expect, MODEL, None, None, tool,
                   time.perf_counter() - start, usage.total_tokens, 0, text,
                   usage.cached_tokens)  # fmt: skip

    def rag(self, phase: str, question: str, expect: str | None = None) -> Row:
        """Retrieve, then answer from the cache (scoped by the docs) or the model."""
        start = time.perf_counter()
        docs = retrieve(question)
        context = _docs_block(docs)
        messages = [
            {"role": "system", "content": SYSTEM_RAG},
            {"role": "user", "content": f"Documents:\n{context}\n\nQuestion: {question}"},
        ]
        return self._answer(phase=phase, workload="rag", question=question, expect=expect,
                            messages=messages, context=context, tool=None, start=start)  # fmt: skip

    def agent(self, phase: str, task: str, expect: str | None = None) -> Row:
        """Plan a tool call, get its result (cached by canonical args), then answer."""
        start = time.perf_counter()
        name, args = route_tool(task)
        result, tool_status = self._tool(name, args)
        observation = canonical_json({"tool": name, "args": args, "result": result})
        messages = [
            {"role": "system", "content": SYSTEM_AGENT},
            {"role": "user", "content": f"Tool result: {observation}\n\nCustomer: {task}"},
        ]
        return self._answer(phase=phase, workload="agent", question=task, expect=expect,
                            messages=messages, context=observation, tool=tool_status,
                            start=start)  # fmt: skip

    def _tool(self, name: str, args: dict[str, Any]) -> tuple[Any, str]:
        cache = self.cache
        if cache is None:
            return TOOLS[name](**args), "called"
        prompt = canonical_json(args)
        tool_id = f"tool:{name}"
        hit = cache.lookup(prompt, llm_string=tool_id, namespace="tools")
        if hit is not None:
            return hit.response, f"cache:{hit.layer}"
        result = TOOLS[name](**args)
        tags = tuple(f"{k}:{v}" for k, v in sorted(args.items()))
        cache.store(prompt, result, llm_string=tool_id, namespace="tools", ttl=TOOL_TTL_S,
                    tags=tags)  # fmt: skip
        return result, "called"


def _chat(router: VllmRouter, model: str, messages: list[dict[str, str]]) -> tuple[str, ModelUsage]:
    """One model call: the answer's text and the usage the server reported."""
    reply = router.chat(messages, model=model, max_tokens=MAX_TOKENS, temperature=0.0)
    try:
        text = reply["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise BackendError(f"malformed chat completion: {reply!r:.200}") from exc
    return str(text), response_usage(reply) or ModelUsage()


def _docs_block(docs: Sequence[Doc]) -> str:
    """Retrieved docs in a stable order: the same docs always make the same text."""
    return "\n".join(f"[{d.id}] {d.title}: {d.text}" for d in docs)


# -- reporting ----------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], right: str = "") -> str:
    """Aligned plain-text table; columns whose index is in ``right`` align right."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [
            c.rjust(w) if str(i) in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _short(text: str | None, width: int = 44) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1000:.1f}"


def _p50(rows: Sequence[Row]) -> float | None:
    return statistics.median(r.latency_s for r in rows) if rows else None


def _summary(rows: Sequence[Row]) -> dict[str, Any]:
    hits = Counter(r.served_by for r in rows if r.served_by != MODEL)
    p50 = _p50(rows)
    return {
        "requests": len(rows),
        "model_calls": sum(r.served_by == MODEL for r in rows),
        "tool_calls": sum(r.tool == "called" for r in rows),
        "hits": dict(hits),
        "misses": sum(r.served_by == MODEL for r in rows),
        "tokens_spent": sum(r.tokens_spent for r in rows),
        "tokens_saved": sum(r.tokens_saved for r in rows),
        "kv_cached_tokens": sum(r.kv_cached_tokens for r in rows),
        "latency_p50_ms": None if p50 is None else p50 * 1000,
    }


def _report(
    pass1: list[Row],
    baseline: list[Row],
    pass2: list[Row],
    header: list[str],
    stats: CacheStats,
) -> list[str]:
    out = list(header)
    out += ["", "Pass 1: original questions (cache starts empty)"]
    out.append(_table(
        ["#", "workload", "question", "served by", "tool", "ms"],
        [(i, r.workload, _short(r.question, 46), r.served_by, r.tool, _ms(r.latency_s))
         for i, r in enumerate(pass1, 1)],
        right="05",
    ))  # fmt: skip
    out += ["", "Pass 2: paraphrases, and one near-miss that must go to the model"]
    out.append(_table(
        ["#", "workload", "question", "expected", "served by", "score", "tool", "ms"],
        [(i, r.workload, _short(r.question, 46), r.expect, r.served_by,
          "" if r.score is None else f"{r.score:.3f}", r.tool, _ms(r.latency_s))
         for i, r in enumerate(pass2, 1)],
        right="057",
    ))  # fmt: skip
    hits = [r for r in pass2 if r.served_by != MODEL]
    if hits:
        out += ["", "Pass 2 hits: which pass-1 question answered them"]
        out.append(_table(
            ["question (pass 2)", "matched (pass 1)", "layer"],
            [(_short(r.question, 40), _short(r.matched, 40), r.served_by) for r in hits],
        ))  # fmt: skip
    return out + _work_report(_summary(pass1), _summary(baseline), _summary(pass2), stats)


def _work_report(
    s1: dict[str, Any], sb: dict[str, Any], s2: dict[str, Any], stats: CacheStats
) -> list[str]:
    """The report's tables of hits per layer, work done and latency, and the counters."""
    out: list[str] = []
    layers = sorted(set(s1["hits"]) | set(s2["hits"]))
    out += ["", "Hits per layer"]
    out.append(_table(
        ["layer", "pass 1", "pass 2"],
        [(layer, s1["hits"].get(layer, 0), s2["hits"].get(layer, 0)) for layer in layers]
        + [("miss (model call)", s1["misses"], s2["misses"])],
        right="12",
    ))  # fmt: skip
    out += ["", "Work done"]
    out.append(_table(
        ["", "pass 1", "baseline", "pass 2"],
        [("requests", s1["requests"], sb["requests"], s2["requests"]),
         ("model calls made", s1["model_calls"], sb["model_calls"], s2["model_calls"]),
         ("model calls avoided", s1["requests"] - s1["model_calls"], 0,
          s2["requests"] - s2["model_calls"]),
         ("tool calls made", s1["tool_calls"], sb["tool_calls"], s2["tool_calls"]),
         ("tokens spent", s1["tokens_spent"], sb["tokens_spent"], s2["tokens_spent"]),
         ("tokens saved", s1["tokens_saved"], 0, s2["tokens_saved"]),
         ("prompt tokens from server KV cache*", s1["kv_cached_tokens"],
          sb["kv_cached_tokens"], s2["kv_cached_tokens"])],
        right="123",
    ))  # fmt: skip
    out.append(
        "* usage.prompt_tokens_details.cached_tokens as the server reports it (vLLM does; "
        "llama.cpp's server reports none, so 0 there)"
    )
    speedup = (
        f"{sb['latency_p50_ms'] / s2['latency_p50_ms']:.1f}x"
        if sb["latency_p50_ms"] and s2["latency_p50_ms"]
        else "n/a"
    )
    out += ["", "Latency per request, p50 (same pass-2 requests, end to end)"]
    out.append(_table(
        ["", "ms"],
        [("without cache (baseline, measured: model called directly)",
          f"{sb['latency_p50_ms']:.1f}"),
         ("with cache (pass 2: lookups, plus model calls on misses)",
          f"{s2['latency_p50_ms']:.1f}"),
         ("speed-up", speedup)],
        right="1",
    ))  # fmt: skip
    out += ["", "Cache counters for the whole run (cache.stats()):", str(stats)]
    return out


# -- entry points -------------------------------------------------------------------------


def run_demo(
    *,
    llm_url: str | None = None,
    path: str | None = None,
    threshold: float | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run both workloads twice through :class:`~agent_cache.LayeredCache`, and report.

    Args:
        llm_url: An OpenAI-compatible API root (``http://host:port/v1``); ``None`` starts
            SmolLM2-135M on a local llama.cpp server for the run and stops it at the end.
        path: Cache directory; ``None`` uses a fresh temporary one (removed at the end), so
            pass 1 always starts from an empty cache.
        threshold: Semantic similarity threshold; ``None`` keeps the cache's default.
        quiet: Print nothing (the numbers are returned either way).

    Returns:
        The printed figures: ``pass1``/``baseline``/``pass2`` summaries (requests, model
        and tool calls, hits per layer, tokens, p50 latency), ``model_calls_avoided``,
        ``tokens_saved``, ``near_misses``, every request in ``rows``, ``stats`` and
        ``elapsed_s``.

    Example (starts a local model server)::

        result = run_demo(quiet=True)
        result["pass2"]["model_calls"] < result["pass1"]["model_calls"]  # -> True
    """
    say: Callable[[str], None] = (lambda _line: None) if quiet else print
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        run = _start(stack, llm_url, path, threshold, say)
        pass1, baseline, pass2 = _passes(run)
        stats = run.cache.stats()
        lines = _report(pass1, baseline, pass2, _header(run, threshold), stats)
        elapsed = time.perf_counter() - started
        lines += ["", f"demo finished in {elapsed:.1f} s"]
        for line in lines:
            say(line)

    s1, s2 = _summary(pass1), _summary(pass2)
    return {
        "llm_url": run.llm_url,
        "model": run.model,
        "pass1": s1,
        "baseline": {**_summary(baseline), "method": "pass-2 questions, model called directly"},
        "pass2": s2,
        "model_calls_avoided": s2["requests"] - s2["model_calls"],
        "tool_calls_avoided": len(AGENT_TASKS) - s2["tool_calls"],
        "tokens_saved": s2["tokens_saved"],
        "near_misses": [asdict(r) for r in pass2 if r.expect == "miss"],
        "rows": [asdict(r) for r in pass1 + baseline + pass2],
        "stats": stats.as_dict(),
        "elapsed_s": elapsed,
        "output": "\n".join(lines),
    }


@dataclass
class _Run:
    """What a demo run stands on: the model's server behind a router, and the cache."""

    router: VllmRouter
    model: str
    llm_url: str
    cache: LayeredCache
    where: str  # the cache directory, as the report names it


def _start(
    stack: contextlib.ExitStack,
    llm_url: str | None,
    path: str | None,
    threshold: float | None,
    say: Callable[[str], None],
) -> _Run:
    """The server (a local one when ``llm_url`` is None), the router and the cache, each
    closed by ``stack``."""
    from agent_cache import LayeredCache  # the engine; imported late (heavy imports)
    from agent_cache.local_llm import LocalLlamaServer

    model = "local"
    if llm_url is None:
        say("starting the local model server (SmolLM2-135M-Instruct, llama.cpp)...")
        server = stack.enter_context(LocalLlamaServer())
        llm_url, model = server.base_url, server.model
    router = stack.enter_context(
        VllmRouter([llm_url], policy="round_robin", metrics_interval=None, timeout=120,
                   generation_timeout=120)
    )  # fmt: skip
    if model == "local":  # a server of the user's: ask it what it serves
        model = next(iter(router.models()), model)
    if path is None:
        path = tempfile.mkdtemp(prefix="agent-cache-demo-")
        stack.callback(shutil.rmtree, path, True)
        where = f"{path} (fresh, removed at the end)"
    else:
        where = path
    cache = LayeredCache(path=path, threshold=threshold, templates=TEMPLATES)
    stack.callback(cache.close)
    return _Run(router, model, llm_url, cache, where)


def _passes(run: _Run) -> tuple[list[Row], list[Row], list[Row]]:
    """Pass 1 (original questions), the baseline (pass 2 without the cache), pass 2."""
    router, model, cache = run.router, run.model, run.cache
    llm_string = f"{model}|{PROMPT_VERSION}|max_tokens={MAX_TOKENS}|temperature=0"
    cached = _Workloads(router, model, cache, llm_string)
    direct = _Workloads(router, model, None, "")

    # warm-up, not timed: the server's first call, the embedder and the stores' setup
    router.chat([{"role": "user", "content": "Say OK."}], model=model, max_tokens=4)
    cache.embedder.embed(["warm-up"])
    _ = (cache.kv_store, cache.vector_store)
    pass1 = [cached.rag("pass1", q.question) for q in RAG_QUESTIONS]
    pass1 += [cached.agent("pass1", t.task) for t in AGENT_TASKS]
    baseline = [direct.rag("baseline", q.rephrased, q.expect) for q in RAG_QUESTIONS]
    baseline += [direct.agent("baseline", t.rephrased, t.expect) for t in AGENT_TASKS]
    pass2 = [cached.rag("pass2", q.rephrased, q.expect) for q in RAG_QUESTIONS]
    pass2 += [cached.agent("pass2", t.rephrased, t.expect) for t in AGENT_TASKS]
    return pass1, baseline, pass2


def _header(run: _Run, threshold: float | None) -> list[str]:
    return [
        f"agent-cache demo: {len(RAG_QUESTIONS)} RAG questions + {len(AGENT_TASKS)} agent "
        f"tasks, each asked twice",
        f"model: {run.model} at {run.llm_url} (max_tokens={MAX_TOKENS}, temperature=0)",
        f"cache: {run.where}; threshold: {'default' if threshold is None else threshold}",
        f"tools: order_status, invoice_total (deterministic; simulated API delay "
        f"{TOOL_DELAY_S * 1000:.0f} ms); tool results cached in namespace 'tools' "
        f"(ttl {TOOL_TTL_S:.0f} s)",
        "baseline: the pass-2 questions sent straight to the model (tools called "
        "directly), measured in this run, no cache",
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the demo's options (``--llm-url``, ``--path``, ``--threshold``) to a parser.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> parser.parse_args(["--threshold", "0.9"]).threshold
        0.9
    """
    parser.add_argument(
        "--llm-url",
        default=None,
        help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 "
        "(default: start SmolLM2-135M on a local llama.cpp server for the run)",
    )
    parser.add_argument(
        "--path",
        default=None,
        help="cache directory (default: a fresh temporary directory, removed at the end)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="semantic similarity threshold in [0, 1], higher is stricter "
        "(default: the cache's calibrated default)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``[--llm-url URL] [--path DIR] [--threshold T]`` and run the demo (exit code 0)."""
    parser = argparse.ArgumentParser(prog="agent-cache demo", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    run_demo(llm_url=args.llm_url, path=args.path, threshold=args.threshold)
    return 0
