"""``agent-cache`` command line: demo, bench, replay, stats, export, warmup, clear, calibrate,
train-verifier, vllm-command.

Every error is one line on stderr, ``agent-cache: error: ...``, and exit status 2 (a
missing or unreadable file, a malformed line, a path that holds no cache, a bad option).
``--debug`` (or ``AGENT_CACHE_DEBUG=1``) re-raises instead, with the traceback.
``calibrate`` that misses its target precision exits 1."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, NoReturn

from agent_cache.errors import AgentCacheError, ConfigurationError

__all__ = ["main"]

DEBUG_ENV = "AGENT_CACHE_DEBUG"


def _cmd_demo(args: argparse.Namespace) -> int:
    from agent_cache.demo.run import run_demo

    run_demo(llm_url=args.llm_url, path=args.path, threshold=args.threshold)
    return 0


def _bench_out(out: str | None) -> Path:
    """``--out``, else the repository's ``docs/benchmarks.md`` when the current directory
    has one (``make bench`` at the repository root), else ``benchmarks.md`` here."""
    if out is not None:
        return Path(out)
    repo = Path("docs") / "benchmarks.md"
    return repo if repo.is_file() else Path("benchmarks.md")


def _given_file(value: str | None, option: str) -> Path | None:
    """The file an option names (``None`` when not given); a one-line error if absent."""
    if value is None:
        return None
    path = Path(value)
    if not path.is_file():
        raise ConfigurationError(f"{option} {value}: no such file")
    return path


def _bench_prefix(args: argparse.Namespace, out: Path, data: Path | None) -> None:
    if args.kv_routing_only:
        from agent_cache.bench.prefix_kv import run_kv_routing_bench

        run_kv_routing_bench(out=out, alone=True)
        return
    from agent_cache.bench.prefix import run_prefix_bench

    run_prefix_bench(
        out=out,
        requests=args.requests,
        batch=args.batch,
        capacity_blocks=args.capacity_blocks,
        replicas=args.replicas,
        routing_scale=args.routing_scale,
        peer=not args.no_peer,
    )


def _bench_semantic(args: argparse.Namespace, out: Path, data: Path | None) -> None:
    from agent_cache.bench.core import TRAP_FILE, default_trap_path
    from agent_cache.bench.semantic import run_semantic_bench

    if data is None:
        raise ConfigurationError(
            "bench semantic needs labeled pairs: pass --data FILE "
            "({a, b, label} JSON lines, e.g. QQP's qqp_dev.jsonl)"
        )
    traps = _given_file(args.trap, "--trap") or default_trap_path()
    if traps is None:
        raise ConfigurationError(
            f"bench semantic needs the trap suite: {TRAP_FILE} is not in the current "
            "directory (run from the repository root) - pass --trap FILE"
        )
    run_semantic_bench(
        out=out,
        data=data,
        pairs=args.pairs,
        verifier=Path(args.verifier) if args.verifier else None,
        train_verifier=args.train_verifier,
        peer=not args.no_peer,
        traps=traps,
        judge_url=args.judge_url,
        judge_model=args.judge_model,
        smollm2=not args.no_smollm2,
    )


def _bench_latency(args: argparse.Namespace, out: Path, data: Path | None) -> None:
    from agent_cache.bench.latency import run_latency_bench

    run_latency_bench(
        out=out,
        data=data,
        trap=_given_file(args.trap, "--trap"),
        sizes=tuple(args.sizes or (5_000, 100_000)),
        callers=tuple(args.callers),
        pairs=args.latency_pairs,
        peer=not args.no_peer,
    )


def _bench_backends(args: argparse.Namespace, out: Path, data: Path | None) -> None:
    from agent_cache.bench.backends import run_backends_bench

    run_backends_bench(
        out=out,
        data=data,
        entries=args.entries,
        lookups=args.lookups,
        threads=tuple(args.callers),
        writers=args.writers,
        writes=args.writes,
        embedder=args.embedder,
    )


def _bench_first_hour(args: argparse.Namespace, out: Path, data: Path | None) -> None:
    from agent_cache.bench.first_hour import run_first_hour_bench

    run_first_hour_bench(out=out, skip_install=args.skip_install, runs=args.runs)


def _bench_core(args: argparse.Namespace, out: Path, data: Path | None) -> None:
    from agent_cache.bench.core import run_core_bench

    run_core_bench(out=out, data=data, sizes=tuple(args.sizes or (1_000, 10_000, 100_000)))


# ``bench SUITE``: each suite's runner, given the parsed options, --out and --data
_BENCH_SUITES: dict[str, Callable[[argparse.Namespace, Path, Path | None], None]] = {
    "core": _bench_core,
    "prefix": _bench_prefix,
    "semantic": _bench_semantic,
    "latency": _bench_latency,
    "backends": _bench_backends,
    "first-hour": _bench_first_hour,
}


def _cmd_bench(args: argparse.Namespace) -> int:
    out = _bench_out(args.out)
    data = _given_file(args.data, "--data")
    run = _BENCH_SUITES.get(args.suite)
    if run is None:
        raise AgentCacheError(f"unknown benchmark suite {args.suite!r}")
    run(args, out, data)
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
            block_size=args.block_size,
            kv_events_port=None if args.no_kv_events else args.kv_events_port,
            kv_replay_port=args.kv_replay_port,
        )
    )
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from agent_cache.calibrate import calibrate
    from agent_cache.embedders import embedder_from
    from agent_cache.rerankers import reranker_from

    result = calibrate(
        args.file,
        embedder_from(_embedder(args.embedder)),
        target_precision=args.target_precision,
        limit=args.limit,
        reranker=reranker_from(args.reranker) if args.reranker else None,
        progress=None if args.no_progress else _progress_bar(),
    )
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if not result["target_met"]:
        print(
            f"agent-cache: calibrate: target precision {result['target_precision']} not met: "
            f"the best lower 95% bound on {result['pairs']} pairs is "
            f"{result['best_precision_bound']:.3f} (threshold "
            f"{result['best_threshold']:.2f}); {args.out} is marked target_met: false "
            f"(threshold {result['threshold']:.2f}, never looser than the default) and "
            "LayeredCache(config=...) refuses it unless given "
            "agent_cache.calibrate.allow_unmet_target(path)",
            file=sys.stderr,
        )
        return 1
    c = result["chosen"]
    per_ns = "".join(f"\n  namespace {ns!r}: {t:.2f}" for ns, t in result["thresholds"].items())
    print(
        f"threshold {result['threshold']:.2f}: precision {c['precision']:.3f} "
        f"({c['hits']} hits), hit rate {c['hit_rate']:.3f} on {result['pairs']} pairs; "
        f"precision >= {result['target_precision']} promised: its lower 95% bound is "
        f"{result['precision_bound']:.3f}{per_ns}\n"
        f"-> {args.out}; use it with LayeredCache(config={args.out!r})"
    )
    return 0


def _progress_bar() -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the model dependencies
        return None
    return lambda items: tqdm(items, total=len(items), leave=False)


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
        holdout=args.holdout,
        target_precision=args.target_precision,
        base=args.base,
        log=None if args.no_progress else print,  # the bars show with the messages
    )
    print(
        f"verifier saved to {out} in {time.perf_counter() - started:.0f} s"
        + (f" ({len(exclude)} sample questions excluded)" if exclude else "")
        + f"\nuse it with LayeredCache(reranker={str(out)!r})"
    )
    return 0


def _backend_arguments(parser: argparse.ArgumentParser, path: str | None = ".agent_cache") -> None:
    """The options that pick a cache's stores, as ``LayeredCache`` takes them."""
    parser.add_argument("--path", default=path, help=f"embedded cache directory (default {path})")
    parser.add_argument("--redis-url", default=None, help="exact layer on this Redis")
    parser.add_argument("--chroma-url", default=None, help="vectors on this Chroma server")
    parser.add_argument(
        "--prefix",
        default="agent_cache",
        help="deployment prefix: Redis keys and Chroma collection",
    )
    parser.add_argument(
        "--vector-backend",
        default=None,
        choices=["sqlite", "memory", "chroma"],
        help="vectors of the embedded cache (chroma: one process only)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds one Redis/Chroma call may take (bulk deletes and reads are long)",
    )


