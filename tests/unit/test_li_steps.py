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
    @cache_step(name="plan", cache=CACHE)
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


def test_non_json_arguments_need_a_key() -> None:
    @cache_step(cache=CACHE)
    def use(obj: Any) -> str:
        return "x"

    with pytest.raises(ConfigurationError, match="key="):
        use(object())

    @cache_step(cache=CACHE, key=lambda obj: "fixed")
    def keyed(obj: Any) -> str:
        RUNS.append("run")
        return "x"

    keyed(object())
    keyed(object())
    assert RUNS == ["run"]
