"""Every documented per-request policy does what it says, on every CachedLLM entry point.

The cache lives on disk (SQLite, as an embedded cache does): a store shared across
processes is where a leader re-checks for an answer before paying the model, and where
``refresh`` used to serve the stored answer instead of calling the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.llms.agent_cache import CachedLLM
from test_li_llm import WORDS, CountingLLM

from agent_cache import LayeredCache, TtlPolicy
from agent_cache.testing import HashEmbedder

Entry = Callable[[CachedLLM, str, dict[str, Any]], str]


def _msgs(q: str) -> list[ChatMessage]:
    return [ChatMessage(role="user", content=q)]


async def _drain(stream: Any) -> Any:
    return [item async for item in stream][-1]


ENTRIES: dict[str, Entry] = {
    "chat": lambda llm, q, kw: str(llm.chat(_msgs(q), **kw).message.content),
    "achat": lambda llm, q, kw: str(asyncio.run(llm.achat(_msgs(q), **kw)).message.content),
    "stream_chat": lambda llm, q, kw: str(
        list(llm.stream_chat(_msgs(q), **kw))[-1].message.content
    ),
    "astream_chat": lambda llm, q, kw: str(
        asyncio.run(_drain_awaited(llm.astream_chat(_msgs(q), **kw))).message.content
    ),
    "complete": lambda llm, q, kw: llm.complete(q, **kw).text,
    "acomplete": lambda llm, q, kw: asyncio.run(llm.acomplete(q, **kw)).text,
    "stream_complete": lambda llm, q, kw: list(llm.stream_complete(q, **kw))[-1].text,
    "astream_complete": lambda llm, q, kw: (
        asyncio.run(_drain_awaited(llm.astream_complete(q, **kw))).text
    ),
}


async def _drain_awaited(opening: Any) -> Any:
    return await _drain(await opening)


def on_disk(tmp_path: Path) -> LayeredCache:
    return LayeredCache(
        path=tmp_path / "cache",
        embedder=HashEmbedder(dim=256),
        threshold=0.8,
        ttl_policy=TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()),
    )


@pytest.mark.parametrize("policy", ["bypass", "refresh", "no_store"])
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_policy_does_what_it_says(tmp_path: Path, entry: str, policy: str) -> None:
    run = ENTRIES[entry]
    inner = CountingLLM()
    llm = CachedLLM(llm=inner, cache=on_disk(tmp_path))
    q = "What is retrieval augmented generation?"
    assert (run(llm, q, {}), inner.total()) == (f"{WORDS} #1", 1)

    got = run(llm, q, {"agent_cache": policy})
    after = run(llm, q, {})
    if policy == "bypass":  # the model, as if there were no cache; nothing written
        assert (got, after, inner.total()) == (f"{WORDS} #2", f"{WORDS} #1", 2)
    elif policy == "refresh":  # the model, and its answer replaces the entry
        assert (got, after, inner.total()) == (f"{WORDS} #2", f"{WORDS} #2", 2)
    else:  # no_store: served from the cache; a miss is computed and not written
        assert (got, after, inner.total()) == (f"{WORDS} #1", f"{WORDS} #1", 1)
        other = "How do I reset my password?"
        assert run(llm, other, {"agent_cache": policy}) == f"{WORDS} #2"
        assert run(llm, other, {}) == f"{WORDS} #3"
        assert inner.total() == 3