def _open_cache(args: argparse.Namespace, embedder: Any = "hash", *, existing: bool = False) -> Any:
    """The cache the options name; ``existing``: refuse a local path that holds no cache
    (a read-only command must not create one: nothing is opened before the check)."""
    from agent_cache.cache import LayeredCache

    cache = LayeredCache(
        path=args.path,
        redis_url=args.redis_url,
        chroma_url=args.chroma_url,
        prefix=args.prefix,
        vector_backend=args.vector_backend,
        backend_timeout=args.timeout,
        circuit_reset=None,
        embedder=_embedder(embedder),
    )  # validates the options; the stores open on first use
    if existing:
        try:
            _require_cache(args)
        except ConfigurationError:
            cache.close()
            raise
    return cache


def _require_cache(args: argparse.Namespace) -> None:
    """An embedded cache is a directory holding ``exact.sqlite3`` (entries, and vectors
    with the default sqlite backend); with ``--redis-url`` only the vectors are local:
    ``vectors.sqlite3`` (or ``vectors/`` for Chroma) there."""
    if args.path is None:
        return
    path = Path(args.path)
    if not args.redis_url:
        need = path / "exact.sqlite3"
    elif not args.chroma_url and args.vector_backend != "memory":
        need = path / ("vectors" if args.vector_backend == "chroma" else "vectors.sqlite3")
    else:
        return  # nothing local
    if not need.exists():
        what = "no such directory" if not path.exists() else f"no {need.name} in it"
        if path.exists() and not path.is_dir():
            what = "not a directory"
        raise ConfigurationError(
            f"no cache at {path} ({what}); give the --path of an existing cache"
        )


