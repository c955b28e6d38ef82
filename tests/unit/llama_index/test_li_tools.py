"""cache_tool (LlamaIndex): canonical keys, TTL, errors not cached, sync and async."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.tools import FunctionTool, ToolMetadata, ToolOutput
from llama_index.core.tools.types import BaseTool
from llama_index.core.workflow import Context
from llama_index.tools.agent_cache import CachedTool, cache_tool

from agent_cache import ConfigurationError, LayeredCache, TtlPolicy
from agent_cache.testing import FakeClock, HashEmbedder

CALLS: list[Any] = []


def lookup_price(sku: str, qty: float = 1) -> dict[str, Any]:
    """Price of an item."""
    CALLS.append(("sync", sku, qty))
    return {"sku": sku, "total": 2.5 * qty}


async def alookup_price(sku: str, qty: float = 1) -> dict[str, Any]:
    """Price of an item."""
    CALLS.append(("async", sku, qty))
    return {"sku": sku, "total": 2.5 * qty}


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(clock: FakeClock) -> LayeredCache:
    return LayeredCache(
        path=None, embedder=HashEmbedder(), clock=clock, ttl_policy=TtlPolicy(jitter=0.0)
    )


def price_tool() -> FunctionTool:
    return FunctionTool.from_defaults(fn=lookup_price, async_fn=alookup_price)


def test_same_metadata_and_canonical_arguments(cache: LayeredCache) -> None:
    original = price_tool()
    tool = cache_tool(original, cache=cache)
    assert isinstance(tool, CachedTool) and tool.metadata is original.metadata
    first = tool.call(sku="A1", qty=2)
    assert (
        tool.call(qty=2.0, sku="A1").raw_output == first.raw_output == {"sku": "A1", "total": 5.0}
    )
    assert tool("A1", 2).content == first.content  # positional = keyword
    assert tool(sku="A1", qty=3).raw_output["total"] == 7.5
    assert CALLS == [("sync", "A1", 2), ("sync", "A1", 3)]
    assert tool.call(sku="A1", qty=2).tool_name == "lookup_price"


async def test_async_uses_the_async_function(cache: LayeredCache) -> None:
    tool = cache_tool(price_tool(), cache=cache)
    a = await tool.acall(sku="B2")
    b = await tool.acall(sku="B2")
    assert a.content == b.content and CALLS == [("async", "B2", 1)]
    tool.call(sku="B2")  # the sync path reads what the async one stored
    assert len(CALLS) == 1


def test_ttl_per_tool(cache: LayeredCache, clock: FakeClock) -> None:
    tool = cache_tool(price_tool(), ttl=60, cache=cache)
    tool.call(sku="C3")
    clock.advance(59)
    tool.call(sku="C3")
    clock.advance(2)
    tool.call(sku="C3")
    assert len(CALLS) == 2


def test_version_separates_results(cache: LayeredCache) -> None:
    cache_tool(price_tool(), cache=cache).call(sku="D4")
    cache_tool(price_tool(), cache=cache, version="v2").call(sku="D4")
    assert len(CALLS) == 2


def test_errors_are_not_cached(cache: LayeredCache) -> None:
    attempts: list[int] = []

    def flaky(q: str) -> str:
        """Fails twice."""
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("backend down")
        return "ok"

    tool = cache_tool(flaky, cache=cache)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            tool.call(q="x")
    assert tool.call(q="x").content == "ok"
    assert tool.call(q="x").content == "ok" and len(attempts) == 3


class ErrorOutputTool(BaseTool):
    """A plain BaseTool that reports errors in its output instead of raising."""

    def __init__(self) -> None:
        self.runs = 0

    @property
    def metadata(self) -> ToolMetadata:
        return ToolMetadata(name="search", description="Search.")

    def __call__(self, input: Any) -> ToolOutput:
        self.runs += 1
        return ToolOutput(
            tool_name="search",
            content=f"error {self.runs}",
            raw_input={},
            raw_output=None,
            is_error=True,
        )


async def test_error_outputs_are_not_cached_and_plain_basetool_works(cache: LayeredCache) -> None:
    inner = ErrorOutputTool()
    tool = cache_tool(inner, cache=cache)
    assert tool.call("q").is_error and tool.call("q").content == "error 2"
    assert (await tool.acall("q")).content == "error 3"


def test_non_json_output_replays_its_text(cache: LayeredCache) -> None:
    class Box:
        def __str__(self) -> str:
            return "boxed"

    def make(name: str) -> Box:
        """Make a box."""
        CALLS.append(name)
        return Box()

    tool = cache_tool(make, cache=cache)
    assert isinstance(tool.call(name="a").raw_output, Box)
    again = tool.call(name="a")
    assert again.content == "boxed" and again.raw_output == "boxed" and CALLS == ["a"]


def test_non_json_arguments_bypass(cache: LayeredCache) -> None:
    def describe(obj: Any) -> str:
        """Describe."""
        CALLS.append(1)
        return "thing"

    tool = cache_tool(describe, cache=cache)
    marker = object()
    tool.call(obj=marker)
    tool.call(obj=marker)
    assert len(CALLS) == 2


def test_context_tools_are_refused(cache: LayeredCache) -> None:
    async def remember(ctx: Context, item: str) -> str:
        """Store an item in the run state."""
        return item

    remember.__annotations__["ctx"] = Context  # resolved, as without postponed annotations
    with pytest.raises(ConfigurationError, match="Context"):
        cache_tool(FunctionTool.from_defaults(async_fn=remember), cache=cache)
    with pytest.raises(ConfigurationError):
        cache_tool(42, cache=cache)  # type: ignore[arg-type]
