"""Issue 21, the front: ``cache.py`` stays a thin front (at most 600 lines, a constructor
of at most 60), and grouping the constructor's arguments into configs changed none of
them: every keyword, its default, its order and ``path`` the one positional."""

from __future__ import annotations

import ast
import inspect
import time
from pathlib import Path
from typing import Any

from agent_cache import LayeredCache
from agent_cache.testing import FakeClock, HashEmbedder

ROOT = Path(__file__).resolve().parents[3]
CACHE_PY = ROOT / "agent_cache" / "cache.py"

#: Every argument ``LayeredCache`` takes, in order, with its default: ``path`` and the 42
#: keywords issue 21 counts.
ARGUMENTS: list[tuple[str, Any]] = [
    ("path", ".agent_cache"),
    ("redis_url", None),
    ("chroma_url", None),
    ("vector_backend", None),
    ("prefix", "agent_cache"),
    ("on_corrupt", "raise"),
    ("backend_timeout", 2.0),
    ("circuit_reset", 5.0),
    ("max_model_calls", None),
    ("shared_model_calls", None),
    ("model_queue", 64),
    ("model_wait", 30.0),
    ("fallbacks", None),
    ("negative_ttl", None),
    ("refresh_ahead", None),
    ("quotas", None),
    ("embedder", "sentence-transformers/all-MiniLM-L6-v2"),
    ("reranker", None),
    ("threshold", None),
    ("thresholds", None),
    ("config", None),
    ("shadow", False),
    ("bypass_rate", 0.0),
    ("max_error_rate", None),
    ("audit_rate", 0.1),
    ("explore_rate", 0.2),
    ("judge", None),
    ("request_judge", None),
    ("ttl_policy", None),
    ("templates", None),
    ("case_sensitive", ("code",)),
    ("exact_only", ("tools", "steps")),
    ("rerank_threshold", 0.5),
    ("top_k", 5),
    ("max_prompt_bytes", 1_000_000),
    ("singleflight_timeout", 5.0),
    ("clock", time.time),
    ("sleep", time.sleep),
    ("kv_store", None),
    ("vector_store", None),
    ("seed", None),
    ("metrics", None),
    ("prices", None),
]


def _init() -> ast.FunctionDef:
    tree = ast.parse(CACHE_PY.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LayeredCache")
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")


def test_cache_py_is_at_most_600_lines() -> None:
    lines = len(CACHE_PY.read_text(encoding="utf-8").splitlines())
    assert lines <= 600, f"agent_cache/cache.py has {lines} lines"


def test_the_constructor_is_at_most_60_lines() -> None:
    init = _init()
    assert init.end_lineno is not None
    assert init.end_lineno - init.lineno + 1 <= 60


def test_the_constructor_takes_every_argument_it_took() -> None:
    params = list(inspect.signature(LayeredCache).parameters.values())
    assert len(ARGUMENTS) == 43  # path and the 42 keywords
    assert [(p.name, p.default) for p in params] == ARGUMENTS
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])


def test_every_keyword_still_reaches_its_part() -> None:
    """A keyword given is used, not dropped on the way to the config that takes it."""
    clock = FakeClock()
    cache = LayeredCache(
        None,
        prefix="app-1",
        backend_timeout=1.5,
        negative_ttl=30.0,
        singleflight_timeout=7.0,
        embedder=HashEmbedder(),
        threshold=0.8,
        top_k=3,
        seed=1,
        prices={"m": (1.0, 2.0)},
        clock=clock,
    )
    assert cache.prefix == "app-1" and cache.backend_timeout == 1.5
    assert cache._negative is not None and cache._negative.ttl == 30.0
    assert cache._fetcher.flight.timeout == 7.0
    assert cache.threshold == 0.8 and cache.top_k == 3 and cache.clock is clock
    assert cache.path is None and type(cache.kv_store).__name__ == "MemoryStore"