def _first(lines: list[int]) -> str:
    shown = ", ".join(map(str, lines[:5]))
    return shown + (f" (and {len(lines) - 5} more)" if len(lines) > 5 else "")


def _cmd_warmup(args: argparse.Namespace) -> int:
    from agent_cache._warm import read_warmup_file, warm
    from agent_cache.ops import backend_names

    lines = read_warmup_file(args.file)  # every field checked before anything is written
    bar = _progress(len(lines), "warmup", not args.no_progress)
    namespace = args.namespace if args.namespace is not None else "default"
    with _open_cache(args, args.embedder) as cache:
        where = backend_names(cache)["exact"]
        try:
            report = warm(
                cache,
                lines,
                namespace=namespace,
                llm_string=args.llm_string,
                trust_file=args.trust_file,
                namespace_given=args.namespace is not None,
                batch_size=args.batch_size,
                progress=bar.update if bar is not None else None,
            )
        except ConfigurationError as exc:  # a line refused before anything was written
            raise ConfigurationError(f"{args.file}: {exc}") from exc
    if bar is not None:
        bar.close()
    if report.expired:
        print(f"{report.expired} entries expired since, not stored")
    if report.not_cacheable:
        print(
            f"{len(report.not_cacheable)} empty or error answers not stored "
            f"(lines {_first(report.not_cacheable)})"
        )
    if report.foreign:
        print(
            f"warning: {len(report.foreign)} export lines were made under another model, "
            f"context or template than --llm-string {args.llm_string!r}: not stored "
            f"(lines {_first(report.foreign)}); give their --llm-string, or --trust-file "
            "for a restore into the deployment they came from"
        )
    if report.other_version:
        print(
            f"warning: {len(report.other_version)} lines were exported under another "
            "version of their namespace than this deployment's: not stored (a file never "
            f"raises a version counter; lines {_first(report.other_version)})"
        )
    spaces = sorted(report.namespaces) if args.trust_file else [namespace]
    named = ", ".join(map(repr, spaces)) or repr(namespace)
    print(
        f"stored {report.stored} entries in {where} "
        f"(namespace{'s' if len(spaces) > 1 else ''} {named}); "
        f"{report.skipped} already there, skipped"
    )
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from agent_cache.ops import backend_names, export_entries

    cache = _open_cache(args, existing=True)
    bar = _progress(None, "export", not args.no_progress)
    with cache:
        report = export_entries(
            cache,
            args.out,
            namespace=args.namespace,
            resume=args.resume,
            overwrite=args.force,
            progress=bar.update if bar is not None else None,
        )
        where = backend_names(cache)
    if bar is not None:
        bar.close()
    torn = "; a torn last line was rewritten" if report.torn else ""
    print(
        f"exported {report.written} entries from {where['exact']} to {args.out}"
        f" ({report.already} already in the file{torn})"
    )
    return 0


