"""A LangChain agent with cached tools and a cached planning sub-step, against a real
local model (SmolLM2 on llama.cpp, with llama-cpp-python's function-calling chat format).

What it shows:

- ``cache_tool``: the agent's repeated ``get_weather(city="Paris")`` call runs the tool
  once; a side-effecting tool is refused (its results must not be reused).
- ``CachedChatModel`` under ``create_agent``: the second run's model turn is a cache hit,
  the tool call it carries is replayed, and the tool cache serves the result.
- ``cache_step``: a planning chain's output is reused across runs.

Run: ``python examples/langchain_agent_tools.py`` (starts the model server on loopback),
or pass the base URL of a running server started with
``--chat_format chatml-function-calling`` (or any server with tool calling, e.g. vLLM).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import httpx
from langchain.agents import create_agent
from langchain_agent_cache import CachedChatModel, cache_step, cache_tool
from langchain_core.messages import ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from agent_cache import ConfigurationError, LayeredCache
from agent_cache.local_llm import LocalLlamaServer

WEATHER_CALLS: list[str] = []


@tool(return_direct=True)
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    WEATHER_CALLS.append(city)
    return f"It is sunny and 21 C in {city}."


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return "sent"


send_email.metadata = {"side_effects": True}

PLAN = ChatPromptTemplate.from_messages(
    [("system", "List the steps to answer the question, briefly."), ("human", "{question}")]
)


def model_id(base_url: str) -> str:
    """The first model the OpenAI-compatible server lists."""
    return str(httpx.get(f"{base_url}/models", timeout=10).json()["data"][0]["id"])


@contextlib.contextmanager
def tool_calling_model(base_url: str | None) -> Iterator[str]:
    """``base_url`` as given, or SmolLM2 with llama.cpp's function-calling chat format."""
    if base_url:
        yield base_url
        return
    with LocalLlamaServer(n_ctx=2048,
                          extra_args=("--chat_format", "chatml-function-calling")) as server:
        yield server.base_url


def tool_results(state: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)]


def main(base_url: str | None = None) -> dict[str, Any]:
    """Run the agent three times; returns counts of model requests and tool runs."""
    WEATHER_CALLS.clear()
    requests: list[str] = []
    question = "What is the weather in Paris?"
    with tool_calling_model(base_url) as url, tempfile.TemporaryDirectory() as path, \
            LayeredCache(path=path) as cache:  # fmt: skip
        http = httpx.Client(event_hooks={"request": [lambda r: requests.append(r.url.path)]})
        # llama.cpp's function-calling format only calls tools when asked to choose
        llm = ChatOpenAI(base_url=url, api_key="x", model=model_id(url),  # type: ignore[arg-type]
                         temperature=0, extra_body={"max_tokens": 64}, http_client=http,
                         model_kwargs={"tool_choice": "auto"})
        weather = cache_tool(get_weather, ttl=600, cache=cache)
        try:
            cache_tool(send_email, cache=cache)
            refused = False
        except ConfigurationError as exc:
            refused = True
            print(f"refused: {exc}")

        planner = cache_step(PLAN | llm | StrOutputParser(), name="plan", cache=cache)
        cached_agent = create_agent(CachedChatModel(llm=llm, cache=cache), tools=[weather])
        plain_agent = create_agent(llm, tools=[weather])

        runs = []
        for label, agent in [("run 1", cached_agent), ("run 2", cached_agent),
                             ("run 3, uncached model", plain_agent)]:
            before = len(requests)
            plan = planner.invoke({"question": question})
            state = agent.invoke({"messages": [("user", question)]})
            runs.append({"plan": plan, "tool_results": tool_results(state),
                         "model_requests": len(requests) - before})
            print(f"{label}: {runs[-1]['model_requests']} model request(s), "
                  f"tool results {runs[-1]['tool_results']}, weather tool ran "
                  f"{len(WEATHER_CALLS)} time(s) so far")
        print(cache.stats())
        return {"runs": runs, "weather_calls": list(WEATHER_CALLS),
                "refused_side_effecting": refused}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
