"""``agent-cache`` command line: demo, bench, calibrate, warmup, train-verifier, vllm-command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from agent_cache.errors import AgentCacheError

__all__ = ["main"]


def _cmd_demo(args: argparse.Namespace) -> int:
    from agent_cache.demo.run import run_demo

    run_demo(llm_url=args.llm_url, path=args.path, threshold=args.threshold)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    if args.suite == "prefix":
        from agent_cache.bench.prefix import run_prefix_bench

        run_prefix_bench(
            out=Path(args.out),
            requests=args.requests,
            batch=args.batch,
            capacity_blocks=args.capacity_blocks,
            replicas=args.replicas,
            routing_scale=args.routing_scale,
            peer=not args.no_peer,
        )
        return 0
    if args.suite == "latency":
        from agent_cache.bench.latency import run_latency_bench

        run_latency_bench(
            out=Path(args.out),
            data=Path(args.data) if args.data else None,
            trap=Path(args.trap) if args.trap else None,
            sizes=tuple(args.sizes),
            callers=tuple(args.callers),
            pairs=args.latency_pairs,
            peer=not args.no_peer,
        )
        return 0
    if args.suite != "core":
        raise AgentCacheError(f"unknown benchmark suite {args.suite!r}")
    from agent_cache.bench.core import run_core_bench

    run_core_bench(
        out=Path(args.out),
        data=Path(args.data) if args.data else None,
        pairs=args.pairs,
        sizes=tuple(args.sizes),
    )
    return 0


def _cmd_vllm_command(args: argparse.Namespace) -> int:
    from agent_cache.vllm.command import vllm_command

    print(
        vllm_command(
            args.model,
            gpus=args.gpus,
            port=args.port,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
        )
    )
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from agent_cache.calibrate import calibrate
    from agent_cache.embedders import embedder_from

    result = calibrate(
        args.file,
        embedder_from(args.embedder),
        target_precision=args.target_precision,
        limit=args.limit,
        guards=not args.no_guards,
    )
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    c = result["chosen"]
    print(
        f"threshold {result['threshold']:.2f}: precision {c['precision']:.3f}, "
        f"hit rate {c['hit_rate']:.3f} on {result['pairs']} pairs -> {args.out}\n"
        f"use it with LayeredCache(config={args.out!r})"
    )
    return 0


def _cmd_train_verifier(args: argparse.Namespace) -> int:
    import time

    from agent_cache.verifier import sample_questions, train_verifier

    exclude = (
        sample_questions(args.file, args.exclude_sample, seed=0) if args.exclude_sample else None
    )
    started = time.perf_counter()
    out = train_verifier(
        args.file,
        args.out,
        epochs=args.epochs,
        limit=args.limit,
        exclude=exclude,
        seed=args.seed,
        log=print,
    )
    print(
        f"verifier saved to {out} in {time.perf_counter() - started:.0f} s"
        + (f" ({len(exclude)} sample questions excluded)" if exclude else "")
        + f"\nuse it with LayeredCache(reranker=CrossEncoderReranker({str(out)!r}))"
    )
    return 0


def _cmd_warmup(args: argparse.Namespace) -> int:
    from agent_cache.cache import LayeredCache

    items = []
    with open(args.file, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                row = json.loads(line)
                if "prompt" not in row or "response" not in row:
                    raise AgentCacheError(f"{args.file}:{n}: need 'prompt' and 'response'")
                items.append((row["prompt"], row["response"]))
    with LayeredCache(path=args.path) as cache:
        keys = cache.store_many(items, llm_string=args.llm_string, namespace=args.namespace)
    print(f"stored {len(keys)} entries in {args.path} (namespace {args.namespace!r})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-cache", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="RAG + agent workload twice against a local model")
    from agent_cache.demo.run import add_arguments

    add_arguments(demo)
    demo.set_defaults(func=_cmd_demo)

    bench = sub.add_parser("bench", help="measure against the peers; writes docs/benchmarks.md")
    bench.add_argument("suite", choices=["core", "prefix", "latency"], help="which benchmark")
    bench.add_argument("--out", default="docs/benchmarks.md")
    bench.add_argument(
        "--data", default=None, help="labeled pairs (default: ../shared/data/qqp_dev.jsonl)"
    )
    bench.add_argument("--pairs", type=int, default=5000, help="pairs sampled for the QQP curve")
    bench.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    bench.add_argument("--requests", type=int, default=2000, help="prefix: online stream size")
    bench.add_argument("--batch", type=int, default=600, help="prefix: offline batch size")
    bench.add_argument(
        "--capacity-blocks", type=int, default=2048, help="prefix: KV blocks per replica"
    )
    bench.add_argument(
        "--replicas", type=int, nargs="+", default=[3, 8], help="prefix: replica counts"
    )
    bench.add_argument(
        "--routing-scale", type=float, default=3.0, help="prefix: size of the routing streams"
    )
    bench.add_argument(
        "--no-peer", action="store_true", help="prefix: skip ContextPilot; latency: GPTCache"
    )
    bench.add_argument(
        "--callers", type=int, nargs="+", default=[1, 8], help="latency: concurrent callers"
    )
    bench.add_argument(
        "--trap", default=None, help="latency: trap suite (default tests/data/trap_pairs.jsonl)"
    )
    bench.add_argument(
        "--latency-pairs", type=int, default=2000, help="latency: QQP pairs per backend check"
    )
    bench.set_defaults(func=_cmd_bench)

    vcmd = sub.add_parser("vllm-command", help="print the recommended `vllm serve` command")
    vcmd.add_argument("--model", required=True, help="model id or path to serve")
    vcmd.add_argument("--gpus", type=int, default=1, help="GPUs per server (tensor parallel)")
    vcmd.add_argument("--port", type=int, default=8000)
    vcmd.add_argument("--gpu-memory-utilization", type=float, default=0.90)
    vcmd.add_argument("--max-model-len", type=int, default=None)
    vcmd.set_defaults(func=_cmd_vllm_command)

    cal = sub.add_parser("calibrate", help="pick a threshold from labeled pairs")
    cal.add_argument("file")
    cal.add_argument("--target-precision", type=float, default=0.9)
    cal.add_argument("--limit", type=int, default=5000)
    cal.add_argument("--embedder", default="sentence-transformers/all-MiniLM-L6-v2")
    cal.add_argument("--no-guards", action="store_true")
    cal.add_argument("--out", default="agent_cache.json")
    cal.set_defaults(func=_cmd_calibrate)

    tv = sub.add_parser(
        "train-verifier", help="fine-tune a cross-encoder verifier on labeled pairs"
    )
    tv.add_argument("file", help="labeled pairs: {a, b, label} JSON lines")
    tv.add_argument("--out", required=True, help="directory the model is saved to")
    tv.add_argument("--epochs", type=int, default=1)
    tv.add_argument("--limit", type=int, default=30000, help="pairs sampled for training")
    tv.add_argument(
        "--exclude-sample",
        type=int,
        default=0,
        metavar="N",
        help="leave out the questions of the seeded N-pair sample `bench core --pairs N` uses",
    )
    tv.add_argument("--seed", type=int, default=0)
    tv.set_defaults(func=_cmd_train_verifier)

    warm = sub.add_parser("warmup", help="bulk-load {prompt, response} JSON lines")
    warm.add_argument("file")
    warm.add_argument("--path", default=".agent_cache")
    warm.add_argument("--namespace", default="default")
    warm.add_argument("--llm-string", default="")
    warm.set_defaults(func=_cmd_warmup)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except AgentCacheError as exc:
        print(f"agent-cache: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
