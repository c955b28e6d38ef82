"""cache_step: workflow steps keyed by their input event, plain functions by their args."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.workflow import Context, Event, StartEvent, StopEvent, Workflow, step
from llama_index.tools.agent_cache import cache_step

from agent_cache import ConfigurationError, LayeredCache
from agent_cache.testing import HashEmbedder

RUNS: list[str] = []
CACHE = LayeredCache(path=None, embedder=HashEmbedder(dim=256), threshold=0.8)


class PlanEvent(Event):
    steps: list[str]


class PlanFlow(Workflow):
    @step
    @cache_step(name="plan", cache=CACHE, allow_ctx=True)  # ctx unused: safe to skip
    async def plan(self, ctx: Context, ev: StartEvent) -> PlanEvent:
        RUNS.append(ev.topic)
        return PlanEvent(steps=[f"research {ev.topic}", f"write about {ev.topic}"])

    @step
    async def finish(self, ev: PlanEvent) -> StopEvent:
        return StopEvent(result=" / ".join(ev.steps))


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()
    CACHE.clear()


async def test_workflow_step_is_reused_for_the_same_event() -> None:
    first = await PlanFlow(timeout=10).run(topic="caching")
    second = await PlanFlow(timeout=10).run(topic="caching")
    third = await PlanFlow(timeout=10).run(topic="routing")
    assert first == second == "research caching / write about caching"
    assert third == "research routing / write about routing"
    assert RUNS == ["caching", "routing"]


def test_plain_function_sync_and_semantic_key() -> None:
    @cache_step(cache=CACHE, version="v1")
    def decompose(question: str, max_parts: int = 2) -> list[str]:
        RUNS.append(question)
        return [f"{question} (part {i})" for i in range(max_parts)]

    assert decompose("How do I reset my password?") == decompose("How do I reset my password?")
    decompose("How do I reset my password?", max_parts=3)
    assert len(RUNS) == 2

    @cache_step(name="rewrite", cache=CACHE, semantic=True, key=lambda q: q)
    def rewrite(q: str) -> str:
        RUNS.append(q)
        return q.upper()

    rewrite("How do I reset my password?")
    assert rewrite("How can I reset my password?") == "HOW DO I RESET MY PASSWORD?"
    assert len(RUNS) == 3


async def test_async_function_none_and_errors_not_cached() -> None:
    @cache_step(cache=CACHE)
    async def maybe(x: int) -> dict[str, int] | None:
        RUNS.append(str(x))
        if x < 0:
            raise ValueError("negative")
        return None if x == 0 else {"x": x}

    assert await maybe(0) is None and await maybe(0) is None
    for _ in range(2):
        with pytest.raises(ValueError):
            await maybe(-1)
    assert await maybe(1) == await maybe(1) == {"x": 1}
    assert RUNS == ["0", "0", "-1", "-1", "1"]


def test_non_json_arguments_run_uncached_unless_keyed(caplog: pytest.LogCaptureFixture) -> None:
    @cache_step(cache=CACHE)
    def use(obj: Any) -> str:
        RUNS.append("use")
        return "x"

    assert use(object()) == use(object()) == "x"  # as cache_tool: skipped, never an error
    assert RUNS == ["use", "use"]
    assert "pass key=" in caplog.text
    RUNS.clear()

    @cache_step(cache=CACHE, key=lambda obj: "fixed")
    def keyed(obj: Any) -> str:
        RUNS.append("run")
        return "x"

    keyed(object())
    keyed(object())
    assert RUNS == ["run"]


class Opaque:
    """A value with no JSON form."""


class HandleFlow(Workflow):
    @step
    @cache_step(name="handle", cache=CACHE)
    async def plan(self, ev: StartEvent) -> PlanEvent:
        RUNS.append(ev.topic)
        return PlanEvent(steps=[f"use {ev.topic}"])

    @step
    async def finish(self, ev: PlanEvent) -> StopEvent:
        return StopEvent(result=" / ".join(ev.steps))


async def test_a_non_json_start_event_field_skips_the_cache_not_the_workflow() -> None:
    first = await HandleFlow(timeout=10).run(topic="a", handle=Opaque())
    second = await HandleFlow(timeout=10).run(topic="a", handle=Opaque())
    assert first == second == "use a"
    assert RUNS == ["a", "a"]  # ran both times, uncached
    await HandleFlow(timeout=10).run(topic="a")
    await HandleFlow(timeout=10).run(topic="a")
    assert RUNS == ["a", "a", "a"]  # a JSON start event is cached as before


def test_a_step_taking_ctx_is_refused_unless_allowed() -> None:
    with pytest.raises(ConfigurationError, match="allow_ctx=True"):

        @cache_step(cache=CACHE)
        async def annotated(self: Any, ctx: Context, ev: StartEvent) -> PlanEvent:
            return PlanEvent(steps=[])

    with pytest.raises(ConfigurationError, match="not replayed"):

        @cache_step(cache=CACHE)
        def unannotated(ctx, ev):  # type: ignore[no-untyped-def]
            return None

    @cache_step(cache=CACHE, allow_ctx=True)
    async def allowed(self: Any, ctx: Context, ev: StartEvent) -> PlanEvent:
        return PlanEvent(steps=[])

    assert allowed.__name__ == "allowed"


async def test_an_allowed_ctx_step_does_not_replay_its_store_writes() -> None:
    class CountFlow(Workflow):
        @step
        @cache_step(name="count", cache=CACHE, allow_ctx=True)
        async def plan(self, ctx: Context, ev: StartEvent) -> PlanEvent:
            await ctx.store.set("ran", True)
            return PlanEvent(steps=[ev.topic])

        @step
        async def finish(self, ctx: Context, ev: PlanEvent) -> StopEvent:
            return StopEvent(result=await ctx.store.get("ran", default=False))

    assert await CountFlow(timeout=10).run(topic="t") is True
    assert await CountFlow(timeout=10).run(topic="t") is False  # what allow_ctx accepts
