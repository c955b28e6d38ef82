"""CachedChatModel on the core's one request path (issue 9): off means off, per-request
policy through RunnableConfig, a miss counted once, batch coalesced."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from langchain_agent_cache import CachedChatModel, request_policy
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tracers.context import collect_runs
from lc_fakes import CountingChat, make_layered

from agent_cache import ConfigurationError

USAGE = {"input_tokens": 21, "output_tokens": 12, "total_tokens": 33}


def reply(text: str = "Reset it from the account page.") -> AIMessage:
    return AIMessage(
        text,
        usage_metadata=USAGE,  # type: ignore[arg-type]
        response_metadata={"model_name": "fake"},
    )


class SlowChat(CountingChat):
    """Takes a while, so concurrent identical requests overlap."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        time.sleep(0.2)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def many(n: int = 6) -> CountingChat:
    return CountingChat(messages=iter([reply(f"answer {i}") for i in range(n)]))


def test_cache_false_is_off_and_opens_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    inner = many()
    chat = CachedChatModel(llm=inner, cache=False)
    chat.invoke("How do I reset my password?")
    chat.invoke("How do I reset my password?")
    assert inner.calls == 2
    assert not (tmp_path / ".agent_cache").exists()


@pytest.mark.parametrize("given", ["bypass", {"policy": "bypass"}, {"bypass": True}])
def test_bypass_through_runnable_config(given: Any) -> None:
    inner = many()
    chat = CachedChatModel(llm=inner, cache=make_layered())
    chat.invoke("q?")
    out = chat.invoke("q?", config={"configurable": {"agent_cache": given}})
    assert inner.calls == 2 and out.content == "answer 1"
    assert chat.invoke("q?").content == "answer 0"  # bypass wrote nothing
    assert all("agent_cache" not in kw and "policy" not in kw for kw in inner.seen_kwargs)


def test_refresh_and_no_store_through_runnable_config() -> None:
    inner = many()
    chat = CachedChatModel(llm=inner, cache=make_layered())
    chat.invoke("q?")
    refreshed = chat.with_config(configurable={"agent_cache": "refresh"}).invoke("q?")
    assert refreshed.content == "answer 1" and inner.calls == 2
    assert chat.invoke("q?").content == "answer 1"  # refresh overwrote
    chat.invoke("other?", config={"configurable": {"agent_cache": "no_store"}})
    chat.invoke("other?")
    assert inner.calls == 4  # no_store wrote nothing
    assert all("agent_cache" not in kw for kw in inner.seen_kwargs)


def test_policy_as_a_call_kwarg_never_reaches_the_model() -> None:
    inner = many()
    chat = CachedChatModel(llm=inner, cache=make_layered())
    chat.invoke("q?")
    chat.invoke("q?", agent_cache="bypass")
    assert inner.calls == 2 and all("agent_cache" not in kw for kw in inner.seen_kwargs)
    with pytest.raises(ConfigurationError):
        request_policy({"bypas": True})


def test_streamed_request_honours_the_policy() -> None:
    inner = many()
    chat = CachedChatModel(llm=inner, cache=make_layered())
    chat.invoke("q?")
    text = "".join(
        str(c.content)
        for c in chat.stream("q?", config={"configurable": {"agent_cache": "bypass"}})
    )
    assert text == "answer 1" and inner.calls == 2


def test_a_miss_is_counted_once_and_a_hit_as_zero() -> None:
    chat = CachedChatModel(llm=many(), cache=make_layered())
    with get_usage_metadata_callback() as cb:
        chat.invoke("How do I reset my password?")
    assert sum(u["total_tokens"] for u in cb.usage_metadata.values()) == 33
    with get_usage_metadata_callback() as cb:
        hit = chat.invoke("How do I reset my password?")
    assert sum(u["total_tokens"] for u in cb.usage_metadata.values()) == 0
    assert hit.response_metadata["agent_cache"]["layer"] == "exact"
    assert hit.usage_metadata is not None and hit.usage_metadata["total_tokens"] == 0


def test_one_root_run_per_miss() -> None:
    chat = CachedChatModel(llm=many(), cache=make_layered())
    with collect_runs() as runs:
        chat.invoke("How do I reset my password?")
    assert len(runs.traced_runs) == 1
    assert not runs.traced_runs[0].child_runs


def test_batch_of_identical_requests_makes_one_model_call() -> None:
    inner = SlowChat(messages=iter([reply(f"answer {i}") for i in range(3)]))
    chat = CachedChatModel(llm=inner, cache=make_layered())
    with get_usage_metadata_callback() as cb:
        out = chat.batch(["How do I reset my password?"] * 3)
    assert inner.calls == 1
    assert {m.content for m in out} == {"answer 0"}
    assert sum(u["total_tokens"] for u in cb.usage_metadata.values()) == 33


async def test_abatch_of_identical_requests_makes_one_model_call() -> None:
    inner = SlowChat(messages=iter([reply(f"answer {i}") for i in range(3)]))
    chat = CachedChatModel(llm=inner, cache=make_layered())
    out = await chat.abatch(["How do I reset my password?"] * 3)
    assert {m.content for m in out} == {"answer 0"}
    assert inner.calls == 1
