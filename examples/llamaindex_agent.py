"""A LlamaIndex agent on agent-cache: cached LLM turns (tool calls kept), cached tools and
a cached workflow step.

A real local model (SmolLM2-135M on llama.cpp, started here unless ``--llm-url`` points
at a running OpenAI-compatible server) drives a ``FunctionAgent``:

* the agent's LLM is a ``CachedLLM``: a repeated request replays the stored answer,
  *with its tool call*, so the agent runs without the model;
* the weather tool is wrapped with ``cache_tool(..., ttl=600)``: the same call with the
  same arguments is not run again, even when the LLM turn itself was not cached;
* a planning step of a ``Workflow`` is wrapped with ``cache_step``: the same input event
  reuses the stored plan.

SmolLM2-135M does not decide to call tools on its own; the agent therefore names the tool
in ``tool_choice`` (llama.cpp then constrains the output to that tool's JSON schema) and
the tool is ``return_direct``. A capable model (vLLM serving Qwen, Llama, ...) needs none
of that. llama.cpp's streamed tool calls do not parse in LlamaIndex's OpenAI client, so
the agent runs with ``streaming=False``.

Run: ``python examples/llamaindex_agent.py [--llm-url http://127.0.0.1:8000/v1]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from typing import Any

import httpx
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Event, StartEvent, StopEvent, Workflow, step
from llama_index.llms.agent_cache import CachedLLM, CacheMissEvent
from llama_index.llms.openai_like import OpenAILike
from llama_index.tools.agent_cache import cache_step, cache_tool

from agent_cache import LayeredCache
from agent_cache.local_llm import LocalLlamaServer

TOOL_RUNS: list[str] = []


def get_weather(city: str) -> str:
    """Get today's weather for a city."""
    TOOL_RUNS.append(city)
    return f"Sunny and 21 C in {city}."


class PlanEvent(Event):
    plan: str


class ModelCalls(BaseEventHandler):
    """Counts the LLM requests the cache could not answer (each one calls the model)."""

    count: int = 0

    @classmethod
    def class_name(cls) -> str:
        return "ModelCalls"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, CacheMissEvent):
            self.count += 1


def model_id(base_url: str) -> str:
    """The first model the OpenAI-compatible server serves."""
    return str(httpx.get(f"{base_url}/models", timeout=10).json()["data"][0]["id"])


def make_planner(cache: LayeredCache, llm: OpenAILike) -> type[Workflow]:
    """A two-step workflow whose planning step is cached by its input event."""

    class TripPlanner(Workflow):
        @step
        @cache_step(name="plan", cache=cache, version="v1")
        async def plan(self, ev: StartEvent) -> PlanEvent:
            reply = await llm.acomplete(f"List two things to pack for a trip to {ev.city}.")
            return PlanEvent(plan=reply.text.strip())

        @step
        async def finish(self, ev: PlanEvent) -> StopEvent:
            return StopEvent(result=ev.plan)

    return TripPlanner


async def run(llm_url: str, cache: LayeredCache) -> dict[str, Any]:
    def openai_like(**extra: Any) -> OpenAILike:
        return OpenAILike(
            api_base=llm_url,
            api_key="unused",
            model=model_id(llm_url),
            is_chat_model=True,
            context_window=2048,
            max_tokens=48,
            temperature=0.0,
            **extra,
        )

    force_tool = {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    llm = CachedLLM(
        llm=openai_like(is_function_calling_model=True, additional_kwargs=force_tool),
        cache=cache,
    )
    weather = cache_tool(FunctionTool.from_defaults(get_weather, return_direct=True), ttl=600,
                         cache=cache)  # fmt: skip

    model_calls = ModelCalls()
    get_dispatcher().add_event_handler(model_calls)
    runs = []
    for question in [
        "What is the weather in Oslo?",  # the model calls the tool
        "What is the weather in Oslo?",  # LLM turn and tool result both from the cache
        "Tell me the weather in Oslo.",  # paraphrase: cached LLM turn or cached tool result
    ]:
        agent = FunctionAgent(
            tools=[weather],
            llm=llm,
            streaming=False,
            system_prompt="You answer weather questions with the tool.",
        )
        started = time.perf_counter()
        result = await agent.run(user_msg=question)
        ms = (time.perf_counter() - started) * 1000
        calls = [(c.tool_name, c.tool_kwargs) for c in result.tool_calls]
        print(f"{question!r} -> {str(result)!r} via {calls} ({ms:.0f} ms)")
        runs.append(
            {"answer": str(result), "model_calls": model_calls.count, "tool_runs": len(TOOL_RUNS)}
        )
    get_dispatcher().event_handlers.remove(model_calls)

    planner = make_planner(cache, openai_like())
    plans = []
    for city in ["Oslo", "Oslo"]:
        started = time.perf_counter()
        plans.append(str(await planner(timeout=120).run(city=city)))
        print(
            f"plan for {city}: {plans[-1][:60]!r} ({(time.perf_counter() - started) * 1000:.0f} ms)"
        )
    print(cache.stats())
    return {"runs": runs, "plans": plans, **cache.stats().hits}


def main(llm_url: str | None = None) -> dict[str, Any]:
    """Run the demo; returns per-run model calls and tool runs, plans and hit counts."""
    TOOL_RUNS.clear()
    with contextlib.ExitStack() as stack:
        if llm_url is None:
            llm_url = stack.enter_context(LocalLlamaServer(n_ctx=2048)).base_url
        path = stack.enter_context(tempfile.TemporaryDirectory())
        cache = stack.enter_context(LayeredCache(path=path))
        return asyncio.run(run(llm_url, cache))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm-url", help="an OpenAI-compatible base URL (default: start SmolLM2)")
    main(parser.parse_args().llm_url)
