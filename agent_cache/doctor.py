"""``agent-cache doctor``: what this install runs, and whether it is the fast path.

A user should not have to guess which embedder a plain ``pip install agent-cache`` runs,
whether torch or CUDA libraries came along, or whether a compiled llama.cpp suits this
CPU. :func:`report` answers each as one line (``ok`` / ``note`` / ``problem``); with
``load=True`` it also loads the default embedder, times one embedding, and says where
the model's files came from.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import platform
import time
from dataclasses import dataclass
from typing import Literal

__all__ = ["Finding", "report"]

Level = Literal["ok", "note", "problem"]


@dataclass(frozen=True)
class Finding:
    level: Level
    topic: str
    text: str

    def __str__(self) -> str:
        return f"[{self.level:>7}] {self.topic}: {self.text}"


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _packages() -> list[Finding]:
    out = [
        Finding("ok", "agent-cache", _version("agent-cache") or "not installed (source tree)"),
        Finding("ok", "python", f"{platform.python_version()} on {platform.machine()}"),
    ]
    torch = _version("torch")
    cuda = sorted(
        d.metadata["Name"]
        for d in md.distributions()
        if str(d.metadata["Name"] or "").lower().startswith(("nvidia-", "triton"))
    )
    if cuda:
        out.append(
            Finding(
                "note",
                "cuda",
                f"{len(cuda)} CUDA packages installed ({', '.join(cuda[:3])}...): the "
                "default embedder does not use them; an extra that needs torch pulled them",
            )
        )
    out.append(
        Finding(
            "ok",
            "torch",
            f"{torch} (used only by embedder='torch:...', rerankers, train-verifier)"
            if torch
            else "not installed (not needed: the default embedder runs on ONNX Runtime)",
        )
    )
    return out


def _llama() -> list[Finding]:
    if importlib.util.find_spec("llama_cpp") is None:
        return [Finding("ok", "llama.cpp", "not installed (only the demo and tests use it)")]
    flags = _cpu_flags()
    wide = sorted(f for f in flags if f.startswith(("avx512", "amx")))
    text = f"llama-cpp-python {_version('llama-cpp-python')}"
    if wide:
        text += (
            f"; this CPU has {', '.join(wide[:4])}: a build made with GGML_NATIVE on it "
            "crashes on hosts without them (check: python scripts/check_llama_build.py)"
        )
    return [Finding("ok", "llama.cpp", text)]


def _embedder() -> list[Finding]:
    from agent_cache.embedders import DEFAULT_EMBEDDER, embedder_from
    from agent_cache.onnx_embedder import OnnxEmbedder

    embedder = embedder_from(DEFAULT_EMBEDDER, batching=False)
    inner = getattr(embedder, "inner", embedder)
    started = time.perf_counter()
    try:
        embedder.embed(["How do I reset my password?"])
    except Exception as exc:
        return [Finding("problem", "embedder", f"{DEFAULT_EMBEDDER} failed to load: {exc}")]
    loaded = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    embedder.embed(["How can I reset my password?"])
    one = (time.perf_counter() - started) * 1000
    backend = str(getattr(inner, "backend", type(inner).__name__))
    source = str(getattr(inner, "source", ""))
    level: Level = (
        "ok" if isinstance(inner, OnnxEmbedder) and backend.startswith("onnx") else "problem"
    )
    text = (
        f"{DEFAULT_EMBEDDER} on {backend} (load {loaded:.0f} ms, one embedding "
        f"{one:.1f} ms){'; files from ' + source if source else ''}"
    )
    if level == "problem":
        text += "; expected ONNX Runtime: a 10-50x slower path is running"
    close = getattr(embedder, "close", None)
    if callable(close):
        close()
    return [Finding(level, "embedder", text)]


def report(*, load: bool = True) -> list[Finding]:
    """Findings about this install; ``load=False`` skips loading the embedding model."""
    findings = _packages() + _llama()
    if load:
        findings += _embedder()
    return findings
