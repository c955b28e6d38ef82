"""cache_step / @cached_step: intermediate outputs reused across runs."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_agent_cache import CachedStep, cache_step, cached_step
from langchain_agent_cache.steps import semantic_split
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from lc_fakes import chat, make_layered
from pydantic import BaseModel

from agent_cache import ConfigurationError


class Plan(BaseModel):
    steps: list[str]


def counting(fn: Any) -> tuple[RunnableLambda[Any, Any], list[Any]]:
    seen: list[Any] = []

    def run(value: Any) -> Any:
        seen.append(value)
        return fn(value)

    return RunnableLambda(run), seen


def test_same_input_reuses_the_output_across_runs() -> None:
    layered = make_layered()
    planner, seen = counting(lambda q: ["search", "answer"])
    first = cache_step(planner, name="plan", cache=layered)
    assert isinstance(first, CachedStep)
    assert first.invoke({"question": "Compare RAG and fine-tuning", "depth": 2}) == [
        "search",
        "answer",
    ]
    # a later run builds a new wrapper over the same cache: dict key order is irrelevant
    again = cache_step(planner, name="plan", cache=layered)
    assert again.invoke({"depth": 2, "question": "Compare RAG and fine-tuning"}) == [
        "search",
        "answer",
    ]
    assert len(seen) == 1
    again.invoke({"depth": 3, "question": "Compare RAG and fine-tuning"})
    assert len(seen) == 2


def test_steps_with_other_names_or_versions_do_not_share() -> None:
    layered = make_layered()
    step, seen = counting(lambda q: q.upper())
    cache_step(step, name="a", cache=layered).invoke("x")
    cache_step(step, name="b", cache=layered).invoke("x")
    cache_step(step, name="a", version="2", cache=layered).invoke("x")
    assert len(seen) == 3


def test_messages_and_documents_are_canonical_inputs() -> None:
    step, seen = counting(lambda value: "summary")
    cached = cache_step(step, name="summarize", cache=make_layered())
    docs = [Document("alpha", metadata={"id": 1}), Document("beta", metadata={"id": 2})]
    cached.invoke(docs)
    cached.invoke([Document("alpha", metadata={"id": 1}), Document("beta", metadata={"id": 2})])
    assert len(seen) == 1
    history = [SystemMessage("be brief"), HumanMessage("hi")]
    cached.invoke(history)
    cached.invoke([SystemMessage("be brief"), HumanMessage("hi", id="other-id")])
    assert len(seen) == 2
    cached.invoke([SystemMessage("be verbose"), HumanMessage("hi")])
    assert len(seen) == 3


def test_semantic_step_reuses_a_paraphrase_and_scopes_the_rest() -> None:
    step, seen = counting(lambda value: ["find docs", "summarize"])
    cached = cache_step(step, name="decompose", semantic=True, cache=make_layered())
    cached.invoke({"question": "how do I reset my password", "lang": "en"})
    cached.invoke({"question": "how can I reset my password", "lang": "en"})
    assert len(seen) == 1
    cached.invoke({"question": "how can I reset my password", "lang": "de"})
    assert len(seen) == 2


def test_semantic_split_reads_text_from_inputs() -> None:
    assert semantic_split("why?") == ("why?", None)
    assert semantic_split({"query": "why?", "k": 3}) == ("why?", {"k": 3})
    assert semantic_split({"topic": "why?"}) == ("why?", None)
    question, scope = semantic_split([SystemMessage("sys"), HumanMessage("why?")])
    assert question == "why?" and scope["messages"][0]["content"] == "sys"
    with pytest.raises(ConfigurationError):
        semantic_split({"a": "x", "b": "y"})
    with pytest.raises(ConfigurationError):
        semantic_split(42)


def test_pydantic_output_is_rebuilt_on_a_hit() -> None:
    step = RunnableLambda(lambda q: Plan(steps=[q, "answer"])).with_types(output_type=Plan)
    layered = make_layered()
    first = cache_step(step, name="plan", cache=layered).invoke("search")
    served = cache_step(
        RunnableLambda(lambda q: Plan(steps=["WRONG"])), name="plan", cache=layered, models=[Plan]
    ).invoke("search")
    assert first == served == Plan(steps=["search", "answer"])


def test_chain_output_messages_round_trip() -> None:
    prompt = ChatPromptTemplate.from_messages([("human", "Plan: {question}")])
    model = chat("1. search 2. answer", "WRONG")
    planner = cache_step(prompt | model, name="plan", cache=make_layered())
    first = planner.invoke({"question": "RAG?"})
    second = planner.invoke({"question": "RAG?"})
    assert model.calls == 1
    assert isinstance(second, AIMessage) and second.content == first.content


def test_errors_are_not_cached() -> None:
    outcomes = iter([RuntimeError("boom"), "ok"])

    def flaky(_: Any) -> str:
        result = next(outcomes)
        if isinstance(result, Exception):
            raise result
        return result

    step, seen = counting(flaky)
    cached = cache_step(step, name="flaky", cache=make_layered())
    with pytest.raises(RuntimeError):
        cached.invoke("x")
    assert cached.invoke("x") == "ok"
    assert len(seen) == 2


def test_step_runs_as_a_named_chain_with_the_inner_run_nested() -> None:
    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.started: list[tuple[str | None, Any]] = []

        def on_chain_start(
            self,
            serialized: Any,
            inputs: Any,
            *,
            run_id: Any,
            parent_run_id: Any = None,
            **kwargs: Any,
        ) -> None:
            self.started.append((kwargs.get("name"), parent_run_id))

    runs = Runs()
    step, _ = counting(lambda q: "plan")
    cache_step(step, name="plan", cache=make_layered()).invoke("x", config={"callbacks": [runs]})
    names = [name for name, _ in runs.started]
    assert names[0] == "plan" and len(names) == 2
    assert runs.started[1][1] is not None  # the wrapped runnable is a child run


async def test_async_step_and_decorators() -> None:
    step, seen = counting(lambda q: q[::-1])
    cached = cache_step(step, name="rev", cache=make_layered())
    assert await cached.ainvoke("abc") == "cba"
    assert await cached.ainvoke("abc") == "cba"
    assert len(seen) == 1

    layered = make_layered()
    calls: list[str] = []

    @cached_step(name="split", cache=layered)
    def split(question: str, sep: str = " and ") -> list[str]:
        calls.append(question)
        return question.split(sep)

    assert split("a and b") == split("a and b") == ["a", "b"]
    assert split("a and b", sep=" ") == ["a", "and", "b"]
    assert calls == ["a and b", "a and b"]

    @cached_step(name="asplit", cache=layered, semantic=True)
    async def asplit(question: str) -> list[str]:
        calls.append(question)
        return question.split(" and ")

    assert await asplit("how do I reset my password") == ["how do I reset my password"]
    assert await asplit("how can I reset my password") == ["how do I reset my password"]
    assert calls[-1] == "how do I reset my password"


def test_decorated_function_returning_a_model() -> None:
    calls = 0

    @cached_step(name="model-step", cache=make_layered())
    def make_plan(question: str) -> Plan:
        nonlocal calls
        calls += 1
        return Plan(steps=[question])

    assert make_plan("q") == make_plan("q") == Plan(steps=["q"])
    assert calls == 1


def test_bad_arguments() -> None:
    with pytest.raises(ConfigurationError):
        cache_step(lambda x: x, name="x", cache=make_layered())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        cache_step(RunnableLambda(lambda x: x), name="", cache=make_layered())
