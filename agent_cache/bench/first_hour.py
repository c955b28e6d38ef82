"""``agent-cache bench first-hour``: what a new user meets in the first hour.

One run, written as one section of ``docs/benchmarks.md`` (between
``<!-- bench:first-hour:start -->`` and ``<!-- bench:first-hour:end -->``):

1. **Install** (skipped with ``--skip-install``; run from the repository root): the
   project built once as a wheel (``pip wheel --no-deps .``), then for each of
   ``agent-cache``, ``[langchain]``, ``[llamaindex]`` and ``[all]`` a fresh
   ``python -m venv`` and ``pip install -c constraints.txt WHEEL[extra]``: seconds,
   packages (``pip list``), size of site-packages, and whether any ``torch``,
   ``triton`` or ``nvidia-*`` package came in. A dry run (``pip install --dry-run
   --report``) comes first; a set that would bring one of those is reported and not
   installed.
2. **Memory and threads**: 100 caches opened (``LayeredCache(path=tmp/i)``, default
   embedder), used (one store + one paraphrase lookup) and closed, one after the other,
   in one fresh process: VmRSS and threads (``/proc/self/status``) at the start and
   after 1, 10 and 100.
3. **First lookup**: fresh processes, each timing ``LayeredCache(path=...)``,
   ``warm()`` and the first ``store()`` + paraphrase ``lookup()`` after it; others the
   same first store + lookup without ``warm()``. Medians.
4. **Context**: one embedding (one question per call) on ONNX Runtime vs torch, and
   ``LayeredCache.lookup`` of unseen paraphrases at 1,000 stored entries.

Every measurement of 2-4 runs in a subprocess of its own (``python -c``), so no model,
thread or allocation of one part is counted in another.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["SECTION_END", "SECTION_START", "child_main", "run_first_hour_bench"]

SECTION_START = "<!-- bench:first-hour:start -->"
SECTION_END = "<!-- bench:first-hour:end -->"

#: the install sets measured: label -> the extra (``""``: the core package)
INSTALL_SETS = {
    "agent-cache": "",
    "agent-cache[langchain]": "langchain",
    "agent-cache[llamaindex]": "llamaindex",
    "agent-cache[all]": "all",
}
#: packages the default and framework installs must never bring (normalized names)
HEAVY = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-.+)$")
RESULT_TAG = "FIRST-HOUR-RESULT "
#: targets stated in the issue
RSS_GROWTH_TARGET_MB = 50.0
FIRST_LOOKUP_TARGET_MS = 150.0
LOOKUP_P50_TARGET_MS = 8.0

# one question and a paraphrase of it (parts 2 and 3)
QUESTION = "How do I reset my password?"
PARAPHRASE = "how can I reset my password"
ANSWER = "Open Settings > Account and choose 'Forgot password'."

_VERBS = ["reset", "renew", "cancel", "update", "transfer"]
_VERBS += ["recover", "replace", "export", "share", "delete"]
_THINGS = ["password", "invoice", "router", "passport", "mortgage", "laptop", "visa"]
_THINGS += ["subscription", "bank card", "email account", "phone plan", "car insurance"]
_THINGS += ["library card", "tax return", "driving licence", "apartment lease"]
_THINGS += ["gym membership", "cloud backup", "domain name", "health plan"]
_WHERE = ["online", "from my phone", "at the branch", "while abroad", "before the deadline"]


# ---------------------------------------------------------------------------- pure parts
def questions(n: int) -> list[str]:
    """``n`` distinct templated questions (at most 1,000: 10 verbs x 20 things x 5 places)."""
    combos = [(v, t, w) for t in _THINGS for v in _VERBS for w in _WHERE]
    if n > len(combos):
        raise ValueError(f"at most {len(combos)} distinct questions")
    return [f"How do I {v} my {t} {w}?" for v, t, w in combos[:n]]


def paraphrases(n: int, of: int) -> list[str]:
    """``n`` distinct rewordings of questions spread over the first ``of`` of
    :func:`questions` (none of them equal to a stored text)."""
    combos = [(v, t, w) for t in _THINGS for v in _VERBS for w in _WHERE][:of]
    step = max(1, of // max(n, 1))
    picked = dict.fromkeys(combos[(i * step + i % len(_WHERE)) % of] for i in range(n))
    return [f"what is the way to {v} my {t} {w}" for v, t, w in picked]


def proc_status(text: str) -> dict[str, float]:
    """``VmRSS`` (MB) and ``Threads`` from the text of ``/proc/<pid>/status``."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "VmRSS":
            out["rss_mb"] = int(value.split()[0]) / 1024  # kB
        elif key == "Threads":
            out["threads"] = float(int(value.strip()))
    return out


