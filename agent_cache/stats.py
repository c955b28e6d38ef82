"""Metrics for every step: hits per layer, misses, refusals, latency, tokens and money saved.

:class:`StatsRecorder` is what the cache reports to: one call per finished lookup
(:meth:`StatsRecorder.request`), one per served answer's savings, one per model call,
and plain counters for everything else, each under its namespace. It keeps in-process
totals and a bounded timeline, and forwards every event to its *sinks* (e.g.
:class:`agent_cache.metrics.PrometheusMetrics`), so the cache itself knows nothing of
Prometheus.

``CacheStats`` is a snapshot: ``str(stats)`` is a plain-text table, in Jupyter it
renders as HTML (``_repr_html_``) and ``rich.print(stats)`` draws ``rich`` tables; each
has the totals and one row per namespace.
"""

from __future__ import annotations

import contextvars
import enum
import html
import json
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_cache import _fork
from agent_cache.savings import KINDS, PriceTable, Usage

__all__ = ["CacheStats", "Event", "NamespaceStats", "StatsRecorder", "StatsSink"]

LAYERS = ("exact", "template", "semantic")


class LookupOutcome(enum.StrEnum):
    """The ``outcome`` of a finished lookup (:meth:`StatsSink.request`; the ``outcome``
    label of ``agent_cache_requests_total``). A lookup whose best candidate was refused
    has the outcome ``"refused_<reason>"`` (:func:`split_outcome`)."""

    HIT = "hit"  # served (``layer`` says which layer)
    MISS = "miss"
    BYPASS = "bypass"  # the policy skipped the cache
    CONTROL = "control"  # the control group (``bypass_rate``)
    ERROR = "error"  # a failing store, served as a miss
    SHADOW = "shadow"  # a semantic hit shadow mode did not serve
    AUDIT = "audit"  # a semantic hit withheld to be judged
    REFUSED = "refused"  # the prefix of ``"refused_<reason>"``


class Count(enum.StrEnum):
    """The names of the plain counters (:meth:`StatsRecorder.incr`): the keys of
    ``stats().counters`` (or of a field of their own) and the ``event`` label of
    ``agent_cache_events_total``. Families with a variable part (``refused:<reason>``,
    ``errors:<cause>``, ``shadow:<verdict>``) are built from their prefix."""

    LOOKUPS = "lookups"
    MISSES = "misses"
    BYPASSED = "bypassed"
    CONTROL = "control"
    LOOKUP_ERRORS = "lookup_errors"
    STORES = "stores"
    SKIPPED_STORES = "skipped_stores"
    ERRORS = "errors"
    TOKENS_SAVED = "tokens_saved"
    COST_SAVED = "cost_saved"
    KV_PROMPT_TOKENS = "kv_prompt_tokens"
    KV_CACHED_TOKENS = "kv_cached_tokens"
    EVICTED = "evicted"
    AUDITED = "audited"
    EXPLORED = "explored"
    COALESCED = "coalesced"
    THRESHOLD_RAISED = "threshold_raised"
    NOT_STORED = "not_stored"
    NOT_EXACT = "not_exact"
    ENCODE_ERRORS = "encode_errors"
    DECODE_ERRORS = "decode_errors"
    RECORD_MISMATCH = "record_mismatch"
    QUOTA_EVICTED = "quota_evicted"
    OVERLOADED = "overloaded"
    FALLBACKS = "fallbacks"
    NEGATIVE_HITS = "negative_hits"
    REFRESHED = "refreshed"
    SHADOW_WOULD_HIT = "shadow:would_hit"
    JUDGE_SERVED = "judge:served"
    JUDGE_REFUSED = "judge:refused"
    FEEDBACK_CORRECT = "feedback:correct"
    FEEDBACK_WRONG = "feedback:wrong"
    REFUSED_PREFIX = "refused:"  # + the reason a candidate was refused for


