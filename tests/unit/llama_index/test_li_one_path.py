"""CachedLLM on the core's one request path (issue 9): token counts, pickling,
to_dict/from_dict, per-request policy as a call kwarg."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.core.llms import MockLLM
from llama_index.llms.agent_cache import CachedLLM
from test_li_llm import CountingLLM

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder


def user(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="user", content=text)]


def make(**kw: object) -> CachedLLM:
    return CachedLLM(
        llm=CountingLLM(), cache=LayeredCache(path=None, embedder=HashEmbedder()), **kw
    )  # type: ignore[arg-type]


def test_token_counter_counts_a_miss_once_and_a_hit_as_zero() -> None:
    counter = TokenCountingHandler()
    llm = make(callback_manager=CallbackManager([counter]))
    llm.chat(user("How do I reset my password?"))
    once = counter.total_llm_token_count
    assert once > 0 and len(counter.llm_token_counts) == 1
    llm.chat(user("How do I reset my password?"))
    assert counter.total_llm_token_count == once and len(counter.llm_token_counts) == 1


def test_token_counter_set_after_wrapping_still_counts_the_miss() -> None:
    llm = make()
    counter = TokenCountingHandler()
    llm.callback_manager = CallbackManager([counter])  # what Settings.llm = ... does
    llm.complete("What is RAG?")
    assert len(counter.llm_token_counts) == 1


def test_pickled_llm_keeps_its_cache_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    where = tmp_path / "mine"
    llm = CachedLLM(llm=MockLLM(), cache=str(where))
    again = pickle.loads(pickle.dumps(llm))
    assert again.cache.path == where.resolve()
    assert not (tmp_path / ".agent_cache").exists()


def test_from_dict_of_to_dict(tmp_path: Path) -> None:
    llm = CachedLLM(llm=MockLLM(max_tokens=7), cache=str(tmp_path / "c"), namespace="ns")
    again = CachedLLM.from_dict(llm.to_dict())
    assert isinstance(again.llm, MockLLM) and again.llm.max_tokens == 7
    assert again.namespace == "ns" and again.cache is llm.cache


def test_policy_kwarg_is_honoured_and_never_passed_on() -> None:
    llm = make()
    inner = llm.llm
    llm.chat(user("q?"))
    llm.chat(user("q?"), agent_cache="use")  # not part of the key: a hit
    assert inner.calls == {"chat": 1}  # type: ignore[attr-defined]
    llm.chat(user("q?"), agent_cache="bypass")
    assert inner.calls == {"chat": 2}  # type: ignore[attr-defined]
    llm.chat(user("q?"), agent_cache="refresh")
    assert inner.calls == {"chat": 3}  # type: ignore[attr-defined]
    llm.chat(user("other?"), agent_cache="no_store")
    llm.chat(user("other?"))
    assert inner.calls == {"chat": 5}  # type: ignore[attr-defined]
