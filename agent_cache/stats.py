"""Metrics for every step: hits per layer, misses, pass-through, latency, tokens saved.

``CacheStats`` is a snapshot; ``str(stats)`` is a plain-text table and in Jupyter it renders
as an HTML table.
"""

from __future__ import annotations

import html
import threading
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CacheStats", "StatsRecorder"]

LAYERS = ("exact", "template", "semantic")
_SAMPLES = 4096


def _percentile(values: Iterable[float], q: float) -> float | None:
    data = sorted(values)
    if not data:
        return None
    idx = min(len(data) - 1, max(0, round(q * (len(data) - 1))))
    return data[idx]


@dataclass(frozen=True)
class CacheStats:
    """A snapshot of the cache's counters."""

    lookups: int
    hits: dict[str, int]
    misses: int
    bypassed: int
    control: int
    stores: int
    skipped_stores: int
    errors: int
    refused: dict[str, int]
    shadow: dict[str, int]
    tokens_saved: int
    latency_ms: dict[str, dict[str, float | None]]
    kv: dict[str, int] = field(default_factory=dict)
    feedback: dict[str, int] = field(default_factory=dict)
    evicted: int = 0
    audited: int = 0
    explored: int = 0

    @property
    def hit_rate(self) -> float:
        served = sum(self.hits.values())
        return served / self.lookups if self.lookups else 0.0

    @property
    def kv_hit_rate(self) -> float:
        prompt = self.kv.get("prompt_tokens", 0)
        return self.kv.get("cached_tokens", 0) / prompt if prompt else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "lookups": self.lookups,
            "hits": dict(self.hits),
            "hit_rate": self.hit_rate,
            "misses": self.misses,
            "bypassed": self.bypassed,
            "control": self.control,
            "stores": self.stores,
            "skipped_stores": self.skipped_stores,
            "errors": self.errors,
            "refused": dict(self.refused),
            "shadow": dict(self.shadow),
            "tokens_saved": self.tokens_saved,
            "latency_ms": {k: dict(v) for k, v in self.latency_ms.items()},
            "kv": dict(self.kv),
            "kv_hit_rate": self.kv_hit_rate,
            "feedback": dict(self.feedback),
            "evicted": self.evicted,
            "audited": self.audited,
            "explored": self.explored,
        }

    def _rows(self) -> list[tuple[str, str]]:
        rows = [("lookups", str(self.lookups))]
        for layer in LAYERS:
            rows.append((f"hits: {layer}", str(self.hits.get(layer, 0))))
        rows += [
            ("misses", str(self.misses)),
            ("hit rate", f"{self.hit_rate:.1%}"),
            ("bypassed (policy)", str(self.bypassed)),
            ("control group", str(self.control)),
            ("stores / skipped", f"{self.stores} / {self.skipped_stores}"),
            ("store errors (served as misses)", str(self.errors)),
            ("tokens saved", str(self.tokens_saved)),
        ]
        for name, n in sorted(self.refused.items()):
            rows.append((f"refused by {name}", str(n)))
        for name, n in sorted(self.shadow.items()):
            rows.append((f"shadow: {name}", str(n)))
        if self.audited or self.explored:
            rows.append(("audited / explored (judged)", f"{self.audited} / {self.explored}"))
        for name, n in sorted(self.feedback.items()):
            rows.append((f"feedback: {name}", str(n)))
        if self.evicted:
            rows.append(("evicted by feedback", str(self.evicted)))
        for layer, lat in self.latency_ms.items():
            p50, p95 = lat.get("p50"), lat.get("p95")
            if p50 is not None and p95 is not None:
                rows.append((f"latency {layer} p50 / p95", f"{p50:.2f} / {p95:.2f} ms"))
        if self.kv.get("prompt_tokens"):
            rows.append(("KV layer (vLLM cached tokens)", f"{self.kv_hit_rate:.1%}"))
        return rows

    def __str__(self) -> str:
        rows = self._rows()
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in self._rows()
        )
        return f"<table><thead><tr><th>metric</th><th>value</th></tr></thead>{body}</table>"


class StatsRecorder:
    """Thread-safe counters and bounded latency samples behind :class:`CacheStats`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with getattr(self, "_lock", threading.Lock()):
            self._c: Counter[str] = Counter()
            self._lat: dict[str, deque[float]] = {}

    def incr(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._c[name] += n

    def latency(self, name: str, seconds: float) -> None:
        with self._lock:
            self._lat.setdefault(name, deque(maxlen=_SAMPLES)).append(seconds * 1000.0)

    def get(self, name: str) -> int:
        with self._lock:
            return self._c[name]

    def snapshot(self) -> CacheStats:
        with self._lock:
            c = Counter(self._c)
            lat = {k: list(v) for k, v in self._lat.items()}

        def group(prefix: str) -> dict[str, int]:
            return {k[len(prefix) :]: v for k, v in c.items() if k.startswith(prefix)}

        hits = {layer: 0 for layer in LAYERS}
        hits.update(group("hit:"))
        return CacheStats(
            lookups=c["lookups"],
            hits=hits,
            misses=c["misses"],
            bypassed=c["bypassed"],
            control=c["control"],
            stores=c["stores"],
            skipped_stores=c["skipped_stores"],
            errors=c["errors"],
            refused=group("refused:"),
            shadow=group("shadow:"),
            tokens_saved=c["tokens_saved"],
            latency_ms={
                k: {"p50": _percentile(v, 0.5), "p95": _percentile(v, 0.95), "n": float(len(v))}
                for k, v in sorted(lat.items())
            },
            kv={"prompt_tokens": c["kv_prompt_tokens"], "cached_tokens": c["kv_cached_tokens"]},
            feedback=group("feedback:"),
            evicted=c["evicted"],
            audited=c["audited"],
            explored=c["explored"],
        )