#: The outcome of a lookup that served an answer (``layer`` says which layer).
HIT = LookupOutcome.HIT.value
#: The outcome of a lookup whose best candidate was refused, ``"refused_<reason>"``.
REFUSED = LookupOutcome.REFUSED.value
_SAMPLES = 4096
_EVENTS = 20_000
_JUDGED = 20_000
_SHOWN = (
    Count.COALESCED,
    Count.THRESHOLD_RAISED,
    Count.NOT_STORED,
    Count.ENCODE_ERRORS,
    Count.DECODE_ERRORS,
)
# counters with a field of their own in CacheStats (not repeated under ``counters``)
_OWN = {
    Count.LOOKUPS,
    Count.MISSES,
    Count.BYPASSED,
    Count.CONTROL,
    Count.STORES,
    Count.SKIPPED_STORES,
    Count.ERRORS,
    Count.TOKENS_SAVED,
    Count.KV_PROMPT_TOKENS,
    Count.KV_CACHED_TOKENS,
    Count.EVICTED,
    Count.AUDITED,
    Count.EXPLORED,
    Count.COST_SAVED,
    Count.LOOKUP_ERRORS,
}
_OWN_PREFIXES = ("hit:", "refused:", "shadow:", "feedback:", "saved:", "outcome:", "control:")

# the outcome of this context's last lookup (a thread, or an asyncio task): a model call
# that follows it is counted in the control group or in the cached traffic
_LAST_OUTCOME: contextvars.ContextVar[str] = contextvars.ContextVar(
    "agent_cache_last_outcome", default=""
)


def _percentile(values: Iterable[float], q: float) -> float | None:
    data = sorted(values)
    if not data:
        return None
    idx = min(len(data) - 1, max(0, round(q * (len(data) - 1))))
    return data[idx]


def _summary(samples: Sequence[float]) -> dict[str, float | None]:
    return {
        "p50": _percentile(samples, 0.5),
        "p95": _percentile(samples, 0.95),
        "p99": _percentile(samples, 0.99),
        "n": float(len(samples)),
    }


@dataclass(frozen=True)
class Event:
    """One finished lookup on the timeline: wall time, namespace, layer, outcome, ms."""

    t: float
    namespace: str
    layer: str
    outcome: str
    ms: float


class StatsSink:
    """Receives every event a :class:`StatsRecorder` records (no-op defaults).

    ``layer`` is ``"exact" | "template" | "semantic"`` for a hit and for a semantic
    refusal, ``"none"`` otherwise; ``outcome`` is ``"hit"``, ``"miss"``,
    ``"refused_<reason>"`` (a miss whose best candidate a reason of
    :data:`agent_cache.differences.REASONS`, or ``"verifier"``, refused), ``"shadow"``
    (a semantic hit shadow mode did not serve), ``"audit"`` (withheld to be judged),
    ``"bypass"`` (policy), ``"control"`` (the control group) or ``"error"`` (a failing
    store, served as a miss).
    """

    def request(self, namespace: str, layer: str, outcome: str, seconds: float) -> None:
        """One finished lookup."""

    def saved(self, namespace: str, kind: str, tokens: int, cost: float) -> None:
        """Tokens (of ``kind``, :data:`agent_cache.savings.KINDS`) and money a hit saved."""

    def model_call(self, namespace: str, seconds: float) -> None:
        """One model call made on a miss."""

    def counter(self, namespace: str, name: str, n: int) -> None:
        """Any other counter (stores, coalesced, judgments, feedback, evictions...)."""

    def kv_tokens(self, prompt_tokens: int, cached_tokens: int) -> None:
        """Prompt tokens a model server saw and how many it served from its KV cache."""

    def entries(self, counts: Mapping[str, int]) -> None:
        """Entries stored, by layer (``"exact"``: records, ``"semantic"``: vectors)."""


@dataclass(frozen=True)
class NamespaceStats:
    """The figures of one namespace (the same meaning as :class:`CacheStats`'s)."""

    lookups: int
    hits: dict[str, int]
    misses: int
    refused: dict[str, int]
    latency_ms: dict[str, dict[str, float | None]]
    tokens_saved: dict[str, int]
    cost_saved: float
    shadow: dict[str, int] = field(default_factory=dict)
    bypassed: int = 0
    control: int = 0

    @property
    def hit_rate(self) -> float:
        return sum(self.hits.values()) / self.lookups if self.lookups else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "lookups": self.lookups, "hits": dict(self.hits), "hit_rate": self.hit_rate,
            "misses": self.misses, "refused": dict(self.refused),
            "latency_ms": {k: dict(v) for k, v in self.latency_ms.items()},
            "tokens_saved": dict(self.tokens_saved), "cost_saved": self.cost_saved,
            "shadow": dict(self.shadow), "bypassed": self.bypassed, "control": self.control,
        }  # fmt: skip