def _cmd_clear(args: argparse.Namespace) -> int:
    from agent_cache.ops import backend_names, clear_entries, entry_counts

    with _open_cache(args, existing=True) as cache:
        where = backend_names(cache)
        counts = entry_counts(cache, args.namespace)["entries"]
        scope = (
            f"namespace {args.namespace!r}"
            if args.namespace is not None
            else f"every namespace of prefix {args.prefix!r}"
        )
        word = args.namespace if args.namespace is not None else args.prefix
        if not args.yes:
            print(
                f"about to delete {counts['exact']} entries and {counts['semantic']} vectors "
                f"of {scope}\n  entries: {where['exact']}\n  vectors: {where['semantic']}"
            )
            print(f"type {word!r} to confirm: ", end="", flush=True)
            answer = sys.stdin.readline().strip()
            if answer != word:
                raise AgentCacheError("not confirmed: nothing was deleted")
        removed = clear_entries(cache, args.namespace)
    print(f"deleted {removed} entries of {scope} ({where['exact']})")
    return 0


def _progress(total: int | None, desc: str, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # the bar is optional (agent-cache[cli])
        return None
    return tqdm(total=total, desc=desc, unit="req", leave=False)


def _embedder(spec: str) -> Any:
    """A model name, or ``hash`` / ``hash:DIM`` (the test embedder: fast, no model)."""
    if spec == "hash" or spec.startswith("hash:"):
        from agent_cache.testing import HashEmbedder

        return HashEmbedder(int(spec.split(":", 1)[1]) if ":" in spec else 256)
    return spec


def _log_times(records: list[Any]) -> tuple[list[Any], bool]:
    """The records on the log's own clock, and whether the log has one.

    A line without a timestamp takes the timestamp of the nearest line before it that has
    one (of the first line that has one, for lines before it): it keeps its place in the
    log and never gets the wall clock, which would mix the time of the replay into the
    log's. When no line has a timestamp, nothing changes and ``False`` says so (the plot
    then puts lookups in log order on its time axis).
    """
    first = next((r.timestamp for r in records if r.timestamp is not None), None)
    if first is None:
        return records, False
    last, out = first, []
    for rec in records:
        if rec.timestamp is None:
            rec = dataclasses.replace(rec, timestamp=last)
        last = rec.timestamp
        out.append(rec)
    return out, True


def _plot(stats: Any, path: str, axis: Literal["time", "order"] = "time") -> None:
    from agent_cache.plots import plot_stats

    plot_stats(stats, path, axis=axis)


def _cmd_replay(args: argparse.Namespace) -> int:
    from agent_cache.cache import LayeredCache
    from agent_cache.replay import read_log, replay

    prices = _read_json(args.prices) if args.prices else None
    records = list(read_log(args.file))
    if args.limit:
        records = records[: args.limit]
    records, timed = _log_times(records)
    cache = LayeredCache(
        path=args.path, embedder=_embedder(args.embedder), reranker=args.reranker,
        threshold=args.threshold, config=args.config, prices=prices,
    )  # fmt: skip
    with cache:
        report = replay(records, cache, mode=args.mode, progress=not args.no_progress,
                        total=len(records))  # fmt: skip
    assert report.stats is not None
    print(json.dumps(report.as_dict()) if args.json else str(report), flush=True)
    if args.save:
        report.stats.save(args.save)
    if args.plot:
        _plot(report.stats, args.plot, "time" if timed else "order")
    return 0


def _read_json(path: str) -> Any:
    """A JSON file's value; an unreadable file stays an ``OSError`` (it names the file)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{path} is not valid JSON ({exc})") from exc


def _load_stats(path: str) -> Any:
    """A snapshot written by ``CacheStats.save`` (``replay --save``), or a one-line error."""
    from agent_cache.stats import CacheStats

    data = _read_json(path)
    required = {
        f.name
        for f in dataclasses.fields(CacheStats)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    if not isinstance(data, dict) or not required <= data.keys():
        raise ConfigurationError(
            f"{path} is not a stats snapshot (CacheStats.save() or replay --save write one)"
        )
    try:
        stats = CacheStats.load(path)
        for e in stats.events:
            float(e.t), float(e.ms)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ConfigurationError(f"{path}: a malformed stats snapshot ({exc})") from exc
    return stats


def _cmd_stats(args: argparse.Namespace) -> int:
    backend = args.path is not None or args.redis_url or args.chroma_url
    if args.file is None and not backend:
        raise AgentCacheError(
            "give a stats snapshot FILE (CacheStats.save, replay --save), "
            "or a cache: --path, --redis-url, --chroma-url"
        )
    if args.plot and args.file is None:
        raise ConfigurationError("--plot needs a stats snapshot FILE")
    out: dict[str, Any] = {}
    stats = _load_stats(args.file) if args.file else None
    if backend:
        from agent_cache.ops import backend_names, entry_counts

        if args.path is None:
            args.path = ".agent_cache"
        with _open_cache(args, existing=True) as cache:
            out.update(entry_counts(cache, args.namespace))
            out["backends"] = backend_names(cache)
    if args.json:
        print(json.dumps({**(stats.as_dict() if stats else {}), **out}), flush=True)
    else:
        _print_stats(stats, out)
    if args.plot:
        _plot(stats, args.plot)
    return 0


def _print_stats(stats: Any, out: dict[str, Any]) -> None:
    if stats is not None:
        try:
            from rich.console import Console

            Console().print(stats)
        except ImportError:
            print(stats)
    if "entries" in out:
        b, e = out["backends"], out["entries"]
        print(f"entries: {b['exact']}\nvectors: {b['semantic']}")
        width = max([len("namespace"), *(len(ns) for ns in out["namespaces"])])
        print(f"{'namespace':<{width}}  {'exact':>9}  {'semantic':>9}")
        for ns, c in out["namespaces"].items():
            print(f"{ns:<{width}}  {c['exact']:>9}  {c['semantic']:>9}")
        print(f"{'total':<{width}}  {e['exact']:>9}  {e['semantic']:>9}")
    sys.stdout.flush()


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line like every other error of the command."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"agent-cache: error: {message} (see {self.prog} --help)\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-cache")
    except PackageNotFoundError:  # run from a source tree that is not installed
        import agent_cache

        return str(getattr(agent_cache, "__version__", "unknown"))


CALIBRATE_INPUT = """\
input: labeled question pairs, one JSON object a line:
  {{"a": "how do I reset my password?", "b": "how can I reset my password?", "label": 1}}
  "a" is stored, "b" is looked up; "label" is 1 when they ask the same thing, 0 when
  not; an optional "namespace" (a str) calibrates a threshold per namespace (with at
  least 200 pairs in it). The threshold chosen is the lowest whose lower 95% bound on
  precision meets --target-precision. When none does, calibrate exits 1 and OUT is
  marked "target_met": false (its threshold never looser than the default, {default}):
  LayeredCache(config=OUT) refuses such a file unless loaded as
  LayeredCache(config=agent_cache.calibrate.allow_unmet_target(OUT)).
"""


def _cmd_doctor(args: argparse.Namespace) -> int:
    from agent_cache.doctor import report

    findings = report(load=not args.no_load)
    for finding in findings:
        print(finding)
    return 1 if any(f.level == "problem" for f in findings) else 0


def _add_demo(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``demo``: the workload of :mod:`agent_cache.demo.run`."""
    demo = sub.add_parser("demo", help="RAG + agent workload twice against a local model")
    from agent_cache.demo.run import add_arguments

    add_arguments(demo)
    demo.set_defaults(func=_cmd_demo)


def _add_bench(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``bench``: the suite, where it writes, and each suite's options."""
    bench = sub.add_parser(
        "bench", help="measure against the peers; writes a section of a markdown file"
    )
    bench.add_argument(
        "suite",
        choices=["core", "prefix", "semantic", "latency", "backends", "first-hour"],
        help="which benchmark",
    )
    bench.add_argument(
        "--out",
        default=None,
        help="the markdown file a suite writes its section into (default: docs/benchmarks.md "
        "when the current directory has one, as the repository root does; else benchmarks.md)",
    )
    bench.add_argument(
        "--data",
        default=None,
        help="labeled pairs, {a, b, label} JSON lines such as QQP's qqp_dev.jsonl (semantic: "
        "required; core, latency, backends: generated questions without it)",
    )
    _bench_semantic_arguments(bench)
    _bench_prefix_arguments(bench)
    _bench_load_arguments(bench)
    bench.set_defaults(func=_cmd_bench)


def _bench_semantic_arguments(bench: argparse.ArgumentParser) -> None:
    """``bench semantic``'s options."""
    bench.add_argument(
        "--pairs", type=int, default=4000, help="semantic: test pairs sampled (unseen half)"
    )
    bench.add_argument("--verifier", default=None, help="semantic: a trained verifier DIR")
    bench.add_argument(
        "--judge-url",
        default=None,
        help="semantic: an OpenAI-compatible server (your model) to measure as request judge",
    )
    bench.add_argument("--judge-model", default=None, help="semantic: the model id at --judge-url")
    bench.add_argument(
        "--no-smollm2",
        action="store_true",
        help="semantic: skip the request judge on the local SmolLM2-135M server",
    )
    bench.add_argument(
        "--train-verifier",
        action="store_true",
        help="semantic: train one on the calibration half (cached in .bench_cache/)",
    )


def _bench_prefix_arguments(bench: argparse.ArgumentParser) -> None:
    """``--sizes``, ``bench prefix``'s options and ``--no-peer``."""
    bench.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=None,
        help="store sizes (core: 1,000 10,000 100,000; latency: 5,000 100,000)",
    )
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
        "--kv-routing-only",
        action="store_true",
        help="prefix: only the KV-event routing part (its block of the prefix section)",
    )
    bench.add_argument(
        "--no-peer",
        action="store_true",
        help="skip the peer (prefix: ContextPilot; semantic, latency: GPTCache)",
    )


