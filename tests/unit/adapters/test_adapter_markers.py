"""One hit-marker schema in both adapters: the same keys on hits, misses and streams."""

from __future__ import annotations

from functools import reduce
from operator import add
from typing import Any

from langchain_agent_cache import CachedChatModel
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from llama_index.core.base.llms.types import ChatMessage
from llama_index.llms.agent_cache import CachedLLM

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder
from tests.unit.llama_index.test_li_llm import CountingLLM

KEYS = {"hit", "layer", "score", "matched_prompt", "key", "saved_usage", "coalesced"}
Q = "What is retrieval augmented generation?"


def core() -> LayeredCache:
    return LayeredCache(path=None, embedder=HashEmbedder(dim=256), threshold=0.8)


def lc_markers() -> list[dict[str, Any]]:
    usage = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}
    replies = [AIMessage(content=f"RAG retrieves, then writes {i}.", usage_metadata=usage)
               for i in range(4)]  # fmt: skip
    model = CachedChatModel(llm=GenericFakeChatModel(messages=iter(replies)), cache=core())

    def streamed(q: str) -> BaseMessage:
        return reduce(add, model.stream(q))  # type: ignore[no-any-return]

    found = [model.invoke(Q), model.invoke(Q), streamed("How do I reset it?"), streamed(Q)]
    return [m.response_metadata["agent_cache"] for m in found]


def li_markers() -> list[dict[str, Any]]:
    llm = CachedLLM(llm=CountingLLM(), cache=core())
    msgs = [ChatMessage(role="user", content=Q)]
    other = [ChatMessage(role="user", content="How do I reset it?")]
    found = [llm.chat(msgs), llm.chat(msgs), list(llm.stream_chat(other))[-1],
             list(llm.stream_chat(msgs))[-1]]  # fmt: skip
    return [r.additional_kwargs["agent_cache"] for r in found]


def test_both_adapters_mark_hits_and_misses_with_the_same_keys() -> None:
    for name, markers in (("langchain", lc_markers()), ("llama_index", li_markers())):
        miss, hit, streamed_miss, streamed_hit = markers
        for marker in markers:
            assert set(marker) == KEYS, name
        assert [m["hit"] for m in markers] == [False, True, False, True], name
        assert (miss["layer"], miss["key"], miss["coalesced"]) == (None, None, False), name
        assert hit["layer"] == streamed_hit["layer"] == "exact", name
        assert hit["key"] and hit["matched_prompt"] == Q, name
        assert streamed_miss["layer"] is None, name


def test_langchain_hit_reports_the_usage_it_saved() -> None:
    hit = lc_markers()[1]
    assert hit["saved_usage"]["total_tokens"] == 10
