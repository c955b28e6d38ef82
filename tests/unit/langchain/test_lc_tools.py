"""cache_tool: same tool to the model, results reused for the same canonical arguments."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_agent_cache import AgentCache, CachedTool, cache_tool, is_side_effecting
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, Tool, ToolException, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_tests.unit_tests import ToolsUnitTests
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from lc_fakes import CountingTool, chat, make_layered

from agent_cache import ConfigurationError
from agent_cache.testing import FakeClock


def make_adder() -> tuple[BaseTool, CountingTool]:
    counter = CountingTool(lambda a, b: a + b)

    @tool
    def add(a: int, b: float) -> float:
        """Add two numbers."""
        return counter(a, b)  # type: ignore[no-any-return]

    return add, counter


# ---------------------------------------------------------------- standard suite
class TestCachedToolStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return cache_tool(make_adder()[0], cache=make_layered())

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"a": 1, "b": 2}


# ---------------------------------------------------------------- same tool outside
def test_same_name_description_and_schema() -> None:
    add, _ = make_adder()
    cached = cache_tool(add, cache=make_layered())
    assert isinstance(cached, CachedTool)
    assert (cached.name, cached.description) == (add.name, add.description)
    assert convert_to_openai_tool(cached) == convert_to_openai_tool(add)
    assert cached.args == add.args


def test_canonical_arguments_share_one_result() -> None:
    add, counter = make_adder()
    cached = cache_tool(add, cache=make_layered())
    assert cached.invoke({"a": 1, "b": 2}) == 3
    assert cached.invoke({"b": 2.0, "a": 1}) == 3  # key order and 2 vs 2.0
    assert counter.calls == 1
    assert cached.invoke({"a": 1, "b": 3}) == 4
    assert counter.calls == 2


def test_tool_call_input_returns_a_tool_message_and_hits() -> None:
    add, counter = make_adder()
    cached = cache_tool(add, cache=make_layered())
    call = {"type": "tool_call", "name": "add", "args": {"a": 2, "b": 2}, "id": "c1"}
    first = cached.invoke(call)
    second = cached.invoke({**call, "id": "c2"})
    assert isinstance(second, ToolMessage) and second.tool_call_id == "c2"
    assert first.content == second.content == "4.0"
    assert counter.calls == 1


def test_ttl_expires_results() -> None:
    clock = FakeClock()
    add, counter = make_adder()
    cached = cache_tool(add, ttl=60, cache=make_layered(clock=clock))
    cached.invoke({"a": 1, "b": 1})
    clock.advance(30)
    cached.invoke({"a": 1, "b": 1})
    assert counter.calls == 1
    clock.advance(31)
    cached.invoke({"a": 1, "b": 1})
    assert counter.calls == 2


def test_version_and_scope_separate_results() -> None:
    layered = make_layered()
    add, counter = make_adder()
    v1 = cache_tool(add, cache=layered, version="1")
    v2 = cache_tool(add, cache=layered, version="2")
    v1.invoke({"a": 1, "b": 1})
    v2.invoke({"a": 1, "b": 1})
    assert counter.calls == 2
    per_user = cache_tool(add, cache=layered, scope=lambda config: config["configurable"]["user"])
    per_user.invoke({"a": 1, "b": 1}, config={"configurable": {"user": "ann"}})
    per_user.invoke({"a": 1, "b": 1}, config={"configurable": {"user": "ann"}})
    per_user.invoke({"a": 1, "b": 1}, config={"configurable": {"user": "bob"}})
    assert counter.calls == 4


def test_key_function_chooses_what_identifies_a_result() -> None:
    counter = CountingTool(lambda city, request_id: f"sunny in {city}")

    @tool
    def weather(city: str, request_id: str) -> str:
        """Weather for a city."""
        return counter(city, request_id)  # type: ignore[no-any-return]

    cached = cache_tool(
        weather, cache=make_layered(), key=lambda args: {"city": args["city"].strip().lower()}
    )
    cached.invoke({"city": "Oslo", "request_id": "r1"})
    assert cached.invoke({"city": " oslo", "request_id": "r2"}) == "sunny in Oslo"
    assert counter.calls == 1


def test_accepts_an_agent_cache() -> None:
    layered = make_layered()
    add, _ = make_adder()
    cache_tool(add, cache=AgentCache(layered)).invoke({"a": 5, "b": 5})
    hit = layered.lookup('{"a":5,"b":5}', "tool:add@", namespace="tools", verbatim=True)
    assert hit is not None


# ---------------------------------------------------------------- what is not cached
def test_side_effecting_tools_are_refused_unless_forced() -> None:
    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        return "sent"

    assert not is_side_effecting(send_email)
    send_email.metadata = {"side_effects": True}
    assert is_side_effecting(send_email)
    with pytest.raises(ConfigurationError, match="side-effecting"):
        cache_tool(send_email, cache=make_layered())
    assert cache_tool(send_email, cache=make_layered(), force=True).invoke({"to": "x"}) == "sent"


def test_errors_and_tool_exceptions_are_not_cached() -> None:
    attempts = CountingTool(lambda q: (_ for _ in ()).throw(ToolException("backend down")))

    @tool
    def flaky(q: str) -> str:
        """Fails."""
        return attempts(q)  # type: ignore[no-any-return]

    flaky.handle_tool_error = True
    cached = cache_tool(flaky, cache=make_layered())
    assert cached.invoke({"q": "x"}) == "backend down"  # handled like the original tool
    assert cached.invoke({"q": "x"}) == "backend down"
    assert attempts.calls == 2

    strict = cache_tool(flaky.model_copy(update={"handle_tool_error": False}), cache=make_layered())
    with pytest.raises(ToolException):
        strict.invoke({"q": "x"})


def test_error_results_and_empty_results_are_not_cached() -> None:
    outputs = iter([{"error": "rate limited"}, "", {"rows": 3}, "WRONG"])
    counter = CountingTool(lambda q: next(outputs))

    @tool
    def search(q: str) -> Any:
        """Search."""
        return counter(q)

    cached = cache_tool(search, cache=make_layered())
    assert cached.invoke({"q": "x"}) == {"error": "rate limited"}
    assert cached.invoke({"q": "x"}) == ""
    assert cached.invoke({"q": "x"}) == {"rows": 3}
    assert cached.invoke({"q": "x"}) == {"rows": 3}
    assert counter.calls == 3


def test_unserializable_results_are_served_uncached() -> None:
    marker = object()
    counter = CountingTool(lambda q: marker)

    @tool
    def handle(q: str) -> Any:
        """Returns a live object."""
        return counter(q)

    cached = cache_tool(handle, cache=make_layered())
    assert cached.invoke({"q": "x"}) is marker
    assert cached.invoke({"q": "x"}) is marker
    assert counter.calls == 2


def test_content_and_artifact_round_trips() -> None:
    counter = CountingTool(lambda q: (f"1 doc for {q}", [Document("body", metadata={"id": 1})]))

    @tool(response_format="content_and_artifact")
    def retrieve(q: str) -> tuple[str, list[Document]]:
        """Retrieve documents."""
        return counter(q)  # type: ignore[no-any-return]

    cached = cache_tool(retrieve, cache=make_layered())
    call = {"type": "tool_call", "name": "retrieve", "args": {"q": "rag"}, "id": "c1"}
    cached.invoke(call)
    msg = cached.invoke(call)
    assert counter.calls == 1
    assert msg.content == "1 doc for rag"
    assert msg.artifact == [Document("body", metadata={"id": 1})]


# ---------------------------------------------------------------- async, agents
async def test_async_calls_are_cached() -> None:
    calls = 0

    @tool
    async def lookup(q: str) -> str:
        """Async lookup."""
        nonlocal calls
        calls += 1
        return q.upper()

    cached = cache_tool(lookup, cache=make_layered())
    assert await cached.ainvoke({"q": "rag"}) == "RAG"
    assert await cached.ainvoke({"q": "rag"}) == "RAG"
    assert calls == 1


def test_injected_tool_call_id_is_not_part_of_the_key() -> None:
    counter = CountingTool(lambda city: f"sunny in {city}")

    @tool
    def weather(city: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Weather for a city."""
        return counter(city)  # type: ignore[no-any-return]

    cached = cache_tool(weather, cache=make_layered())
    assert convert_to_openai_tool(cached) == convert_to_openai_tool(weather)
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([cached]))
    graph.add_edge(START, "tools")
    app = graph.compile()
    for call_id in ("a", "b"):
        call = AIMessage(
            "", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": call_id}]
        )
        out = app.invoke({"messages": [call]})
        assert out["messages"][-1].tool_call_id == call_id
        assert out["messages"][-1].content == "sunny in Oslo"
    assert counter.calls == 1