def _self_status() -> dict[str, float]:
    try:
        return proc_status(Path("/proc/self/status").read_text(encoding="utf-8"))
    except OSError:
        return {}


def parse_result(stdout: str) -> dict[str, Any]:
    """The JSON a child printed after :data:`RESULT_TAG` (its last such line)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            value = json.loads(line[len(RESULT_TAG) :])
            if not isinstance(value, dict):
                raise ValueError("a child's result is a JSON object")
            return value
    raise ValueError("the child printed no result line")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def heavy_packages(names: Iterable[str]) -> list[str]:
    """The names among ``names`` that are torch, triton or a CUDA (``nvidia-*``) wheel."""
    return sorted({normalize(n) for n in names if HEAVY.match(normalize(n))})


def pct(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation); 0.0 for no samples."""
    if not samples:
        return 0.0
    xs = sorted(samples)
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def median(samples: Sequence[float]) -> float:
    return float(statistics.median(samples)) if samples else 0.0


def _tree_size(root: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _largest(site: Path, top: int = 3) -> list[tuple[str, float]]:
    """The ``top`` largest entries of site-packages (folders and files), in MB."""
    sizes: list[tuple[str, float]] = []
    for entry in site.iterdir():
        if entry.name.endswith((".dist-info", ".pth")) or entry.name == "__pycache__":
            continue
        size = _tree_size(entry) if entry.is_dir() else entry.lstat().st_size
        sizes.append((entry.name, size / 1e6))
    return sorted(sizes, key=lambda x: -x[1])[:top]


# ---------------------------------------------------------------------------- children
def _emit(result: dict[str, Any]) -> None:
    sys.stdout.write(RESULT_TAG + json.dumps(result) + "\n")
    sys.stdout.flush()


def _child_caches(args: dict[str, Any], start: dict[str, float], import_s: float) -> None:
    import threading

    from agent_cache.cache import LayeredCache
    from agent_cache.embedders import shared_embedders

    base = Path(args["dir"])
    marks = sorted(set(int(m) for m in args["marks"]))
    rows: list[dict[str, Any]] = [
        {"after": "interpreter start", **start},
        {"after": "import agent_cache", **_self_status(), "py_threads": threading.active_count()},
    ]
    import onnxruntime  # noqa: F401 - its import starts a native thread (once per process)

    rows.append(
        {"after": "import onnxruntime", **_self_status(), "py_threads": threading.active_count()}
    )
    hits = 0
    began = time.perf_counter()
    for i in range(1, marks[-1] + 1):
        cache = LayeredCache(path=base / str(i))
        cache.store(QUESTION, ANSWER)
        hits += cache.lookup(PARAPHRASE) is not None
        cache.close()
        if i in marks:
            rows.append(
                {
                    "after": i,
                    **_self_status(),
                    "py_threads": threading.active_count(),
                    "shared": sum(shared_embedders().values()),
                    "elapsed_s": time.perf_counter() - began,
                }
            )
    _emit({"rows": rows, "hits": hits, "caches": marks[-1], "import_s": import_s})


def _child_first(args: dict[str, Any], start: dict[str, float], import_s: float) -> None:
    clock = time.perf_counter
    t0 = clock()
    from agent_cache.cache import LayeredCache

    t1 = clock()
    cache = LayeredCache(path=args["dir"])
    t2 = clock()
    if args["warm"]:
        cache.warm()
    t3 = clock()
    cache.store(QUESTION, ANSWER)
    t4 = clock()
    hit = cache.lookup(PARAPHRASE)
    t5 = clock()
    cache.close()
    _emit(
        {
            "warm": bool(args["warm"]),
            "import_s": import_s + (t1 - t0),
            "construct_s": t2 - t1,
            "warm_s": t3 - t2,
            "store_s": t4 - t3,
            "lookup_s": t5 - t4,
            "first_s": t5 - t3,
            "hit": hit is not None and hit.layer == "semantic",
        }
    )


def _child_embed(args: dict[str, Any], start: dict[str, float], import_s: float) -> None:
    from agent_cache.embedders import embedder_from
    from agent_cache.onnx_embedder import default_threads

    calls = int(args["calls"])
    texts = questions(1000)
    specs = {"onnx": "onnx:all-MiniLM-L6-v2", "torch": "torch:all-MiniLM-L6-v2"}
    embedders: dict[str, Any] = {}
    notes: list[str] = []
    for name, spec in specs.items():
        try:
            embedders[name] = embedder_from(spec, batching=False)
        except Exception as exc:
            notes.append(f"{name}: {type(exc).__name__}: {exc}")
    for e in embedders.values():  # load, first passes
        for text in texts[-10:]:
            e.embed([text])
    torch_mod: Any = None
    torch_threads = None
    if "torch" in embedders:
        import torch

        torch_threads = torch.get_num_threads()
        torch_mod = torch
        # torch as it comes (its own thread count) and on 1 thread, as ONNX Runtime runs here
        embedders["torch-1"] = embedders["torch"]
    samples: dict[str, list[float]] = {name: [] for name in embedders}
    clock = time.perf_counter
    for i in range(calls):  # alternate, each call a question never embedded (no memo hit)
        order = list(embedders.items())
        if i % 2:
            order.reverse()
        for j, (name, e) in enumerate(order):
            if torch_mod is not None:
                torch_mod.set_num_threads(1 if name == "torch-1" else torch_threads)
            t = clock()
            e.embed([texts[(i * len(order) + j) % len(texts)]])
            samples[name].append(clock() - t)
    _emit(
        {
            "calls": calls,
            "p50_ms": {k: pct(v, 50) * 1e3 for k, v in samples.items()},
            "p95_ms": {k: pct(v, 95) * 1e3 for k, v in samples.items()},
            "threads": {"onnx": default_threads(), "torch": torch_threads},
            "notes": notes,
        }
    )


def _child_lookup(args: dict[str, Any], start: dict[str, float], import_s: float) -> None:
    from agent_cache.cache import LayeredCache

    entries, lookups = int(args["entries"]), int(args["lookups"])
    cache = LayeredCache(path=args["dir"]).warm()
    t = time.perf_counter()
    cache.store_many((q, f"answer to: {q}") for q in questions(entries))
    fill_s = time.perf_counter() - t
    for q in ("what is the way to reset my parking permit", "how to renew a fishing license"):
        cache.lookup(q)  # the search path's first pass
    samples: list[float] = []
    hits = 0
    clock = time.perf_counter
    for q in paraphrases(lookups, entries):
        t = clock()
        hit = cache.lookup(q)
        samples.append(clock() - t)
        hits += hit is not None
    cache.close()
    _emit(
        {
            "entries": entries,
            "lookups": len(samples),
            "fill_s": fill_s,
            "p50_ms": pct(samples, 50) * 1e3,
            "p95_ms": pct(samples, 95) * 1e3,
            "hits": hits,
        }
    )


_CHILDREN: dict[str, Callable[[dict[str, Any], dict[str, float], float], None]] = {
    "caches": _child_caches,
    "first": _child_first,
    "embed": _child_embed,
    "lookup": _child_lookup,
}

# The child's first lines: /proc/self/status of the bare interpreter, then the import.
_BOOT = (
    "import sys, time\n"
    "s = open('/proc/self/status').read() if sys.platform == 'linux' else ''\n"
    "t = time.perf_counter()\n"
    "import agent_cache\n"
    "t = time.perf_counter() - t\n"
    "from agent_cache.bench.first_hour import child_main\n"
    "child_main(sys.argv[1], sys.argv[2], s, t)\n"
)


def child_main(kind: str, args_json: str, start_status: str, import_s: float) -> None:
    """Entry point of a measuring subprocess (see :data:`_BOOT`); prints its result."""
    _CHILDREN[kind](json.loads(args_json), proc_status(start_status), import_s)


def _run_child(kind: str, args: dict[str, Any], timeout: float = 900) -> dict[str, Any]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    proc = subprocess.run(
        [sys.executable, "-c", _BOOT, kind, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if proc.returncode != 0:
        from agent_cache.errors import BackendError

        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise BackendError(f"bench first-hour: the {kind!r} process failed:\n{tail}")
    return parse_result(proc.stdout)


# ---------------------------------------------------------------------------- 1. install
#: what the wheel is built from (copied, so the build leaves nothing in the repository)
_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "agent_cache", "integrations")


def _clean_env() -> dict[str, str]:
    """This environment without what would let a fresh venv see the repository or the
    dev venv (``PYTHONPATH``: pip would take the repository for an installed agent-cache)."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _pip(python: Path, *argv: str, log_file: Path) -> tuple[int, float]:
    t = time.perf_counter()
    with open(log_file, "a", encoding="utf-8") as fh:
        rc = subprocess.run(
            [str(python), "-m", "pip", *argv],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=_clean_env(),
        ).returncode
    return rc, time.perf_counter() - t


def _tail(path: Path, lines: int = 12) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def _who_requires(report: dict[str, Any], heavy: Sequence[str]) -> dict[str, list[str]]:
    """For each heavy package, the packages of a pip ``--report`` that require it."""
    out: dict[str, list[str]] = {h: [] for h in heavy}
    for item in report.get("install", []):
        meta = item.get("metadata", {})
        for req in meta.get("requires_dist", []) or []:
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
            if m and normalize(m.group(1)) in out and ";" not in req:
                out[normalize(m.group(1))].append(normalize(meta.get("name", "?")))
    return out


def _install_one(
    label: str, extra: str, wheel: Path, constraints: Path, tmp: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    slug = extra or "core"
    venv, log_file = tmp / f"venv-{slug}", tmp / f"pip-{slug}.log"
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=_clean_env())
    venv_s = time.perf_counter() - t
    python = venv / "bin" / "python"
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    report_file = tmp / f"report-{slug}.json"
    rc, dry_s = _pip(
        python, "install", "--dry-run", "--ignore-installed", "--report", str(report_file),
        "-c", str(constraints), target, log_file=log_file,
    )  # fmt: skip
    row: dict[str, Any] = {"label": label, "venv_s": venv_s, "dry_run_s": dry_s}
    if rc != 0:
        row["error"] = f"pip install --dry-run failed:\n{_tail(log_file)}"
        return row
    report = json.loads(report_file.read_text(encoding="utf-8"))
    planned = [normalize(i["metadata"]["name"]) for i in report.get("install", [])]
    heavy = heavy_packages(planned)
    row["planned"] = len(planned)
    if heavy:  # a finding: never install them, say who pulls them in
        row["heavy"] = heavy
        row["required_by"] = _who_requires(report, heavy)
        row["error"] = "would install " + ", ".join(heavy) + " (not installed)"
        log(f"  {label}: {row['error']}, required by {row['required_by']}")
        return row
    rc, install_s = _pip(python, "install", "-c", str(constraints), target, log_file=log_file)
    if rc != 0:
        row["error"] = f"pip install failed:\n{_tail(log_file)}"
        return row
    listing = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"],
        capture_output=True, text=True, check=True, env=_clean_env(),
    ).stdout  # fmt: skip
    names = [normalize(p["name"]) for p in json.loads(listing)]
    site = next((venv / "lib").glob("python*/site-packages"))
    row.update(
        install_s=install_s,
        packages=len(names),
        site_mb=_tree_size(site) / 1e6,
        heavy=heavy_packages(names),
        largest=_largest(site),
        pip=next((p["version"] for p in json.loads(listing) if p["name"] == "pip"), "?"),
    )
    log(
        f"  {label}: {install_s:.1f} s, {len(names)} packages, {row['site_mb']:.0f} MB, "
        f"heavy: {row['heavy'] or 'none'}"
    )
    return row


def _bench_install(repo: Path, tmp: Path, log: Callable[[str], None]) -> dict[str, Any]:
    constraints = repo / "constraints.txt"
    wheels, source = tmp / "wheel", tmp / "source"
    source.mkdir(parents=True)
    for name in _SOURCES:
        if (repo / name).is_dir():
            shutil.copytree(
                repo / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        elif (repo / name).is_file():
            shutil.copy2(repo / name, source / name)
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", str(source), "-w", str(wheels)],
        capture_output=True, text=True, env=_clean_env(),
    )  # fmt: skip
    wheel_s = time.perf_counter() - t
    if proc.returncode != 0:
        from agent_cache.errors import BackendError

        raise BackendError(f"pip wheel failed:\n{(proc.stderr or proc.stdout)[-2000:]}")
    (wheel,) = wheels.glob("agent_cache-*.whl")
    rows = [
        _install_one(label, extra, wheel, constraints, tmp, log)
        for label, extra in INSTALL_SETS.items()
    ]
    return {
        "wheel": wheel.name,
        "wheel_s": wheel_s,
        "wheel_mb": wheel.stat().st_size / 1e6,
        "rows": rows,
    }


# ---------------------------------------------------------------------------- markdown
def _f(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _machine(results: dict[str, Any]) -> str:
    env = results["environment"]
    load = ", ".join(f"{stage} {v}" for stage, v in results["load"] if v is not None)
    return (
        f"Measured {env['date']} on {env['cpus']} CPUs ({env['cpu']}), {env['platform']}, "
        f"Python {env['python']}, agent-cache {env['agent-cache']}; 1-minute load average "
        f"{load} (other work on a shared machine, or ours). Command: "
        f"`agent-cache bench first-hour{' --skip-install' if results['install'] is None else ''}`"
        f"; the run took {results['elapsed_s'] / 60:.1f} min."
    )


def _render_install(inst: dict[str, Any] | None) -> list[str]:
    if inst is None:
        return ["**Install**: not measured in this run (`--skip-install`).", ""]
    pip_versions = sorted({r["pip"] for r in inst["rows"] if "pip" in r})
    out = [
        f"**Install** (the repository built once as a wheel, `pip wheel --no-deps` on a copy "
        f"of its sources: "
        f"{inst['wheel']}, {inst['wheel_mb']:.2f} MB, {inst['wheel_s']:.0f} s; then for each "
        "set a fresh `python -m venv` in a temporary directory and `pip install -c "
        "constraints.txt WHEEL[extra]`, pip "
        f"{', '.join(pip_versions) or '?'} as the venv brings it, **with a warm pip "
        "cache** (no download; a first install over the network takes longer). A dry run "
        "(`pip install --dry-run --report`) checks first that no torch, triton or "
        "`nvidia-*` package would come in. Packages: `pip list` of the venv, pip and "
        "setuptools included; size: the files under site-packages):",
        "",
        "| install | seconds | packages | site-packages MB | torch / triton / nvidia-* | "
        "largest in site-packages (MB) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for r in inst["rows"]:
        if "install_s" not in r:
            out.append(f"| `{r['label']}` | n/a | n/a | n/a | {r.get('error', '?')} | |")
            continue
        heavy = ", ".join(r["heavy"]) if r["heavy"] else "none"
        largest = ", ".join(f"{n} {mb:.0f}" for n, mb in r["largest"])
        out.append(
            f"| `{r['label']}` | {r['install_s']:.1f} | {r['packages']} | "
            f"{r['site_mb']:.0f} | {heavy} | {largest} |"
        )
    findings = [r for r in inst["rows"] if r.get("required_by")]
    for r in findings:
        out.append("")
        out.append(
            f"`{r['label']}` would bring {', '.join(r['heavy'])}: required by "
            + "; ".join(f"{h} ← {', '.join(by) or '?'}" for h, by in r["required_by"].items())
            + "."
        )
    out.append("")
    return out


def _render_caches(cc: dict[str, Any]) -> list[str]:
    out = [
        f"**Memory and threads** ({cc['caches']} caches, one after the other, in one fresh "
        "process: `LayeredCache(path=tmp/i)` with the default embedder, one `store()` and one "
        "paraphrase `lookup()`, then `close()`; VmRSS and Threads from `/proc/self/status`; "
        f"{cc['hits']} of {cc['caches']} lookups were semantic hits):",
        "",
        "| after | RSS MB | threads (OS) | Python threads | shared embedders left |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in cc["rows"]:
        after = r["after"] if isinstance(r["after"], str) else f"{r['after']} caches closed"
        py = r.get("py_threads")
        shared = r.get("shared")
        out.append(
            f"| {after} | {_f(r.get('rss_mb'))} | {_f(r.get('threads'), 0)} | "
            f"{'' if py is None else py} | {'' if shared is None else shared} |"
        )
    out.append("")
    return out


def _first_stats(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    keys = ("import_s", "construct_s", "warm_s", "store_s", "lookup_s", "first_s")
    return {k: median([r[k] for r in runs]) * 1e3 for k in keys}


def _render_first(first: dict[str, Any]) -> list[str]:
    warm, cold = _first_stats(first["warm"]), _first_stats(first["cold"])
    n = len(first["warm"])
    hits = sum(r["hit"] for r in first["warm"] + first["cold"])
    return [
        f"**First lookup in a new process** (median of {n} fresh processes each way, "
        "alternating; each a new cache directory; ms; the store embeds the question, the "
        f"lookup a paraphrase of it: {hits} of {2 * n} were semantic hits):",
        "",
        "| path | import agent_cache | `LayeredCache(path=...)` | `warm()` | first `store()` "
        "| first `lookup()` | first store + lookup |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| with `warm()` | {_f(warm['import_s'], 0)} | {_f(warm['construct_s'])} | "
        f"{_f(warm['warm_s'], 0)} | {_f(warm['store_s'])} | {_f(warm['lookup_s'])} | "
        f"**{_f(warm['first_s'])}** |",
        f"| without (the cold path) | {_f(cold['import_s'], 0)} | {_f(cold['construct_s'])} "
        f"| - | {_f(cold['store_s'])} | {_f(cold['lookup_s'])} | **{_f(cold['first_s'])}** |",
        "",
    ]


def _render_context(emb: dict[str, Any], look: dict[str, Any]) -> list[str]:
    p50, p95 = emb["p50_ms"], emb["p95_ms"]
    out = [
        f"**For context** (one process each; ms): one embedding, one question per call, "
        f"{emb['calls']} distinct questions per backend, the backends alternating call by "
        f"call (`embedder_from(..., batching=False)`; ONNX Runtime on "
        f"{emb['threads']['onnx']} intra-op thread(s), torch on "
        f"{emb['threads']['torch'] or 'n/a'}); and `LayeredCache.lookup` (default cache, "
        f"after `warm()`) of {look['lookups']} unseen paraphrases at {look['entries']:,} "
        f"stored entries (templated questions, bulk-loaded in {look['fill_s']:.1f} s; "
        f"{look['hits']} of {look['lookups']} lookups were hits):",
        "",
        "| measure | p50 | p95 |",
        "|---|---:|---:|",
    ]
    torch_n = emb["threads"]["torch"]
    labels = {
        "onnx": "ONNX Runtime (the default)",
        "torch": f"torch, as it comes ({torch_n} threads)",
        "torch-1": "torch, 1 thread",
    }
    for name, label in labels.items():
        if name in p50:
            out.append(f"| one embedding, {label} | {p50[name]:.2f} | {p95[name]:.2f} |")
    for name in ("torch", "torch-1"):
        if "onnx" in p50 and name in p50 and p50["onnx"] > 0:
            out.append(f"| {labels[name]} / ONNX (p50) | {p50[name] / p50['onnx']:.2f}× | |")
    out.append(
        f"| `lookup()` at {look['entries']:,} entries | {look['p50_ms']:.2f} | "
        f"{look['p95_ms']:.2f} |"
    )
    for note in emb["notes"]:
        out.append(f"\nNot measured: {note}")
    out.append("")
    return out


def verdicts(results: dict[str, Any]) -> list[str]:
    """One sentence per target: the number measured and whether it is met."""
    out: list[str] = []
    inst = results.get("install")
    if inst is not None:
        rows = inst["rows"]
        bad = [r["label"] for r in rows if r.get("heavy") or r.get("error")]
        out.append(
            "No torch, triton or `nvidia-*` package in any of the four installs: "
            + (_met(True) if not bad else f"{_met(False)} ({', '.join(bad)})")
            + "."
        )
    rows = results["caches"]["rows"]
    by = {r["after"]: r for r in rows}
    marks = [r["after"] for r in rows if isinstance(r["after"], int)]
    first_mark, last_mark = marks[0], marks[-1]
    growth = by[last_mark]["rss_mb"] - by[first_mark]["rss_mb"]
    base = by.get("import onnxruntime", by["import agent_cache"])
    start_threads = base["threads"]
    end_threads = by[last_mark]["threads"]
    out.append(
        f"RSS from {first_mark} to {last_mark} caches: {growth:+.1f} MB (target < "
        f"{RSS_GROWTH_TARGET_MB:.0f} MB): {_met(growth < RSS_GROWTH_TARGET_MB)}. Threads after "
        f"{last_mark} closed: {end_threads:.0f}, at the start {start_threads:.0f} (after "
        f"`import agent_cache` and `import onnxruntime`: numpy's BLAS and ONNX Runtime each "
        f"start one native thread at import, once per process): "
        f"{_met(end_threads <= start_threads)}."
    )
    warm = _first_stats(results["first"]["warm"])
    cold = _first_stats(results["first"]["cold"])
    out.append(
        f"First store + lookup after `warm()`: {warm['first_s']:.1f} ms (target < "
        f"{FIRST_LOOKUP_TARGET_MS:.0f} ms): {_met(warm['first_s'] < FIRST_LOOKUP_TARGET_MS)}; "
        f"without `warm()` it takes {cold['first_s']:.0f} ms, and `warm()` itself "
        f"{warm['warm_s']:.0f} ms (the cost moves to start-up, it does not go away)."
    )
    look = results["lookup"]
    ok = look["p50_ms"] <= LOOKUP_P50_TARGET_MS * 1.1
    line = (
        f"`lookup()` p50 at {look['entries']:,} entries: {look['p50_ms']:.2f} ms (target "
        f"~{LOOKUP_P50_TARGET_MS:.0f} ms): {_met(ok)}."
    )
    embed = results["embed"]["p50_ms"].get("onnx")
    loads = [v for _, v in results["load"] if v is not None]
    if not ok and embed is not None:
        line += (
            f" One lookup embeds one question, and one embedding alone took {embed:.1f} ms "
            f"p50 in this run (2.9 ms on an idle run of these cores, `onnx_embedder."
            f"default_threads`) with the 1-minute load up to {max(loads, default=0):.1f} on "
            f"{results['environment']['cpus']} CPUs: the miss is the busy machine as much "
            "as the lookup path; compare the ratios, not the absolute times."
        )
    out.append(line)
    torch = results["embed"]["p50_ms"]
    if "torch" in torch and "torch-1" in torch and torch["torch"] > 1.5 * torch["torch-1"]:
        out.append(
            f"torch on its default {results['embed']['threads']['torch']} threads is "
            f"{torch['torch'] / torch['torch-1']:.1f}x slower per question than on 1 thread "
            "here (its threads contend with the rest of the machine)."
        )
    return out


def render(results: dict[str, Any]) -> str:
    lines = [
        SECTION_START,
        "## First hour: install, memory, first lookup",
        "",
        _machine(results),
        "",
    ]
    lines += _render_install(results.get("install"))
    lines += _render_caches(results["caches"])
    lines += _render_first(results["first"])
    lines += _render_context(results["embed"], results["lookup"])
    lines.append("**Against the targets.** " + " ".join(verdicts(results)))
    lines.append(SECTION_END)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- entry point
def run_first_hour_bench(
    *,
    out: Path,
    skip_install: bool = False,
    repo: Path | None = None,
    runs: int = 5,
    caches: Sequence[int] = (1, 10, 100),
    calls: int = 200,
    entries: int = 1000,
    lookups: int = 200,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the first-hour benchmark, print it and write its section of ``out``.

    Args:
        out: the markdown file (``docs/benchmarks.md``); only our section is replaced.
        skip_install: leave out part 1 (fresh venvs; it takes minutes).
        repo: the repository root to build the wheel from (default: the current
            directory, which must hold ``pyproject.toml`` and ``constraints.txt``).
        runs: fresh processes per first-lookup path.
        caches: the counts of caches after which memory and threads are read.
        calls: single-question embeddings per backend.
        entries, lookups: the stored entries and the timed lookups of part 4.
        log: progress printer.

    Returns:
        Every measurement, JSON-ready, plus ``"markdown"`` (the section written).
    """
    from agent_cache.bench.core import _environment, _load1, finish_run
    from agent_cache.errors import ConfigurationError

    if runs < 1 or calls < 1 or lookups < 1 or not caches or min(caches) < 1:
        raise ConfigurationError("runs, calls, lookups and cache counts must be positive")
    if not 1 <= entries <= len(questions(1000)):
        raise ConfigurationError("entries: 1 to 1000 (distinct templated questions)")
    root = Path.cwd() if repo is None else Path(repo)
    if not skip_install and not (
        (root / "pyproject.toml").is_file() and (root / "constraints.txt").is_file()
    ):
        raise ConfigurationError(
            f"bench first-hour builds the wheel of the repository: {root} has no "
            "pyproject.toml + constraints.txt (run from the repository root) - or pass "
            "--skip-install"
        )
    began = time.perf_counter()
    results: dict[str, Any] = {
        "environment": _environment(),
        "load": [("start", _load1())],
        "install": None,
    }
    with tempfile.TemporaryDirectory(prefix="agent-cache-first-hour-") as tmpdir:
        tmp = Path(tmpdir)
        if not skip_install:
            log("install: wheel, then a fresh venv per set ...")
            results["install"] = _bench_install(root, tmp / "install", log)
            shutil.rmtree(tmp / "install", ignore_errors=True)
            results["load"].append(("after install", _load1()))
        log(f"memory and threads: {max(caches)} caches opened, used, closed ...")
        results["caches"] = _run_child(
            "caches", {"dir": str(tmp / "caches"), "marks": sorted(set(caches))}
        )
        for r in results["caches"]["rows"]:
            log(f"  after {r['after']}: {r.get('rss_mb', 0):.1f} MB, {r.get('threads')} threads")
        log(f"first lookup: {runs} fresh processes with warm(), {runs} without ...")
        first: dict[str, list[dict[str, Any]]] = {"warm": [], "cold": []}
        for i in range(runs):
            for mode in ("warm", "cold") if i % 2 == 0 else ("cold", "warm"):
                r = _run_child(
                    "first", {"dir": str(tmp / f"first-{mode}-{i}"), "warm": mode == "warm"}
                )
                first[mode].append(r)
                log(f"  {mode}: first store + lookup {r['first_s'] * 1e3:.1f} ms")
        results["first"] = first
        log(f"one embedding, ONNX vs torch ({calls} calls each) ...")
        results["embed"] = _run_child("embed", {"calls": calls})
        log(f"  p50 ms: {results['embed']['p50_ms']}")
        log(f"lookup at {entries} entries ...")
        results["lookup"] = _run_child(
            "lookup", {"dir": str(tmp / "lookup"), "entries": entries, "lookups": lookups}
        )
        log(f"  p50 {results['lookup']['p50_ms']:.2f} ms, hits {results['lookup']['hits']}")
    finish_run(results, began, render, out, log, start_marker=SECTION_START, end_marker=SECTION_END)
    log(f"wrote {out} in {results['elapsed_s'] / 60:.1f} min")
    return results