def _bench_load_arguments(bench: argparse.ArgumentParser) -> None:
    """``bench latency``, ``backends`` and ``first-hour``'s options."""
    bench.add_argument(
        "--callers",
        type=int,
        nargs="+",
        default=[1, 8],
        help="latency, backends: concurrent callers (threads)",
    )
    bench.add_argument("--entries", type=int, default=2000, help="backends: entries stored")
    bench.add_argument("--lookups", type=int, default=300, help="backends: lookups per cell")
    bench.add_argument("--writers", type=int, default=4, help="backends: writer processes")
    bench.add_argument("--writes", type=int, default=500, help="backends: stores per writer")
    bench.add_argument(
        "--embedder",
        default="sentence-transformers/all-MiniLM-L6-v2",
        help="backends: the model (the default is what users get)",
    )
    bench.add_argument(
        "--trap",
        default=None,
        help="semantic, latency: the trap suite (default tests/data/trap_pairs.jsonl of the "
        "current directory, the repository root; latency skips its check without one)",
    )
    bench.add_argument(
        "--latency-pairs", type=int, default=2000, help="latency: QQP pairs per backend check"
    )
    bench.add_argument(
        "--skip-install",
        action="store_true",
        help="first-hour: leave out the fresh-venv installs (they take minutes)",
    )
    bench.add_argument(
        "--runs", type=int, default=5, help="first-hour: fresh processes per first-lookup path"
    )


