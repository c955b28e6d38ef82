"""Bad input never loses data and never leaks a foreign exception, on every backend.

``BadInput`` is a mixin: a subclass provides ``cache`` (an empty cache). Memory and SQLite
run here; Redis runs the same cases in ``tests/integration/test_bad_input_real.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_cache import LayeredCache
from agent_cache._request import MAX_JSON_DEPTH
from agent_cache.errors import AgentCacheError, ConfigurationError, SerializationError
from agent_cache.testing import HashEmbedder


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


BAD_TTLS = ["10", True, math.nan, math.inf, -math.inf, -1, [5], b"1"]
BAD_ANSWERS = [
    "lone \ud800 surrogate",
    {"text": "ok", "extra": "\udfff"},
    {"\ud800key": "value"},
    {"score": math.nan},
    [1.0, math.inf],
    _nested(MAX_JSON_DEPTH + 1),
    _nested(50_000),  # would be a RecursionError deep inside json
    {"obj": object()},
]
ANSWER_IDS = [
    "surrogate",
    "surrogate-value",
    "surrogate-key",
    "nan",
    "inf",
    "too-deep",
    "recursion-deep",
    "object",
]


def _empty(cache: LayeredCache) -> None:
    assert cache.kv_store.count() == 0
    assert cache.vector_store.count() == 0


class BadInput:
    def test_one_string_for_tags_is_refused_everywhere(self, cache: LayeredCache) -> None:
        calls: list[int] = []
        with pytest.raises(ConfigurationError, match="not one string"):
            cache.store("q?", "a", tags="doc")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            cache.get_or_compute("q?", lambda: calls.append(1) or "a", tags="doc")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            cache.store_many([("q?", "a")], tags="doc")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            cache.invalidate(tags="doc")  # type: ignore[arg-type]
        assert calls == []
        _empty(cache)

    async def test_one_string_for_tags_is_refused_async(self, cache: LayeredCache) -> None:
        async def compute() -> str:
            raise AssertionError("the model must not be called")

        with pytest.raises(ConfigurationError):
            await cache.astore("q?", "a", tags="doc")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            await cache.aget_or_compute("q?", compute, tags="doc")  # type: ignore[arg-type]
        _empty(cache)

    @pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
    def test_ttl_must_be_a_finite_number(self, cache: LayeredCache, ttl: Any) -> None:
        calls: list[int] = []
        with pytest.raises(ConfigurationError, match="ttl"):
            cache.store("q?", "a", ttl=ttl)
        with pytest.raises(ConfigurationError, match="ttl"):
            cache.get_or_compute("q?", lambda: calls.append(1) or "a", ttl=ttl)
        with pytest.raises(ConfigurationError, match="ttl"):
            cache.store_many([("q?", "a")], ttl=ttl)
        assert calls == []
        _empty(cache)

    def test_ttl_zero_keeps_nothing(self, cache: LayeredCache) -> None:
        cache.store("q?", "a", ttl=0)
        assert cache.lookup("q?") is None
        cache.store("q?", "a", ttl=10)
        assert cache.lookup("q?") is not None

    @pytest.mark.parametrize("answer", BAD_ANSWERS, ids=ANSWER_IDS)
    def test_unstorable_answers_fail_before_anything_is_written(
        self, cache: LayeredCache, answer: Any
    ) -> None:
        with pytest.raises(SerializationError):
            cache.store("What is RAG?", answer, tags=["t"])
        with pytest.raises(SerializationError):
            cache.store_many([("What is RAG?", answer)])
        _empty(cache)
        assert cache.lookup("What is RAG?") is None

    def test_the_depth_limit_itself_is_stored(self, cache: LayeredCache) -> None:
        answer = _nested(MAX_JSON_DEPTH)
        cache.store("deep?", answer)
        hit = cache.lookup("deep?")
        assert hit is not None and hit.response == answer

    @pytest.mark.parametrize("answer", BAD_ANSWERS, ids=ANSWER_IDS)
    def test_get_or_compute_returns_the_paid_answer_even_if_unstorable(
        self, cache: LayeredCache, answer: Any
    ) -> None:
        calls: list[int] = []
        got = cache.get_or_compute("What is RAG?", lambda: calls.append(1) or answer)
        assert got is answer and calls == [1]
        assert cache.stats().errors == 1
        _empty(cache)

    async def test_aget_or_compute_returns_the_paid_answer_even_if_unstorable(
        self, cache: LayeredCache
    ) -> None:
        async def compute() -> str:
            return "lone \ud800"

        assert await cache.aget_or_compute("What is RAG?", compute) == "lone \ud800"
        assert cache.stats().errors == 1

    @pytest.mark.parametrize(
        "context",
        [{"k": "\ud800"}, ["\udfff"], _nested(50_000), {"k": object()}],
        ids=["surrogate-value", "surrogate-item", "deep", "object"],
    )
    def test_a_bad_context_is_a_configuration_error(
        self, cache: LayeredCache, context: Any
    ) -> None:
        for call in (
            lambda: cache.lookup("q?", context=context),
            lambda: cache.store("q?", "a", context=context),
            lambda: cache.get_or_compute("q?", lambda: "a", context=context),
        ):
            with pytest.raises(AgentCacheError) as info:
                call()
            assert isinstance(info.value, ConfigurationError)
        _empty(cache)


class TestMemoryBadInput(BadInput):
    @pytest.fixture
    def cache(self) -> LayeredCache:
        return LayeredCache(path=None, embedder=HashEmbedder())


class TestSQLiteBadInput(BadInput):
    @pytest.fixture
    def cache(self, tmp_path: Path) -> Iterator[LayeredCache]:
        with LayeredCache(path=tmp_path, embedder=HashEmbedder()) as cache:
            yield cache
