"""The public front: settings validated on assignment as in the constructor, the key a
write returns, and one body behind each sync/async pair."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_cache import ConfigurationError, LayeredCache, TtlPolicy
from agent_cache.cache import LayeredCache as Front
from agent_cache.stores import MemoryStore
from agent_cache.testing import FakeClock, HashEmbedder


def make(**kw: Any) -> LayeredCache:
    kw.setdefault("embedder", HashEmbedder())
    kw.setdefault("clock", FakeClock())
    kw.setdefault("ttl_policy", TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()))
    return LayeredCache(path=None, **kw)


# (setting, a value the constructor refuses)
REFUSED = [
    ("threshold", 5.0),
    ("threshold", -0.1),
    ("threshold", "0.9"),
    ("thresholds", {"faq": 1.5}),
    ("top_k", 0),
    ("top_k", 2.5),
    ("bypass_rate", 2.0),
    ("audit_rate", -1.0),
    ("explore_rate", 1.5),
    ("max_error_rate", 1.0),
    ("rerank_threshold", 3.0),
    ("refresh_ahead", 0),
    ("quotas", {"faq": 0}),
    ("max_prompt_bytes", 0),
    ("case_sensitive", "code"),
    ("ttl_policy", 3600),
    ("clock", 12.0),
]


@pytest.mark.parametrize(("name", "bad"), REFUSED)
def test_assignment_refuses_what_the_constructor_refuses(name: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        make(**{name: bad})
    cache = make()
    before = getattr(cache, name)
    with pytest.raises(ConfigurationError, match=name):
        setattr(cache, name, bad)
    assert getattr(cache, name) == before  # nothing changed


def test_assignment_of_a_valid_value_is_used_and_normalized() -> None:
    cache = make()
    cache.threshold = 1  # an int in [0, 1]: stored as the constructor stores it
    assert cache.threshold == 1.0 and isinstance(cache.threshold, float)
    assert cache.threshold_for("default") == 1.0
    cache.case_sensitive = ["code", "sql"]  # type: ignore[assignment]
    assert cache.case_sensitive == frozenset({"code", "sql"})
    cache.top_k = 3
    assert cache.top_k == 3


def test_a_skipped_write_returns_the_key_it_would_have_written() -> None:
    cache = make()
    cache.bump_version("faq")
    skipped = cache.store("What is RAG?", "", namespace="faq")  # empty: not stored
    assert cache.stats().skipped_stores == 1
    written = cache.store("What is RAG?", "Retrieval.", namespace="faq")
    assert skipped == written


class FailingSet(MemoryStore):
    def set(self, *args: Any, **kwargs: Any) -> None:
        raise ConnectionError("store down")


def test_a_failed_write_returns_the_key_it_tried_after_bump_version() -> None:
    kv = FailingSet()
    cache = make(kv_store=kv)
    cache.bump_version()
    failed = cache.store("What is RAG?", "Retrieval.")
    assert cache.stats().errors >= 1
    ok = make(kv_store=MemoryStore())
    ok.bump_version()
    assert failed == ok.store("What is RAG?", "Retrieval.")


def test_get_or_compute_is_fetch_value() -> None:
    seen: list[dict[str, Any]] = []

    class Spy(LayeredCache):
        def fetch(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(kwargs)
            return super().fetch(*args, **kwargs)

    cache = Spy(path=None, embedder=HashEmbedder(), clock=FakeClock())
    assert cache.get_or_compute("q?", lambda: "a", ttl=60, tags=["t"]) == "a"
    assert seen and seen[0]["ttl"] == 60 and list(seen[0]["tags"]) == ["t"]


async def test_aget_or_compute_is_afetch_value() -> None:
    seen: list[str] = []

    class Spy(LayeredCache):
        async def afetch(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(args[0])
            return await super().afetch(*args, **kwargs)

    cache = Spy(path=None, embedder=HashEmbedder(), clock=FakeClock())

    async def compute() -> str:
        return "a"

    assert await cache.aget_or_compute("q?", compute) == "a"
    assert seen == ["q?"]


PAIRS = [
    ("lookup", "alookup"),
    ("store", "astore"),
    ("get_or_compute", "aget_or_compute"),
    ("fetch", "afetch"),
    ("fetch_stream", "afetch_stream"),
    ("invalidate", "ainvalidate"),
    ("invalidate_all_namespaces", "ainvalidate_all_namespaces"),
    ("feedback", "afeedback"),
    ("bump_version", "abump_version"),
    ("clear", "aclear"),
]


@pytest.mark.parametrize(("sync", "async_"), PAIRS)
def test_twins_take_the_same_arguments(sync: str, async_: str) -> None:
    a = inspect.signature(getattr(Front, sync)).parameters
    b = inspect.signature(getattr(Front, async_)).parameters
    assert [(p.name, p.kind, p.default) for p in a.values()] == [
        (p.name, p.kind, p.default) for p in b.values()
    ]


@pytest.mark.parametrize(("sync", "async_"), PAIRS)
def test_async_twins_are_at_most_three_lines_over_one_body(sync: str, async_: str) -> None:
    """An async twin's code (its docstring aside) spans <= 3 lines."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(Front, async_))))
    fn = tree.body[0]
    assert isinstance(fn, ast.AsyncFunctionDef)
    body = fn.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    span = (body[-1].end_lineno or 0) - body[0].lineno + 1
    assert span <= 3, f"{async_}: {span} lines"


def test_the_doctest_modules_skip_no_example() -> None:
    """``make check`` runs the doctests of DOCTEST_MODULES: none may hide behind +SKIP."""
    root = Path(__file__).resolve().parents[3]
    make_file = (root / "Makefile").read_text().replace("\\\n", " ")
    line = next(ln for ln in make_file.splitlines() if ln.startswith("DOCTEST_MODULES"))
    modules = line.split(":=", 1)[1].split()
    assert "agent_cache/cache.py" in modules
    for module in modules:
        text = (root / module).read_text()
        assert ">>>" in text, module
        assert "+SKIP" not in text, module


async def test_a_mistyped_keyword_names_the_method_and_the_nearest_names() -> None:
    cache = make()
    calls: list[int] = []
    with pytest.raises(TypeError, match=r"LayeredCache\.fetch\(\).*'tag'.*did you mean 'tags'"):
        cache.fetch("q?", lambda: calls.append(1), tag=["x"])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"LayeredCache\.lookup\(\).*'ttl'"):
        await cache.alookup("q?", ttl=60)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="policy"):
        cache.get_or_compute("q?", lambda: calls.append(1), policy="refrsh")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ttl"):
        cache.fetch_stream("q?", lambda: iter(["a"]), join="".join, ttl=-1)
    assert calls == [] and cache.stats().lookups == 0  # refused before anything ran
