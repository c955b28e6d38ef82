"""Calls the cache must never break, and values that must read back as they were given
(issue 19, points 6 and 7)."""

from __future__ import annotations

import collections
import enum
import logging
from typing import Any

import pytest

from agent_cache import LayeredCache
from agent_cache.errors import SerializationError
from agent_cache.keys import canonical_json
from agent_cache.testing import HashEmbedder
from agent_cache.tools import StepCache, ToolCache


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def cache() -> LayeredCache:
    return LayeredCache(path=None, embedder=HashEmbedder())


# ---------------------------------------------------------------------- point 6
def test_canonical_json_takes_any_depth() -> None:
    text = canonical_json({"a": _nested(100_000)})
    assert text.startswith('{"a":[[[') and text.endswith('"leaf"' + "]" * 100_000 + "}")


def test_canonical_json_writes_what_it_wrote_before() -> None:
    value = {"b": (1, 2.0, -0.0, 1.5, None, True), 2: {"é": '\u2028"\\'}, "a": []}
    assert canonical_json(value) == '{"2":{"é":"\u2028\\"\\\\"},"a":[],"b":[1,2,0,1.5,null,true]}'


def test_tool_call_with_deep_arguments_runs_and_is_cached(cache: LayeredCache) -> None:
    tools = ToolCache(cache)
    runs: list[int] = []

    def tool(payload: Any) -> str:
        runs.append(1)
        return "done"

    for _ in range(3):
        assert tools.call("deep", {"payload": _nested(500)}, tool) == "done"
    assert len(runs) == 1  # the key is built at any depth: one run, then hits


def test_tool_call_whose_key_cannot_be_built_runs_uncached(
    cache: LayeredCache, caplog: pytest.LogCaptureFixture
) -> None:
    tools = ToolCache(cache)
    runs: list[Any] = []

    def tool(payload: Any) -> str:
        runs.append(payload)
        return "done"

    cyclic: list[Any] = []
    cyclic.append(cyclic)
    hostile = [cyclic, object(), "\ud800", "x" * (cache.max_prompt_bytes + 1)]
    with caplog.at_level(logging.DEBUG, logger="agent_cache"):
        for payload in hostile:
            assert tools.call("odd", {"payload": payload}, tool) == "done"
    assert len(runs) == len(hostile)  # every call ran, none failed
    assert cache.stats().counters["uncached_calls"] == len(hostile)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "tool:odd@" in warned[0].getMessage()  # logged once
    assert tools.call("odd", {"payload": [1]}, tool) == "done"  # still cached otherwise
    assert tools.call("odd", {"payload": [1]}, tool) == "done"
    assert len(runs) == len(hostile) + 1


def test_step_run_with_a_key_it_cannot_build_runs_uncached(cache: LayeredCache) -> None:
    steps = StepCache(cache)
    assert steps.run("plan", {"plan": _nested(500)}, lambda v: "p") == "p"  # cached
    assert steps.run("plan", {"plan": _nested(500)}, lambda v: "not run") == "p"
    huge = "x" * (cache.max_prompt_bytes + 1)
    assert steps.run("plan", huge, lambda v: len(v)) == len(huge)
    assert steps.run("plan", "\ud800 lone surrogate", lambda v: "s") == "s"
    assert steps.run("plan", {"when": object()}, lambda v: "o") == "o"
    assert cache.stats().counters["uncached_calls"] == 3


async def test_async_tool_and_step_never_fail_for_their_key(cache: LayeredCache) -> None:
    async def tool(payload: Any) -> str:
        return "async done"

    tools = ToolCache(cache)
    assert await tools.acall("deep", {"payload": _nested(500)}, tool) == "async done"
    assert await tools.acall("deep", {"payload": object()}, tool) == "async done"

    async def step(value: Any) -> str:
        return "async step"

    assert await StepCache(cache).arun("plan", _nested(500), step) == "async step"
    assert await StepCache(cache).arun("plan", [object()], step) == "async step"
    assert cache.stats().counters["uncached_calls"] == 2


# ---------------------------------------------------------------------- point 7
class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


INEXACT: list[Any] = [
    {1: "a"},
    {1: "int", "1": "str"},
    {True: "t", None: "n"},
    ("a", "tuple"),
    {"nested": [1, ("t",)]},
    Color.RED,
    Name("a str subclass"),
    {"k": Color.RED},
    collections.OrderedDict(a=1),
]


@pytest.mark.parametrize("value", INEXACT, ids=repr)
def test_a_value_that_reads_back_different_is_returned_not_stored(
    cache: LayeredCache, value: Any
) -> None:
    calls: list[int] = []

    def compute() -> Any:
        calls.append(1)
        return value

    first = cache.get_or_compute("what is the value?", compute)
    second = cache.get_or_compute("what is the value?", compute)
    assert first is value and second is value  # the caller's value, each time
    assert len(calls) == 2  # never served from the cache as something else
    assert cache.lookup("what is the value?") is None
    counters = cache.stats().counters
    assert counters["not_stored"] == 2 and counters["not_exact"] == 2


@pytest.mark.parametrize("value", INEXACT, ids=repr)
def test_store_refuses_a_value_that_reads_back_different(cache: LayeredCache, value: Any) -> None:
    with pytest.raises(SerializationError, match="read back"):
        cache.store("what is the value?", value)
    assert cache.lookup("what is the value?") is None


@pytest.mark.parametrize(
    "value",
    [{"a": [1, 2.5, None, True, "s", {"b": []}]}, [0], 0, -1.5, "x" * 10_000],
    ids=repr,
)
def test_exact_json_values_read_back_equal_with_equal_types(
    cache: LayeredCache, value: Any
) -> None:
    computed = cache.get_or_compute(f"exact {value!r:.30}", lambda: value)
    hit = cache.get_or_compute(f"exact {value!r:.30}", lambda: pytest.fail("not cached"))
    assert computed == hit and _types(computed) == _types(hit)


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {(type(k), k): _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value)


def test_a_tool_result_tuple_is_returned_as_a_tuple(cache: LayeredCache) -> None:
    tools = ToolCache(cache)
    for _ in range(2):
        result = tools.call("pair", {"x": 1}, lambda x: (x, "one"))
        assert result == (1, "one") and type(result) is tuple