def _add_doctor(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``doctor``."""
    doc = sub.add_parser(
        "doctor", help="which embedder runs and from where, torch/CUDA present, llama.cpp build"
    )
    doc.add_argument(
        "--no-load", action="store_true", help="do not load the embedding model (faster)"
    )
    doc.set_defaults(func=_cmd_doctor)


def _add_vllm_command(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``vllm-command``."""
    vcmd = sub.add_parser("vllm-command", help="print the recommended `vllm serve` command")
    vcmd.add_argument("--model", required=True, help="model id or path to serve")
    vcmd.add_argument("--gpus", type=int, default=1, help="GPUs per server (tensor parallel)")
    vcmd.add_argument("--port", type=int, default=8000)
    vcmd.add_argument("--gpu-memory-utilization", type=float, default=0.90)
    vcmd.add_argument("--max-model-len", type=int, default=None)
    vcmd.add_argument("--block-size", type=int, default=None, help="KV block size (tokens)")
    vcmd.add_argument(
        "--kv-events-port", type=int, default=5557, help="KV-event publisher port (ZMQ)"
    )
    vcmd.add_argument(
        "--kv-replay-port",
        type=int,
        default=None,
        help="KV-event replay socket port (the router's kv_replay)",
    )
    vcmd.add_argument("--no-kv-events", action="store_true", help="leave KV events off")
    vcmd.set_defaults(func=_cmd_vllm_command)


def _add_calibrate(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``calibrate``."""
    from agent_cache.cache import DEFAULT_THRESHOLD

    cal = sub.add_parser(
        "calibrate",
        help="pick a threshold from labeled pairs",
        description="Pick the semantic threshold from labeled question pairs.",
        epilog=CALIBRATE_INPUT.format(default=DEFAULT_THRESHOLD),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cal.add_argument("file", help="labeled pairs: {a, b, label[, namespace]} JSON lines")
    cal.add_argument(
        "--target-precision",
        type=float,
        default=0.9,
        help="the lower 95%% bound on precision the threshold must reach (default 0.9)",
    )
    cal.add_argument("--limit", type=int, default=5000)
    cal.add_argument(
        "--embedder",
        default="sentence-transformers/all-MiniLM-L6-v2",
        help="the cache's embedder (hash / hash:DIM: the test embedder, no model)",
    )
    cal.add_argument(
        "--reranker", default=None, help="calibrate with this verifier (a veto) in the loop"
    )
    cal.add_argument("--out", default="agent_cache.json", help="the config written")
    cal.add_argument("--no-progress", action="store_true", help="no progress bar")
    cal.set_defaults(func=_cmd_calibrate)


def _add_train_verifier(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``train-verifier``."""
    tv = sub.add_parser(
        "train-verifier", help="fine-tune a cross-encoder verifier on labeled pairs"
    )
    tv.add_argument("file", help="labeled pairs: {a, b, label} JSON lines")
    tv.add_argument("--out", required=True, help="directory the model is saved to")
    tv.add_argument("--epochs", type=int, default=1)
    tv.add_argument(
        "--base",
        default=None,
        help="initial weights: a cross-encoder name or local directory (a model pretrained "
        "for pairs trains a far stronger verifier; default: the bundled all-MiniLM-L6-v2)",
    )
    tv.add_argument(
        "--limit", type=int, default=30000, help="training rows (pairs + mined + counterfactual)"
    )
    tv.add_argument(
        "--exclude-sample",
        type=int,
        default=0,
        metavar="N",
        help="leave out the questions of the seeded N-pair sample `bench core --pairs N` uses",
    )
    tv.add_argument("--seed", type=int, default=0)
    tv.add_argument(
        "--holdout",
        type=float,
        default=0.2,
        help="share of pairs (question-disjoint) held out to fit and calibrate the combiner",
    )
    tv.add_argument(
        "--target-precision",
        type=float,
        default=0.9,
        help="the combiner's cut: lowest whose lower 95%% bound on precision meets this",
    )
    tv.add_argument(
        "--no-progress",
        action="store_true",
        help="quiet: no progress bars, no step-by-step messages (the last line only)",
    )
    tv.set_defaults(func=_cmd_train_verifier)


def _add_warmup(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``warmup``."""
    warm = sub.add_parser(
        "warmup",
        help="bulk-load {prompt, response} / {question, answer} lines, a replay log, "
        "or an `agent-cache export` file",
    )
    warm.add_argument("file")
    _backend_arguments(warm)
    warm.add_argument(
        "--namespace",
        default=None,
        help="store every line in this namespace (default 'default'); a line naming "
        "another one is refused",
    )
    warm.add_argument("--llm-string", default="")
    warm.add_argument(
        "--trust-file",
        action="store_true",
        help="a same-deployment restore: keep an export's keys, namespaces, tags and "
        "expiry (a file's version never raises a counter)",
    )
    warm.add_argument("--embedder", default="sentence-transformers/all-MiniLM-L6-v2")
    warm.add_argument("--batch-size", type=int, default=256)
    warm.add_argument("--no-progress", action="store_true")
    warm.set_defaults(func=_cmd_warmup)


def _add_export(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``export``."""
    exp = sub.add_parser("export", help="write every live entry as JSON lines (resumable)")
    exp.add_argument("out", help="the JSONL file (re-import it with `agent-cache warmup`)")
    _backend_arguments(exp)
    exp.add_argument("--namespace", default=None, help="only this namespace")
    exp.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted export of OUT (no entry twice)",
    )
    exp.add_argument("--force", action="store_true", help="overwrite an existing OUT")
    exp.add_argument("--no-progress", action="store_true")
    exp.set_defaults(func=_cmd_export)


def _add_clear(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``clear``."""
    clr = sub.add_parser("clear", help="delete one namespace's (or this prefix's) entries")
    _backend_arguments(clr)
    clr.add_argument("--namespace", default=None, help="only this namespace")
    clr.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    clr.set_defaults(func=_cmd_clear)


def _add_replay(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``replay``."""
    rep = sub.add_parser("replay", help="replay a request log: what each layer would save")
    rep.add_argument("file", help="JSONL: OpenAI-style {request, response} or simple records")
    rep.add_argument("--path", default=None, help="an existing cache (default: a fresh one)")
    # the plot's time axis: the log's timestamps; a line without one takes the time of
    # the line before it; a log with none is plotted in log order
    rep.add_argument("--mode", choices=["shadow", "live"], default="shadow")
    rep.add_argument("--embedder", default="sentence-transformers/all-MiniLM-L6-v2")
    rep.add_argument("--reranker", default=None)
    rep.add_argument("--threshold", type=float, default=None)
    rep.add_argument("--config", default=None, help="JSON written by `agent-cache calibrate`")
    rep.add_argument("--prices", default=None,
                     help='JSON {"model": [input, output]} per million tokens')  # fmt: skip
    rep.add_argument("--limit", type=int, default=0)
    rep.add_argument("--json", action="store_true", help="print one JSON object")
    rep.add_argument(
        "--plot",
        default=None,
        metavar="PNG",
        help="hit rate over the log's time (a line without a timestamp takes that of the "
        "line before it; a log with none: log order), latency, threshold curve",
    )
    rep.add_argument("--save", default=None, metavar="JSON", help="the stats snapshot")
    rep.add_argument("--no-progress", action="store_true")
    rep.set_defaults(func=_cmd_replay)


def _add_stats(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``stats``."""
    st = sub.add_parser("stats", help="a stats snapshot, and a cache's entries per namespace")
    st.add_argument("file", nargs="?", default=None,
                    help="written by CacheStats.save() or replay --save")  # fmt: skip
    _backend_arguments(st, path=None)
    st.add_argument("--namespace", default=None, help="count only this namespace")
    st.add_argument("--json", action="store_true")
    st.add_argument("--plot", default=None, metavar="PNG")
    st.set_defaults(func=_cmd_stats)


# every subcommand, in the order ``agent-cache --help`` lists them
_SUBCOMMANDS = (
    _add_demo,
    _add_bench,
    _add_doctor,
    _add_vllm_command,
    _add_calibrate,
    _add_train_verifier,
    _add_warmup,
    _add_export,
    _add_clear,
    _add_replay,
    _add_stats,
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agent-cache",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"agent-cache {_version()}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"show the traceback of an error (or set {DEBUG_ENV}=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in _SUBCOMMANDS:
        add(sub)
    return parser


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror}"
    else:
        text = str(exc) or type(exc).__name__
    if isinstance(exc, json.JSONDecodeError):
        text = f"not valid JSON: {text}"
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every expected failure is one line on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    try:
        return int(args.func(args))
    except (AgentCacheError, OSError, ValueError) as exc:  # JSON and Unicode errors included
        if debug:
            raise
        print(f"agent-cache: error: {_one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
