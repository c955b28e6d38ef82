"""The trap suite, end to end, with the real bundled MiniLM: every store, both adapters.

``tests/data/trap_pairs.jsonl`` (written by us) holds near-miss pairs the cache must refuse
(opposites, swapped arguments, dates, entities, numbers, negation, audience, substitution)
and true paraphrases, typos and inflections it should serve. Each pair gets its own scope
(a context, or a system prompt through the adapters), so a query can only meet its own
stored question: the decision measured is exactly the labeled one.

The bar: **no** trap is served, on any backend or through either adapter; at least 75 % of
the true paraphrases (typos included) hit.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_cache import LayeredCache

pytestmark = pytest.mark.integration

TRAPS = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "data" / "trap_pairs.jsonl").read_text().splitlines()
    if line.strip()
]
REPORTED = [  # the four wrong hits of the trust issue
    ("How do I sort a list in descending order?", "How do I sort a list in ascending order?"),
    ("What is the weather in Paris tomorrow?", "What is the weather in Paris today?"),
    ("Is Madrid bigger than Rome?", "Is Rome bigger than Madrid?"),
    ("Which is newer, Python or Rust?", "Which is older, Python or Rust?"),
]


def _check(decisions: list[tuple[dict[str, Any], bool]]) -> None:
    served_traps = [r for r, hit in decisions if hit and r["label"] == "refuse"]
    serve = [hit for r, hit in decisions if r["label"] == "serve"]
    assert not served_traps, "\n".join(
        f"{r['kind']}: {r['query']!r} got {r['stored']!r}" for r in served_traps
    )
    rate = sum(serve) / len(serve)
    missed = Counter(r["kind"] for r, hit in decisions if r["label"] == "serve" and not hit)
    assert rate >= 0.75, f"paraphrase hit rate {rate:.1%}; missed by kind: {dict(missed)}"


def test_the_suite_is_what_it_claims() -> None:
    kinds = Counter((r["label"], r["kind"]) for r in TRAPS)
    assert len(TRAPS) >= 400
    assert all(
        kinds[("refuse", k)] >= 30
        for k in (
            "opposite",
            "order",
            "temporal",
            "entity",
            "number",
            "negation",
            "audience",
            "substitution",
        )
    )
    assert all(kinds[("serve", k)] >= 40 for k in ("paraphrase", "typo", "inflection"))


@pytest.fixture(params=["memory", "sqlite", "redis", "chroma-server"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, minilm: Any) -> Iterator[LayeredCache]:
    kind = request.param
    if kind == "memory":
        cache = LayeredCache(path=None, embedder=minilm)
    elif kind == "sqlite":
        cache = LayeredCache(path=tmp_path / "cache", embedder=minilm)
    elif kind == "redis":
        cache = LayeredCache(
            path=None,
            redis_url=request.getfixturevalue("redis_url"),
            prefix=f"traps-{tmp_path.name}",
            embedder=minilm,
        )
    else:
        cache = LayeredCache(
            path=None,
            redis_url=request.getfixturevalue("redis_url"),
            chroma_url=request.getfixturevalue("chroma_url"),
            prefix=f"traps-{tmp_path.name}",
            embedder=minilm,
        )
    with cache:
        yield cache


def test_every_backend_refuses_every_trap(backend: LayeredCache) -> None:
    decisions = []
    for i, r in enumerate(TRAPS):
        backend.store(r["stored"], f"answer {i}", context=f"pair {i}")
        hit = backend.lookup(r["query"], context=f"pair {i}")
        assert hit is None or hit.response == f"answer {i}"
        decisions.append((r, hit is not None))
    _check(decisions)
    refused = backend.stats().refused
    assert sum(refused.values()) >= len([r for r in TRAPS if r["label"] == "refuse"]) * 0.9


def test_langchain_agent_cache_refuses_every_trap(minilm: Any) -> None:
    from langchain_agent_cache import AgentCache
    from langchain_core.load import dumps
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_core.outputs import ChatGeneration

    cache = AgentCache(path=None, embedder=minilm)
    llm = '{"name": "ChatOpenAI", "model": "m"}---[(\'stop\', None)]'

    def prompt(i: int, text: str) -> str:
        return dumps([SystemMessage(f"Support bot, ticket {i}."), HumanMessage(text)])

    decisions = []
    for i, r in enumerate(TRAPS):
        cache.update(
            prompt(i, r["stored"]), llm, [ChatGeneration(message=AIMessage(content=f"answer {i}"))]
        )
        hit = cache.lookup(prompt(i, r["query"]), llm)
        decisions.append((r, hit is not None))
    _check(decisions)
    for q, s in REPORTED:
        cache.update(prompt(-1, s), llm, [ChatGeneration(message=AIMessage(content="x"))])
        assert cache.lookup(prompt(-1, q), llm) is None, q


def test_llamaindex_cached_llm_refuses_every_trap(minilm: Any) -> None:
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        LLMMetadata,
        MessageRole,
    )
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.llms import CustomLLM
    from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
    from llama_index.llms.agent_cache import CachedLLM

    class Numbered(CustomLLM):
        _n: int = PrivateAttr(default=0)

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(is_chat_model=True, model_name="numbered")

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kw: Any) -> CompletionResponse:
            self._n += 1
            return CompletionResponse(text=f"answer {self._n}")

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kw: Any) -> Any:
            done = self.complete(prompt)
            return iter([CompletionResponse(text=done.text, delta=done.text)])

        @llm_chat_callback()
        def chat(self, messages: Any, **kw: Any) -> ChatResponse:
            self._n += 1
            return ChatResponse(
                message=ChatMessage(role=MessageRole.ASSISTANT, content=f"answer {self._n}")
            )

    inner = Numbered()
    llm = CachedLLM(llm=inner, cache=LayeredCache(path=None, embedder=minilm))

    def ask(i: int, text: str) -> str:
        return str(
            llm.chat(
                [
                    ChatMessage(role=MessageRole.SYSTEM, content=f"Ticket {i}."),
                    ChatMessage(role=MessageRole.USER, content=text),
                ]
            ).message.content
        )

    decisions = []
    for i, r in enumerate(TRAPS):
        ask(i, r["stored"])
        before = inner._n
        ask(i, r["query"])
        decisions.append((r, inner._n == before))  # no model call: served from the cache
    _check(decisions)
    for q, s in REPORTED:
        ask(-1, s)
        before = inner._n
        ask(-1, q)
        assert inner._n == before + 1, q
