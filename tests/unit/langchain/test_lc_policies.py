"""Every documented per-request policy does what it says, on every LangChain entry point.

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
from langchain_agent_cache import AgentCache, CachedChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import Generation
from lc_fakes import CountingChat, chat

from agent_cache import LayeredCache, TtlPolicy
from agent_cache.testing import HashEmbedder

Entry = Callable[[CachedChatModel, str, Any], str]


def _text(message: BaseMessage) -> str:
    return str(message.content)


def _config(policy: str | None) -> Any:
    return None if policy is None else {"configurable": {"agent_cache": policy}}


def _invoke(model: CachedChatModel, q: str, policy: str | None) -> str:
    return _text(model.invoke(q, config=_config(policy)))


def _ainvoke(model: CachedChatModel, q: str, policy: str | None) -> str:
    return _text(asyncio.run(model.ainvoke(q, config=_config(policy))))


def _stream(model: CachedChatModel, q: str, policy: str | None) -> str:
    return "".join(str(c.content) for c in model.stream(q, config=_config(policy)))


def _astream(model: CachedChatModel, q: str, policy: str | None) -> str:
    async def run() -> str:
        return "".join([str(c.content) async for c in model.astream(q, config=_config(policy))])

    return asyncio.run(run())


def _batch(model: CachedChatModel, q: str, policy: str | None) -> str:
    return _text(model.batch([q], config=_config(policy))[0])


def _abatch(model: CachedChatModel, q: str, policy: str | None) -> str:
    return _text(asyncio.run(model.abatch([q], config=_config(policy)))[0])


ENTRIES: dict[str, Entry] = {
    "invoke": _invoke,
    "ainvoke": _ainvoke,
    "stream": _stream,
    "astream": _astream,
    "batch": _batch,
    "abatch": _abatch,
}


def on_disk(tmp_path: Path) -> LayeredCache:
    return LayeredCache(
        path=tmp_path / "cache",
        embedder=HashEmbedder(dim=256),
        threshold=0.75,
        ttl_policy=TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()),
    )


def numbered() -> CountingChat:
    return chat(*[f"answer {i}" for i in range(20)])


@pytest.mark.parametrize("policy", ["bypass", "refresh", "no_store"])
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_policy_does_what_it_says(tmp_path: Path, entry: str, policy: str) -> None:
    run = ENTRIES[entry]
    model = numbered()
    wrapper = CachedChatModel(llm=model, cache=on_disk(tmp_path))
    q = "What is retrieval augmented generation?"
    seeded = run(wrapper, q, None)
    assert (seeded, model.calls) == ("answer 0", 1)

    got = run(wrapper, q, policy)
    after = run(wrapper, q, None)
    if policy == "bypass":  # the model, as if there were no cache; nothing written
        assert (got, after, model.calls) == ("answer 1", "answer 0", 2)
    elif policy == "refresh":  # the model, and its answer replaces the entry
        assert (got, after, model.calls) == ("answer 1", "answer 1", 2)
    else:  # no_store: served from the cache; a miss is computed and not written
        assert (got, after, model.calls) == ("answer 0", "answer 0", 1)
        other = "How do I reset my password?"
        assert run(wrapper, other, policy) == "answer 1"
        assert run(wrapper, other, None) == "answer 2"
        assert model.calls == 3


# ---------------------------------------------------------------- sampled requests
HOT = "model=fake---[('stop', None), ('temperature', 0.9)]"


@pytest.mark.parametrize("sampling", ["skip", "n_samples"])
def test_sampled_request_under_bypass_writes_nothing(tmp_path: Path, sampling: str) -> None:
    layered = on_disk(tmp_path)
    cache = AgentCache(layered, sampling=sampling, n_samples=2)  # type: ignore[arg-type]
    got = cache.fetch_result("a poem", HOT, lambda: [Generation(text="roses")], policy="bypass")
    assert got.computed and got.generations[0].text == "roses"
    assert layered.stats().stores == 0
    assert layered.entry_counts().get("exact", 0) == 0


def test_n_samples_request_is_one_lookup(tmp_path: Path) -> None:
    layered = on_disk(tmp_path)
    cache = AgentCache(layered, sampling="n_samples", n_samples=2)
    answers = iter(["roses", "violets", "tulips", "daisies"])
    served = [
        cache.fetch_result("a poem", HOT, lambda: [Generation(text=next(answers))])
        .generations[0]
        .text
        for _ in range(4)
    ]
    assert served == ["roses", "violets", "roses", "violets"]  # two kept, then rotated
    stats = layered.stats()
    assert stats.lookups == 4  # one lookup per request, never two
    assert (stats.hits["exact"], stats.misses) == (2, 2)


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_sampled_chat_goes_through_the_core(tmp_path: Path, entry: str) -> None:
    """``n_samples`` keeps two answers and rotates; ``skip`` pays every call, writes none."""
    run = ENTRIES[entry]
    for sampling, expected, calls in (
        ("n_samples", ["answer 0", "answer 1", "answer 0", "answer 1"], 2),
        ("skip", ["answer 0", "answer 1", "answer 2", "answer 3"], 4),
    ):
        layered = on_disk(tmp_path / sampling)
        cache = AgentCache(layered, sampling=sampling, n_samples=2)  # type: ignore[arg-type]
        model = numbered()
        wrapper = CachedChatModel(llm=model, cache=cache, temperature=0.9)
        assert [run(wrapper, "Write a poem.", None) for _ in range(4)] == expected
        assert model.calls == calls
        stats = layered.stats()  # one request each; a skipped one is the core's bypass
        bypassed, stores = (0, 2) if sampling == "n_samples" else (4, 0)
        assert (stats.lookups, stats.bypassed, stats.stores) == (4, bypassed, stores)


# ---------------------------------------------------------------- the LLM cache itself
def _cache_entry(name: str) -> Callable[[AgentCache, str, Any, Callable[[], str]], str]:
    """``AgentCache``'s own request paths (what ``CachedChatModel`` stands on)."""
    llm = "model=fake---[('stop', None)]"

    def run(cache: AgentCache, q: str, policy: Any, answer: Callable[[], str]) -> str:
        kw = {} if policy is None else {"policy": policy}
        gens = lambda: [Generation(text=answer())]  # noqa: E731

        async def agens() -> list[Generation]:
            return gens()

        def chunks() -> Any:
            from langchain_core.messages import AIMessageChunk
            from langchain_core.outputs import ChatGenerationChunk

            yield ChatGenerationChunk(message=AIMessageChunk(content=answer()))

        async def achunks() -> Any:
            for chunk in chunks():
                yield chunk

        async def collect(stream: Any) -> str:
            return "".join([c.text async for c in stream])

        if name == "fetch_result":
            return cache.fetch_result(q, llm, gens, **kw).generations[0].text
        if name == "afetch_result":
            return asyncio.run(cache.afetch_result(q, llm, agens, **kw)).generations[0].text
        if name == "stream_result":
            return "".join(c.text for c in cache.stream_result(q, llm, chunks, **kw))
        return asyncio.run(collect(cache.astream_result(q, llm, achunks, **kw)))

    return run


@pytest.mark.parametrize("policy", ["bypass", "refresh", "no_store"])
@pytest.mark.parametrize(
    "name", ["fetch_result", "afetch_result", "stream_result", "astream_result"]
)
def test_llm_cache_policy_does_what_it_says(tmp_path: Path, name: str, policy: str) -> None:
    run = _cache_entry(name)
    cache = AgentCache(on_disk(tmp_path))
    n = iter(range(10))
    answer = lambda: f"answer {next(n)}"  # noqa: E731
    q = "What is retrieval augmented generation?"
    assert run(cache, q, None, answer) == "answer 0"
    got, after = run(cache, q, policy, answer), run(cache, q, None, answer)
    expected = {"bypass": ("answer 1", "answer 0"), "refresh": ("answer 1", "answer 1"),
                "no_store": ("answer 0", "answer 0")}  # fmt: skip
    assert (got, after) == expected[policy]
