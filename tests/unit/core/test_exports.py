"""The exported names are a contract: internals may move, these may not."""

from __future__ import annotations

import subprocess
import sys

import agent_cache


def test_all_is_pinned() -> None:
    assert sorted(agent_cache.__all__) == sorted(
        [
            "DEFAULT_THRESHOLD",
            "NOT_STORED",
            "AStreamed",
            "AgentCacheError",
            "BackendError",
            "CacheHit",
            "CachePolicy",
            "CacheStats",
            "ConfigurationError",
            "Fetched",
            "LayeredCache",
            "MissingDependencyError",
            "PriceTable",
            "SerializationError",
            "StepCache",
            "StreamAbandoned",
            "Streamed",
            "ToolCache",
            "TtlPolicy",
            "TtlTier",
            "__version__",
            "default_cache",
        ]
    )
    for name in agent_cache.__all__:
        assert hasattr(agent_cache, name), name


def test_error_tree() -> None:
    from agent_cache import errors

    for cls in (
        errors.ConfigurationError,
        errors.SerializationError,
        errors.BackendError,
        errors.MissingDependencyError,
    ):
        assert issubclass(cls, errors.AgentCacheError)
    err = errors.MissingDependencyError("redis", "redis")
    assert "agent-cache[redis]" in str(err)
    assert "layer=exact" in str(errors.BackendError("down", layer="exact"))


def test_core_never_imports_the_frameworks() -> None:
    code = (
        "import sys, agent_cache, agent_cache.cache, agent_cache.tools, agent_cache.stores, "
        "agent_cache.vectors, agent_cache.embedders, agent_cache.cli\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core', "
        "'llama_index')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_py_typed_is_shipped() -> None:
    from importlib.resources import files

    assert files("agent_cache").joinpath("py.typed").is_file()


def test_observability_modules_pin_their_names() -> None:
    from agent_cache import metrics, plots, replay, savings, stats, tracing

    assert sorted(metrics.__all__) == [
        "LOOKUP_BUCKETS",
        "MODEL_BUCKETS",
        "PrometheusMetrics",
        "multiprocess_registry",
        "start_metrics_server",
    ]
    assert sorted(replay.__all__) == ["LogRecord", "ReplayReport", "read_log", "replay"]
    assert plots.__all__ == ["plot_stats"] and tracing.__all__ == ["annotate", "enabled", "span"]
    assert sorted(savings.__all__) == ["KINDS", "PriceTable", "Usage", "usage_from"]
    assert sorted(stats.__all__) == [
        "CacheStats",
        "Event",
        "NamespaceStats",
        "StatsRecorder",
        "StatsSink",
    ]
