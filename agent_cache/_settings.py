"""The cache's tunable settings, validated once and shared by every part of the pipeline.

:class:`Settings` is one mutable object: :class:`~agent_cache.LayeredCache` exposes each
field as an attribute of its own (``cache.threshold``, ``cache.shadow``, ...) through
:class:`Setting`, and the lookup, store, trust and fetch parts read it at call time, so
a setting changed on the cache is the one every part uses.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

from agent_cache.errors import ConfigurationError
from agent_cache.keys import Template, templates_from
from agent_cache.policy import TtlPolicy
from agent_cache.stats import StatsSink

__all__ = [
    "Setting",
    "Settings",
    "UnmetTargetConfig",
    "allow_unmet_target",
    "args_for",
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
        >>> allow_unmet_target("agent_cache.json")  # LayeredCache(config=...) takes it
        allow_unmet_target('agent_cache.json')
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


def _rate(name: str, value: Any, *, open_ends: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float)
    if ok:
        ok = 0.0 < value < 1.0 if open_ends else 0.0 <= value <= 1.0
    if not ok:
        bounds = "(0, 1)" if open_ends else "[0, 1]"
        raise ConfigurationError(f"{name} must be a number in {bounds}, not {value!r}")
    return float(value)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an int >= 1, not {value!r}")
    return value


def _names(name: str, value: Any) -> frozenset[str]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigurationError(
            f"{name} must be a collection of namespaces, not {value!r:.60}"
            + (f" (use [{value!r}])" if isinstance(value, str) else "")
        )
    out = frozenset(value)
    if any(not isinstance(ns, str) for ns in out):
        raise ConfigurationError(f"{name} must hold namespace strings, not {value!r:.60}")
    return out


def _mapping(name: str, value: Any) -> dict[Any, Any]:
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{name} must be a mapping, not {value!r:.60}")
    return dict(value)


def _thresholds(name: str, value: Any) -> dict[str, float]:
    return {ns: check_threshold(t) for ns, t in _mapping(name, value).items()}


def _quotas(name: str, value: Any) -> dict[str, int]:
    quotas = _mapping(name, value)
    if any(isinstance(q, bool) or not isinstance(q, int) or q < 1 for q in quotas.values()):
        raise ConfigurationError(f"quotas are entry counts >= 1, got {quotas!r}")
    return quotas


def _refresh_ahead(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f"{name} must be > 0 seconds or None, not {value!r}")
    return float(value)


def _max_error_rate(name: str, value: Any) -> float | None:
    return None if value is None else _rate(name, value, open_ends=True)


def _templates(name: str, value: Any) -> list[Template]:
    items = list(value) if isinstance(value, list | tuple) else None
    if items is None or any(not isinstance(t, Template) for t in items):
        raise ConfigurationError(
            f"{name} must be a list of Template (the constructor takes a mapping), "
            f"not {value!r:.60}"
        )
    return items


def _ttl_policy(name: str, value: Any) -> TtlPolicy:
    if not isinstance(value, TtlPolicy):
        raise ConfigurationError(f"{name} must be a TtlPolicy, not {value!r:.60}")
    return value


def _callable(name: str, value: Any) -> Any:
    if not callable(value):
        raise ConfigurationError(f"{name} must be callable, not {value!r:.60}")
    return value


#: How each field is checked and normalized: by the constructor and by every assignment
#: (``cache.threshold = 5.0`` is refused as ``LayeredCache(threshold=5.0)`` is).
_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "threshold": lambda _n, v: check_threshold(v),
    "thresholds": _thresholds,
    "shadow": lambda _n, v: bool(v),
    "bypass_rate": _rate,
    "max_error_rate": _max_error_rate,
    "audit_rate": _rate,
    "explore_rate": _rate,
    "rerank_threshold": lambda _n, v: check_threshold(v),
    "top_k": _count,
    "case_sensitive": _names,
    "exact_only": _names,
    "templates": _templates,
    "max_prompt_bytes": _count,
    "ttl_policy": _ttl_policy,
    "quotas": _quotas,
    "fallbacks": _mapping,
    "refresh_ahead": _refresh_ahead,
    "clock": _callable,
    "sleep": _callable,
}


@dataclass
class Settings:
    """See :class:`~agent_cache.LayeredCache` for each field's meaning.

    Every field is validated when it is set, at construction and after it, with the
    same check (:data:`_CHECKS`); a refused value raises ``ConfigurationError`` naming
    the field and leaves the old value in place.
    """

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

    def __setattr__(self, name: str, value: Any) -> None:
        check = _CHECKS.get(name)
        if check is None:
            raise AttributeError(f"Settings has no field {name!r}")
        try:
            value = check(name, value)
        except ConfigurationError as exc:
            if name in str(exc):
                raise
            raise ConfigurationError(f"{name}: {exc}") from exc
        object.__setattr__(self, name, value)

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

    @classmethod
    def from_args(cls, args: Mapping[str, Any], *, default: float) -> Settings:
        """The settings among a constructor's arguments, each field under its own name
        (``LayeredCache``'s ``locals()``): the mappings are copied, ``templates``
        compiled, ``ttl_policy`` defaults to a ``TtlPolicy(seed=seed)``."""
        rest = {f.name: args[f.name] for f in fields(cls) if f.name in args}
        rest.pop("threshold", None)
        rest.pop("thresholds", None)
        rest["templates"] = list(templates_from(args.get("templates")))
        rest["ttl_policy"] = args.get("ttl_policy") or TtlPolicy(seed=args.get("seed"))
        rest["quotas"] = args.get("quotas") or {}
        rest["fallbacks"] = args.get("fallbacks") or {}
        return cls.merged(
            args.get("threshold"),
            args.get("thresholds"),
            args.get("config"),
            default=default,
            **rest,
        )

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


def args_for(target: Callable[..., Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``args`` that name a parameter of ``target``: a constructor's
    arguments handed on to the part that takes them, each named once."""
    names = inspect.signature(target).parameters
    return {name: value for name, value in args.items() if name in names}


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
