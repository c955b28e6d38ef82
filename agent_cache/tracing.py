"""OpenTelemetry spans around lookup, each layer, verification, the model call and the store.

With ``opentelemetry-api`` installed (``pip install 'agent-cache[otel]'``) every lookup is
an ``agent_cache.lookup`` span with children ``agent_cache.exact``,
``agent_cache.semantic`` and ``agent_cache.verify``; ``get_or_compute`` adds
``agent_cache.model_call`` and every write an ``agent_cache.store`` span. Attributes:
``agent_cache.namespace``, ``agent_cache.layer``, ``agent_cache.outcome``,
``agent_cache.score``. Spans go wherever the application's tracer provider sends them
(none configured: the API's no-op tracer). Without the package, :func:`span` returns one
shared ``nullcontext``: no import, no object, no cost.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

__all__ = ["annotate", "enabled", "span"]

try:  # optional: the API only; the application brings the SDK and its exporter
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised by monkeypatching _trace
    _trace = None  # type: ignore[assignment]

_NOOP: AbstractContextManager[Any] = nullcontext(None)
_tracer: Any = None


def enabled() -> bool:
    """True when ``opentelemetry-api`` is importable (spans are made)."""
    return _trace is not None


def _attrs(attributes: dict[str, Any]) -> dict[str, Any]:
    return {f"agent_cache.{k}": v for k, v in attributes.items() if v is not None}


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A span named ``agent_cache.<name>``, current while the ``with`` block runs.

    Example:
        >>> with span("lookup", namespace="faq") as sp:
        ...     annotate(sp, outcome="hit")
    """
    global _tracer
    if _trace is None:
        return _NOOP
    if _tracer is None:
        _tracer = _trace.get_tracer("agent_cache")  # a proxy until a provider is set
    return _tracer.start_as_current_span(  # type: ignore[no-any-return]
        f"agent_cache.{name}", attributes=_attrs(attributes)
    )


def annotate(sp: Any, **attributes: Any) -> None:
    """Set attributes (``None`` values skipped) on ``sp``, or on the current span when
    ``sp`` is ``None``; nothing without OpenTelemetry."""
    if _trace is None:
        return
    target = sp if sp is not None else _trace.get_current_span()
    if target.is_recording():
        target.set_attributes(_attrs(attributes))
