"""The assembly of one cache: its constructor's arguments grouped into a few frozen
configs, and the pipeline's parts built from them, each once.

:func:`assemble` is what :class:`~agent_cache.LayeredCache`'s constructor does: the
arguments are handed on by name (:func:`~agent_cache._settings.args_for`), each declared
once in the signature and once in the config (or :class:`~agent_cache._settings.Settings`
field) that takes it:

- :class:`~agent_cache._backends.BackendConfig`: stores, servers, embedder, reranker;
- :class:`GateConfig`: the model gate, negative entries, the single-flight lease;
- :class:`TrustConfig`: the judges and the random seed of audits and the control group;
- :class:`StatsConfig`: the metric sinks and the price table;
- :class:`~agent_cache._settings.Settings`: what every part reads at call time and the
  cache lets you change (``cache.threshold = ...``, validated as the constructor does).

Each argument is checked where it is used, in the order the parts are built, so a bad
one is a ``ConfigurationError`` naming it before any store is opened.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_cache._backends import BackendConfig, Backends, report_failure
from agent_cache._calls import Calls
from agent_cache._fetch import Fetcher
from agent_cache._lookup import Reader
from agent_cache._settings import Settings, args_for, sinks_from
from agent_cache._stream import Streams
from agent_cache._trust import Trust
from agent_cache._write import Writer
from agent_cache.degrade import ModelGate, NegativeCache
from agent_cache.savings import PriceTable
from agent_cache.stats import StatsRecorder, StatsSink

if TYPE_CHECKING:
    from agent_cache.judge import Judge

__all__ = ["GateConfig", "Parts", "StatsConfig", "TrustConfig", "assemble"]


@dataclass(frozen=True)
class GateConfig:
    """How the model is protected: at most ``max_model_calls`` computes at once in this
    process (``shared_model_calls`` in the deployment), a queue of ``model_queue`` callers
    waiting ``model_wait`` seconds; ``negative_ttl`` seconds of remembered empty answers;
    the cross-process lease of ``singleflight_timeout`` seconds."""

    max_model_calls: int | None = None
    shared_model_calls: int | None = None
    model_queue: int = 64
    model_wait: float = 30.0
    negative_ttl: float | None = None
    singleflight_timeout: float = 5.0


@dataclass(frozen=True)
class TrustConfig:
    """Who judges: ``judge`` compares a withheld answer with the model's,
    ``request_judge`` asks whether two requests want the same answer; ``seed`` makes the
    audits, the exploration and the control group reproducible."""

    judge: Callable[[str, str, str], bool] | None = None
    request_judge: Any = None
    seed: int | None = None


@dataclass(frozen=True)
class StatsConfig:
    """Where the events go (``metrics``: sinks, or ``True`` for Prometheus) and what a
    hit saves (``prices``: money per million tokens per model)."""

    metrics: StatsSink | Iterable[StatsSink] | bool | None = None
    prices: PriceTable | Mapping[str, tuple[float, float]] | None = None


@dataclass(frozen=True)
class Parts:
    """The parts of one cache, wired to each other."""

    settings: Settings
    backends: Backends
    stats: StatsRecorder
    negative: NegativeCache | None
    trust: Trust
    request_judge: Judge | None
    reader: Reader
    writer: Writer
    fetcher: Fetcher
    streams: Streams
    calls: Calls

    def watch(self, cache: object) -> None:
        """Give ``cache`` to the sinks that watch one (Prometheus counts its entries)."""
        for sink in self.stats.sinks:
            watch = getattr(sink, "watch", None)
            if watch is not None:
                watch(cache)


def assemble(args: Mapping[str, Any], *, default_threshold: float) -> Parts:
    """The parts a cache built with the keyword arguments ``args`` (its constructor's
    ``locals()``) uses; no I/O (the stores open on first use)."""
    settings = Settings.from_args(args, default=default_threshold)
    backends = Backends(BackendConfig(**args_for(BackendConfig, args)))
    gate_cfg = GateConfig(**args_for(GateConfig, args))
    trust_cfg = TrustConfig(**args_for(TrustConfig, args))
    stats_cfg = StatsConfig(**args_for(StatsConfig, args))

    def failed(exc: Exception, what: str) -> None:
        report_failure(stats, exc, what)  # a failing store: a counted, logged miss

    backends.on_error = failed  # background vector batches that fail, counted
    gate = ModelGate(
        gate_cfg.max_model_calls,
        shared_limit=gate_cfg.shared_model_calls,
        queue=gate_cfg.model_queue,
        wait=gate_cfg.model_wait,
        store=lambda: backends.kv,
        name=f"model:{backends.prefix}",
        on_error=failed,
    )
    ttl = gate_cfg.negative_ttl
    negative = NegativeCache(ttl) if ttl is not None else None
    prices = stats_cfg.prices
    price_table = prices if isinstance(prices, PriceTable) else PriceTable(prices)
    stats = StatsRecorder(price_table, sinks_from(stats_cfg.metrics))
    s, b, rng = settings, backends, random.Random(trust_cfg.seed)
    trust = Trust(s, b, stats, rng=rng, failed=failed, judge=trust_cfg.judge)
    from agent_cache.judge import judge_from  # a model asked about near misses, when given

    request_judge = judge_from(trust_cfg.request_judge)
    reader = Reader(s, b, trust, stats, rng=rng, failed=failed, judge=request_judge)
    writer = Writer(s, b, reader, trust, stats, failed=failed)
    fetcher = Fetcher(
        s,
        b,
        reader,
        writer,
        stats,
        gate=gate,
        negative=negative,
        timeout=gate_cfg.singleflight_timeout,
        failed=failed,
    )
    streams = Streams(reader, fetcher)
    calls = Calls(s, b, reader, writer, trust)
    return Parts(
        s, b, stats, negative, trust, request_judge, reader, writer, fetcher, streams, calls
    )