@dataclass(frozen=True)
class CacheStats:
    """A snapshot of the cache's counters.

    ``tokens_saved`` is the total; ``tokens`` splits it by kind (``input``/``output``
    measured from the usage the model reported, ``total`` reported unsplit,
    ``estimated`` from the answer's length when nothing was reported). ``control_group``
    puts the control group's latency and tokens per request beside the cached
    traffic's. ``counters`` holds the rest (``coalesced``,
    ``not_stored``, ``encode_errors``, ``decode_errors``, ...).
    """

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
    tokens: dict[str, int] = field(default_factory=dict)
    cost_saved: float = 0.0
    namespaces: dict[str, NamespaceStats] = field(default_factory=dict)
    control_group: dict[str, dict[str, float | None]] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    events: tuple[Event, ...] = field(default=(), repr=False)
    judged: tuple[tuple[float, bool], ...] = field(default=(), repr=False)

    @property
    def hit_rate(self) -> float:
        served = sum(self.hits.values())
        return served / self.lookups if self.lookups else 0.0

    @property
    def kv_hit_rate(self) -> float:
        prompt = self.kv.get("prompt_tokens", 0)
        return self.kv.get("cached_tokens", 0) / prompt if prompt else 0.0

    @property
    def coalesced(self) -> int:
        return self.counters.get("coalesced", 0)

    @property
    def not_stored(self) -> int:
        """Computed values an ``encode`` returned :data:`agent_cache.NOT_STORED` for."""
        return self.counters.get("not_stored", 0)

    def as_dict(self) -> dict[str, Any]:
        """Everything but the timeline, JSON-serializable."""
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
            "tokens": dict(self.tokens),
            "cost_saved": self.cost_saved,
            "latency_ms": {k: dict(v) for k, v in self.latency_ms.items()},
            "kv": dict(self.kv),
            "kv_hit_rate": self.kv_hit_rate,
            "feedback": dict(self.feedback),
            "evicted": self.evicted,
            "audited": self.audited,
            "explored": self.explored,
            "control_group": {k: dict(v) for k, v in self.control_group.items()},
            "counters": dict(self.counters),
            "namespaces": {ns: s.as_dict() for ns, s in self.namespaces.items()},
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the snapshot, timeline included, as JSON (``agent-cache stats FILE``)."""
        data = self.as_dict()
        data["events"] = [[e.t, e.namespace, e.layer, e.outcome, e.ms] for e in self.events]
        data["judged"] = [[s, a] for s, a in self.judged]
        Path(path).write_text(json.dumps(data) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CacheStats:
        """Read a snapshot written by :meth:`save`."""
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        names = {k for k in cls.__dataclass_fields__ if k not in ("namespaces", "events", "judged")}
        kwargs = {k: v for k, v in d.items() if k in names}
        kwargs["namespaces"] = {
            ns: NamespaceStats(**{k: v for k, v in s.items() if k != "hit_rate"})
            for ns, s in d.get("namespaces", {}).items()
        }
        kwargs["events"] = tuple(Event(*e) for e in d.get("events", []))
        kwargs["judged"] = tuple((float(s), bool(a)) for s, a in d.get("judged", []))
        return cls(**kwargs)

    # ------------------------------------------------------------------ rendering
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
        for kind in KINDS:
            if self.tokens.get(kind):
                rows.append((f"tokens saved: {kind}", str(self.tokens[kind])))
        if self.cost_saved:
            rows.append(("money saved", f"{self.cost_saved:.4f}"))
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
        for name in _SHOWN:
            if self.counters.get(name):
                rows.append((name.replace("_", " "), str(self.counters[name])))
        for layer, lat in self.latency_ms.items():
            p50, p95 = lat.get("p50"), lat.get("p95")
            if p50 is not None and p95 is not None:
                rows.append((f"latency {layer} p50 / p95", f"{p50:.2f} / {p95:.2f} ms"))
        for group, fig in self.control_group.items():
            if fig.get("requests"):
                mean = fig.get("mean_ms")
                rows.append((
                    f"{group}: requests / mean ms / tokens per request",
                    f"{fig['requests']:.0f} / {'-' if mean is None else f'{mean:.1f}'}"
                    f" / {fig.get('tokens_per_request') or 0:.1f}",
                ))  # fmt: skip
        if self.kv.get("prompt_tokens"):
            rows.append(("KV layer (vLLM cached tokens)", f"{self.kv_hit_rate:.1%}"))
        return rows

    _NS_HEAD = (
        "namespace",
        "lookups",
        "exact",
        "template",
        "semantic",
        "misses",
        "hit rate",
        "refused",
        "p50 ms",
        "p95 ms",
        "tokens saved",
        "money saved",
    )

    def _ns_rows(self) -> list[tuple[str, ...]]:
        out = []
        for ns, s in sorted(self.namespaces.items()):
            lat = s.latency_ms.get("all", {})
            p50, p95 = lat.get("p50"), lat.get("p95")
            refused = ", ".join(f"{k} {v}" for k, v in sorted(s.refused.items())) or "-"
            out.append((
                ns, str(s.lookups), *(str(s.hits.get(layer, 0)) for layer in LAYERS),
                str(s.misses), f"{s.hit_rate:.1%}", refused,
                "-" if p50 is None else f"{p50:.2f}", "-" if p95 is None else f"{p95:.2f}",
                str(sum(s.tokens_saved.values())), f"{s.cost_saved:.4f}",
            ))  # fmt: skip
        return out

    def __str__(self) -> str:
        rows = self._rows()
        width = max(len(k) for k, _ in rows)
        text = "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
        ns_rows = self._ns_rows()
        if ns_rows:
            table = [self._NS_HEAD, *ns_rows]
            widths = [max(len(r[i]) for r in table) for i in range(len(self._NS_HEAD))]
            text += "\n\n" + "\n".join(
                "  ".join(f"{c:<{w}}" for c, w in zip(r, widths, strict=True)).rstrip()
                for r in table
            )
        return text

    def _repr_html_(self) -> str:
        esc = html.escape
        body = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in self._rows())
        out = f"<table><thead><tr><th>metric</th><th>value</th></tr></thead>{body}</table>"
        ns_rows = self._ns_rows()
        if ns_rows:
            head = "".join(f"<th>{esc(h)}</th>" for h in self._NS_HEAD)
            rows = "".join(
                "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in ns_rows
            )
            out += f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
        return out

    def __rich__(self) -> Any:
        """``rich.print(cache.stats())``: the totals and the per-namespace table."""
        from rich.console import Group
        from rich.table import Table

        totals = Table(title="agent-cache", show_header=True)
        totals.add_column("metric")
        totals.add_column("value", justify="right")
        for k, v in self._rows():
            totals.add_row(k, v)
        parts: list[Any] = [totals]
        ns_rows = self._ns_rows()
        if ns_rows:
            per = Table(title="per namespace")
            for i, h in enumerate(self._NS_HEAD):
                per.add_column(h, justify="left" if i in (0, 7) else "right")
            for r in ns_rows:
                per.add_row(*r)
            parts.append(per)
        return Group(*parts)


def split_outcome(outcome: str) -> tuple[str, str]:
    """A lookup's outcome as ``(outcome, reason)``: ``"refused_<reason>"`` is
    ``("refused", reason)``, every other outcome has the reason ``""``.

    Example:
        >>> split_outcome("refused_numbers"), split_outcome("hit")
        (('refused', 'numbers'), ('hit', ''))
    """
    if outcome.startswith(REFUSED + "_"):
        return REFUSED, outcome[len(REFUSED) + 1 :]
    return outcome, ""


class StatsRecorder:
    """Thread-safe counters, bounded latency samples and a bounded timeline behind
    :class:`CacheStats`, forwarding every event to ``sinks``.

    Args:
        prices: what a saved token costs per model (:class:`PriceTable`); none: no money.
        sinks: where events also go (e.g. ``PrometheusMetrics()``).
        clock: wall time of timeline events.
    """

    def __init__(
        self,
        prices: PriceTable | None = None,
        sinks: Iterable[StatsSink] = (),
        clock: Any = time.time,
    ) -> None:
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))
        self.prices = prices or PriceTable()
        self.sinks: list[StatsSink] = list(sinks)
        self.clock = clock
        self.last_ms = 0.0  # the latest lookup's latency (for replays)
        self.reset()

    def add_sink(self, sink: StatsSink) -> None:
        with self._lock:
            if sink not in self.sinks:
                self.sinks.append(sink)

    def reset(self) -> None:
        with getattr(self, "_lock", threading.Lock()):
            self._c: Counter[tuple[str, str]] = Counter()
            self._cost: dict[str, float] = {}
            self._busy_ms: dict[str, float] = {"cached": 0.0, "control": 0.0}
            self._lat: dict[tuple[str, str], deque[float]] = {}
            self._events: deque[Event] = deque(maxlen=_EVENTS)
            self._judged: deque[tuple[float, bool]] = deque(maxlen=_JUDGED)

    # ------------------------------------------------------------------ recording
    def incr(self, name: str, n: int = 1, namespace: str = "") -> None:
        name = str(name)  # a Count: its plain value, in the snapshot and the sinks
        with self._lock:
            self._c[(namespace, name)] += n
        for sink in self.sinks:
            sink.counter(namespace, name, n)

    def latency(self, name: str, seconds: float, namespace: str = "") -> None:
        with self._lock:
            self._sample(namespace, name, seconds * 1000.0)

    def _sample(self, namespace: str, name: str, ms: float) -> None:
        self._lat.setdefault((namespace, name), deque(maxlen=_SAMPLES)).append(ms)

    def get(self, name: str) -> int:
        with self._lock:
            return sum(v for (_, k), v in self._c.items() if k == name)

    def request(self, namespace: str, layer: str, outcome: str, seconds: float) -> None:
        """One finished lookup: ``layer`` and ``outcome`` as in :class:`StatsSink`."""
        ms = seconds * 1000.0
        layer, outcome = str(layer), str(outcome)  # a LookupOutcome: its plain value
        _LAST_OUTCOME.set(outcome)
        self.last_ms = ms
        with self._lock:
            c = self._c
            c[(namespace, Count.LOOKUPS.value)] += 1
            c[(namespace, f"outcome:{outcome}")] += 1
            if outcome == LookupOutcome.HIT:
                c[(namespace, f"hit:{layer}")] += 1
                self._sample(namespace, layer, ms)
            elif outcome == LookupOutcome.BYPASS:
                c[(namespace, Count.BYPASSED.value)] += 1
            elif outcome == LookupOutcome.CONTROL:
                c[(namespace, Count.CONTROL.value)] += 1
            else:
                c[(namespace, Count.MISSES.value)] += 1
                self._sample(namespace, "miss", ms)
                if outcome == LookupOutcome.ERROR:
                    c[(namespace, Count.LOOKUP_ERRORS.value)] += 1
            if outcome not in (LookupOutcome.BYPASS, LookupOutcome.CONTROL):
                self._sample(namespace, "all", ms)
                self._busy_ms["cached"] += ms
            self._events.append(Event(self.clock(), namespace, layer, outcome, ms))
        for sink in self.sinks:
            sink.request(namespace, layer, outcome, seconds)

    def saved(self, namespace: str, model: str, usage: Usage | None, estimate: int) -> None:
        """A served hit saved ``usage`` (what its model call reported), or, when nothing
        was reported, about ``estimate`` tokens (counted apart, as ``estimated``)."""
        by_kind = (
            {"input": usage.input, "output": usage.output, "total": usage.total}
            if usage is not None
            else {"estimated": estimate}
        )
        cost = self.prices.cost(model, usage) if usage is not None and self.prices else 0.0
        with self._lock:
            for kind, n in by_kind.items():
                if n:
                    self._c[(namespace, f"saved:{kind}")] += n
                    self._c[(namespace, "tokens_saved")] += n
            self._cost[namespace] = self._cost.get(namespace, 0.0) + cost
        for sink in self.sinks:
            for i, (kind, n) in enumerate((k, v) for k, v in by_kind.items() if v):
                sink.saved(namespace, kind, n, cost if i == 0 else 0.0)

    def model_call(self, namespace: str, seconds: float, usage: Usage | None) -> None:
        """A model call after a lookup: counted in the control group when that lookup
        was one, in the cached traffic otherwise."""
        group = "control" if _LAST_OUTCOME.get() == LookupOutcome.CONTROL else "cached"
        spent = usage.tokens if usage is not None else 0
        with self._lock:
            self._sample(namespace, "model", seconds * 1000.0)
            self._busy_ms[group] += seconds * 1000.0
            self._c[(namespace, f"control:{group}_calls")] += 1
            self._c[(namespace, f"control:{group}_tokens")] += spent
        for sink in self.sinks:
            sink.model_call(namespace, seconds)

    def judged(self, namespace: str, kind: str, similarity: float, agree: bool | None) -> None:
        """A withheld semantic hit judged against the model's answer (``kind``: shadow,
        audit or explore; ``agree`` None: undecided)."""
        verdict = "undecided" if agree is None else ("agreed" if agree else "disagreed")
        prefix = "" if kind == "shadow" else f"{kind}_"
        if agree is not None:
            with self._lock:
                self._judged.append((similarity, agree))
        self.incr(f"shadow:{prefix}{verdict}", namespace=namespace)

    def kv_tokens(self, prompt_tokens: int, cached_tokens: int) -> None:
        with self._lock:
            self._c[("", "kv_prompt_tokens")] += prompt_tokens
            self._c[("", "kv_cached_tokens")] += cached_tokens
        for sink in self.sinks:
            sink.kv_tokens(prompt_tokens, cached_tokens)

    def entries(self, counts: Mapping[str, int]) -> None:
        for sink in self.sinks:
            sink.entries(counts)

    # ------------------------------------------------------------------ snapshot
    def snapshot(self) -> CacheStats:
        with self._lock:
            per: dict[str, Counter[str]] = {}
            total: Counter[str] = Counter()
            for (ns, name), v in self._c.items():
                per.setdefault(ns, Counter())[name] += v
                total[name] += v
            lat_all: dict[str, list[float]] = {}
            lat_ns: dict[str, dict[str, list[float]]] = {}
            for (ns, name), samples in self._lat.items():
                lat_all.setdefault(name, []).extend(samples)
                lat_ns.setdefault(ns, {})[name] = list(samples)
            cost = dict(self._cost)
            busy_ms = dict(self._busy_ms)
            events = tuple(self._events)
            judged = tuple(self._judged)
        namespaces = {
            ns: _namespace_stats(c, lat_ns.get(ns, {}), cost.get(ns, 0.0))
            for ns, c in sorted(per.items())
            if ns and c["lookups"]
        }
        counters = {k: v for k, v in total.items()
                    if k not in _OWN and not k.startswith(_OWN_PREFIXES) and v}  # fmt: skip
        return CacheStats(
            lookups=total["lookups"],
            hits=_hits(total),
            misses=total["misses"],
            bypassed=total["bypassed"],
            control=total["control"],
            stores=total["stores"],
            skipped_stores=total["skipped_stores"],
            errors=total["errors"],
            refused=_group(total, "refused:"),
            shadow=_group(total, "shadow:"),
            tokens_saved=total["tokens_saved"],
            latency_ms=_latencies(lat_all, False),
            kv={
                "prompt_tokens": total["kv_prompt_tokens"],
                "cached_tokens": total["kv_cached_tokens"],
            },
            feedback=_group(total, "feedback:"),
            evicted=total["evicted"],
            audited=total["audited"],
            explored=total["explored"],
            tokens=_group(total, "saved:"),
            cost_saved=sum(cost.values()),
            namespaces=namespaces,
            control_group=_control_group(total, busy_ms),
            counters=counters,
            events=events,
            judged=judged,
        )


def _group(c: Counter[str], prefix: str) -> dict[str, int]:
    """The counters named ``<prefix><name>`` (non-zero), by ``name``."""
    return {k[len(prefix) :]: v for k, v in c.items() if k.startswith(prefix) and v}


def _hits(c: Counter[str]) -> dict[str, int]:
    out = {layer: 0 for layer in LAYERS}
    out.update(_group(c, "hit:"))
    return out


def _latencies(samples: Mapping[str, list[float]], keep_all: bool) -> dict[str, Any]:
    return {k: _summary(v) for k, v in sorted(samples.items())
            if (keep_all or k != "all") and ":" not in k}  # fmt: skip


def _namespace_stats(
    c: Counter[str], samples: Mapping[str, list[float]], cost: float
) -> NamespaceStats:
    return NamespaceStats(
        lookups=c["lookups"],
        hits=_hits(c),
        misses=c["misses"],
        refused=_group(c, "refused:"),
        latency_ms=_latencies(samples, True),
        tokens_saved=_group(c, "saved:"),
        cost_saved=cost,
        shadow=_group(c, "shadow:"),
        bypassed=c["bypassed"],
        control=c["control"],
    )


def _control_group(
    total: Counter[str], busy_ms: Mapping[str, float]
) -> dict[str, dict[str, float | None]]:
    """Side by side, per request: the tokens paid to the model and the mean latency (the
    control group: the model call; the cached traffic: lookup + model calls)."""
    out: dict[str, dict[str, float | None]] = {}
    for name, requests in (("cached", total["lookups"] - total["control"]
                            - total["bypassed"]), ("control", total["control"])):  # fmt: skip
        spent, busy = total[f"control:{name}_tokens"], busy_ms[name]
        out[name] = {
            "requests": float(requests),
            "model_calls": float(total[f"control:{name}_calls"]),
            "mean_ms": busy / requests if requests else None,
            "tokens_per_request": spent / requests if requests else None,
        }
    return out