def test_create_agent_reuses_a_repeated_tool_call() -> None:
    add, counter = make_adder()
    cached = cache_tool(add, cache=make_layered())

    def call(call_id: str) -> AIMessage:
        return AIMessage(
            "", tool_calls=[{"name": "add", "args": {"a": 20, "b": 22}, "id": call_id}]
        )

    model = chat(call("1"), "It is 42.", call("2"), "Still 42.")
    agent = create_agent(model, tools=[cached])
    first = agent.invoke({"messages": [("user", "What is 20 + 22?")]})
    second = agent.invoke({"messages": [("user", "And 20 + 22 again?")]})
    assert counter.calls == 1
    tool_results = [
        m.content for r in (first, second) for m in r["messages"] if isinstance(m, ToolMessage)
    ]
    assert tool_results == ["42.0", "42.0"]
    assert second["messages"][-1].content == "Still 42."


def test_wrapping_twice_or_non_tools_is_refused() -> None:
    add, _ = make_adder()
    cached = cache_tool(add, cache=make_layered())
    with pytest.raises(ConfigurationError):
        cache_tool(cached, cache=make_layered())
    with pytest.raises(ConfigurationError):
        cache_tool(lambda x: x, cache=make_layered())  # type: ignore[arg-type]


def test_single_input_tool_keeps_its_schema_and_inputs() -> None:
    counter = CountingTool(lambda s: s.upper())
    echo = Tool(name="echo", func=counter, description="Echo in capitals.")
    cached = cache_tool(echo, cache=make_layered())

    def params(t: BaseTool) -> dict[str, Any]:
        p = convert_to_openai_tool(t)["function"]["parameters"]
        return {**p, "properties": {k: {"type": v["type"]} for k, v in p["properties"].items()}}

    assert params(cached) == params(echo) and list(params(cached)["properties"]) == ["__arg1"]
    assert cached.invoke("hi") == cached.invoke({"__arg1": "hi"}) == "HI"
    assert counter.calls == 1
