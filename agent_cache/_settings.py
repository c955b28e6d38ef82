"""The cache's tunable settings, validated once and shared by every part of the pipeline.

:class:`Settings` is one mutable object: :class:`~agent_cache.LayeredCache` exposes each
field as an attribute of its own (``cache.threshold``, ``cache.shadow``, ...) through
:class:`Setting`, and the lookup, store, trust and fetch parts read it at call time, so
a setting changed on the cache is the one every part uses.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from agent_cache.errors import ConfigurationError
from agent_cache.keys import Template
from agent_cache.policy import TtlPolicy
from agent_cache.stats import StatsSink

__all__ = [
    "Setting",
    "Settings",
    "UnmetTargetConfig",
    "allow_unmet_target",
    "check_threshold",
    "read_config",
    "sinks_from",
]

T = TypeVar("T")


def check_threshold(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"thresholds are similarities in [0, 1], got {value!r}")
    return float(value)


class UnmetTargetConfig(os.PathLike[str]):
    """A calibration config to load although ``calibrate`` missed its target precision
    (see :func:`allow_unmet_target`); any path-like accepted by ``config=``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"allow_unmet_target({self.path!r})"


def allow_unmet_target(path: str | os.PathLike[str]) -> UnmetTargetConfig:
    """Say that ``LayeredCache(config=...)`` may load a config marked ``"target_met":
    false`` (``agent-cache calibrate`` reached no threshold with the precision bound asked
    for); without it, such a file is a :class:`ConfigurationError`.

    Example:
        >>> from agent_cache.calibrate import allow_unmet_target
        >>> LayeredCache(config=allow_unmet_target("agent_cache.json"))  # doctest: +SKIP
    """
    return UnmetTargetConfig(path)


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON object ``agent-cache calibrate`` wrote; one marked ``"target_met": false``
    only through :func:`allow_unmet_target`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read config {os.fspath(path)}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"config {os.fspath(path)} must hold a JSON object")
    if data.get("target_met") is False and not isinstance(path, UnmetTargetConfig):
        bound = data.get("best_precision_bound", data.get("precision_bound"))
        raise ConfigurationError(
            f"config {os.fspath(path)}: calibrate missed its target precision "
            f"{data.get('target_precision')!r} (best lower bound {bound!r}); recalibrate "
            "with more pairs or a lower --target-precision, or load it anyway with "
            "config=agent_cache.calibrate.allow_unmet_target(path)"
        )
    return data


@dataclass
class Settings:
    """See :class:`~agent_cache.LayeredCache` for each field's meaning."""

    threshold: float
    thresholds: dict[str, float] = field(default_factory=dict)
    shadow: bool = False
    bypass_rate: float = 0.0
    max_error_rate: float | None = None
    audit_rate: float = 0.1
    explore_rate: float = 0.2
    rerank_threshold: float = 0.5
    top_k: int = 5
    case_sensitive: frozenset[str] = frozenset()
    exact_only: frozenset[str] = frozenset()
    templates: list[Template] = field(default_factory=list)
    max_prompt_bytes: int = 1_000_000
    ttl_policy: TtlPolicy = field(default_factory=TtlPolicy)
    quotas: dict[str, int] = field(default_factory=dict)
    fallbacks: dict[str, Any] = field(default_factory=dict)
    refresh_ahead: float | None = None
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        self.threshold = check_threshold(self.threshold)
        self.thresholds = {ns: check_threshold(t) for ns, t in self.thresholds.items()}
        self.rerank_threshold = check_threshold(self.rerank_threshold)
        if not 0.0 <= self.bypass_rate <= 1.0:
            raise ConfigurationError("bypass_rate must be in [0, 1]")
        if self.max_error_rate is not None and not 0.0 < self.max_error_rate < 1.0:
            raise ConfigurationError("max_error_rate must be in (0, 1)")
        for name, rate in (("audit_rate", self.audit_rate), ("explore_rate", self.explore_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ConfigurationError(f"{name} must be in [0, 1]")
        if self.top_k < 1:
            raise ConfigurationError("top_k must be >= 1")
        if self.refresh_ahead is not None and not (
            isinstance(self.refresh_ahead, int | float) and self.refresh_ahead > 0
        ):
            raise ConfigurationError(
                f"refresh_ahead must be > 0 seconds, not {self.refresh_ahead!r}"
            )
        if any(
            isinstance(q, bool) or not isinstance(q, int) or q < 1 for q in self.quotas.values()
        ):
            raise ConfigurationError(f"quotas are entry counts >= 1, got {self.quotas!r}")

    @classmethod
    def merged(
        cls,
        threshold: float | None,
        thresholds: Mapping[str, float] | None,
        config: str | os.PathLike[str] | None,
        *,
        default: float,
        **rest: Any,
    ) -> Settings:
        """Explicit thresholds over those of a calibration ``config`` over ``default``."""
        file_cfg = read_config(config) if config is not None else {}
        merged = dict(file_cfg.get("thresholds", {}))
        merged.update(thresholds or {})
        chosen = threshold if threshold is not None else file_cfg.get("threshold", default)
        return cls(threshold=chosen, thresholds=merged, **rest)

    def threshold_in(self, namespace: str) -> float:
        """The configured threshold of ``namespace`` (before any error bound)."""
        return self.thresholds.get(namespace, self.threshold)


class Setting(Generic[T]):
    """A :class:`Settings` field as an attribute of the object holding ``_settings``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> T:
        return getattr(obj._settings, self.name)  # type: ignore[no-any-return]

    def __set__(self, obj: Any, value: T) -> None:
        setattr(obj._settings, self.name, value)


def sinks_from(metrics: StatsSink | Iterable[StatsSink] | bool | None) -> list[StatsSink]:
    """The sinks ``metrics=`` names (``True``: Prometheus in its default registry)."""
    if metrics is None or metrics is False:
        return []
    if metrics is True:
        from agent_cache.metrics import PrometheusMetrics

        return [PrometheusMetrics()]
    if isinstance(metrics, StatsSink) or not isinstance(metrics, Iterable):
        return [metrics]
    return list(metrics)
