"""Pictures of what the cache did (``pip install 'agent-cache[plot]'``).

:func:`plot_stats` draws three panels from a :class:`~agent_cache.stats.CacheStats`
(``cache.stats()``, a replay's ``report.stats``, or ``CacheStats.load(file)``): the hit
rate by layer over time, the lookup latency distribution, and the threshold curve from
judged would-be hits (shadow mode, audits, replays): for each similarity threshold, the
share of judged hits that agreed with the model (precision) and the share kept.

The time axis starts at the earliest lookup, whatever the order the events come in (a
replayed log need not be sorted); ``axis="order"`` puts the lookups in the order they were
made instead, for a log without timestamps (``agent-cache replay`` does so by itself).

Example (needs matplotlib; writes ``stats.png``)::

    from agent_cache.plots import plot_stats
    plot_stats(cache.stats(), "stats.png")
"""

from __future__ import annotations

import math
import os
from typing import Any, Literal

from agent_cache.errors import ConfigurationError, MissingDependencyError
from agent_cache.stats import HIT, LAYERS, CacheStats

__all__ = ["plot_stats"]

_COLORS = {"exact": "#2b8cbe", "template": "#7bccc4", "semantic": "#f03b20", "miss": "#999999"}


def _figure(width: int, height: int, dpi: int) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependencyError("matplotlib", "plot", feature="plots") from exc
    return Figure(figsize=(width / dpi, height / dpi), dpi=dpi)


def _hit_rate_over_time(
    ax: Any, stats: CacheStats, bins: int, axis: Literal["time", "order"]
) -> None:
    events = [e for e in stats.events if e.outcome not in ("bypass", "control")]
    if axis == "order":
        ax.set_title("hit rate by layer, in lookup order")
        xs_of = [float(i) for i in range(len(events))]
    else:
        ax.set_title("hit rate by layer over time")
        events = [e for e in events if math.isfinite(e.t)]
        xs_of = [e.t for e in events]
    if not events:
        ax.text(0.5, 0.5, "no lookups yet", ha="center", va="center", transform=ax.transAxes)
        return
    t0, t1 = min(xs_of), max(xs_of)  # the earliest, not the first: events need no order
    span = (t1 - t0) or 1.0
    n = max(1, min(bins, len(events) // 5 or 1))
    counts = [{"all": 0, **{layer: 0 for layer in LAYERS}} for _ in range(n)]
    for e, x in zip(events, xs_of, strict=True):
        b = counts[min(n - 1, int((x - t0) / span * n))]
        b["all"] += 1
        if e.outcome == HIT:
            b[e.layer] += 1
    scale = 60.0 if axis == "time" else 1.0  # minutes, or lookups
    xs = [(i + 0.5) * span / n / scale for i in range(n)]
    bottom = [0.0] * n
    for layer in LAYERS:
        share = [b[layer] / b["all"] if b["all"] else 0.0 for b in counts]
        if any(share):
            ax.bar(xs, share, width=span / n / scale * 0.9, bottom=bottom, label=layer,
                   color=_COLORS[layer])  # fmt: skip
            bottom = [a + s for a, s in zip(bottom, share, strict=True)]
    ax.set_ylim(0, 1)
    ax.set_xlabel("minutes since the first lookup" if axis == "time" else "lookups, in order")
    ax.set_ylabel("share of lookups served")
    ax.legend(loc="upper left", fontsize="small")


def _latency(ax: Any, stats: CacheStats) -> None:
    ax.set_title("lookup latency")
    groups: dict[str, list[float]] = {}
    for e in stats.events:
        if e.outcome in ("bypass", "control"):
            continue
        groups.setdefault(e.layer if e.outcome == HIT else "miss", []).append(max(e.ms, 1e-3))
    if not groups:
        ax.text(0.5, 0.5, "no lookups yet", ha="center", va="center", transform=ax.transAxes)
        return
    import numpy as np

    lo = min(min(v) for v in groups.values())
    hi = max(max(v) for v in groups.values())
    edges = np.logspace(np.log10(lo), np.log10(hi * 1.01 if hi > lo else lo * 10), 30)
    for name in (*LAYERS, "miss"):
        if name in groups:
            ax.hist(groups[name], bins=edges, alpha=0.6, label=f"{name} ({len(groups[name])})",
                    color=_COLORS[name])  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("ms")
    ax.set_ylabel("lookups")
    ax.legend(fontsize="small")


def _threshold_curve(ax: Any, stats: CacheStats) -> None:
    ax.set_title("threshold curve (judged would-be hits)")
    judged = sorted(stats.judged)
    if not judged:
        ax.text(0.5, 0.5, "no judged hits yet\n(shadow mode, audits or a replay)",
                ha="center", va="center", transform=ax.transAxes)  # fmt: skip
        return
    sims = [s for s, _ in judged]
    lo = min(sims)
    grid = [lo + (1.0 - lo) * i / 40 for i in range(41)]
    precision, kept = [], []
    for t in grid:
        above = [a for s, a in judged if s >= t]
        precision.append(sum(above) / len(above) if above else None)
        kept.append(len(above) / len(judged))
    ax.plot(grid, [p if p is not None else float("nan") for p in precision],
            label="precision (agreed)", color="#f03b20")  # fmt: skip
    ax.plot(grid, kept, label="share of hits kept", color="#2b8cbe")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("similarity threshold")
    ax.legend(fontsize="small")


def plot_stats(
    stats: CacheStats,
    path: str | os.PathLike[str] | None = None,
    *,
    width: int = 1500,
    height: int = 450,
    dpi: int = 100,
    bins: int = 30,
    axis: Literal["time", "order"] = "time",
) -> Any:
    """Draw the three panels; save a PNG of ``width`` x ``height`` pixels to ``path``
    when given. Returns the matplotlib ``Figure`` (no pyplot, no global backend change).

    ``axis``: the hit-rate panel's x axis, ``"time"`` (minutes since the earliest lookup;
    events with a non-finite time are left out of it) or ``"order"`` (lookups in the
    order they were recorded).
    """
    if axis not in ("time", "order"):
        raise ConfigurationError(f"axis must be 'time' or 'order', not {axis!r}")
    fig = _figure(width, height, dpi)
    axes = fig.subplots(1, 3)
    _hit_rate_over_time(axes[0], stats, bins, axis)
    _latency(axes[1], stats)
    _threshold_curve(axes[2], stats)
    fig.tight_layout()
    if path is not None:
        fig.savefig(os.fspath(path), format="png", dpi=dpi)
    return fig
