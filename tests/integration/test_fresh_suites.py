"""Suites written without reading our code (issue 18, point 5), each
reported on its own, through the core on two stores and through both adapters:

- ``tests/data/trap_pairs_fresh.jsonl``: 196 traps in 14 kinds and 140 paraphrases in 10
  kinds over ten domains (e-commerce, health insurance, DevOps, admissions, cooking,
  personal finance, cars, renting, telecom, data science), hand-written. It was used
  to find the mechanisms of this round (crossings, added qualifiers, manner vs time,
  moved negations, nominalizations): on first contact 12 traps were served.
- ``tests/data/trap_pairs_generated.jsonl``: 250 traps in 13 families and 150
  paraphrases in 9 (30 of them two rewrites at once), generated from 41 base questions
  in twelve other domains by a grammar of slots x perturbations. It was kept out of
  the development loop (only its totals by kind were read): 17 traps served on first
  contact, 5 after this round's mechanisms.
- ``tests/data/trap_pairs_unseen.jsonl`` (2026-12-07): 200 traps in 12 kinds and 160
  paraphrases in 10 (among them a background sentence before the question), realistic
  user messages over twelve domains, written by a helper that read none of our code or
  suites. On first contact 3 traps were served and 113 paraphrases hit.
- ``tests/data/trap_pairs_unseen2.jsonl`` (2026-12-07, the next session): 224 traps in
  14 kinds (among them a background sentence that changes the answer) and 168
  paraphrases in 12 (among them the passive voice and a background sentence that does
  not), fifteen other domains, written the same way. On first contact 3 traps were
  served and 122 paraphrases hit.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_cache import LayeredCache

pytestmark = pytest.mark.integration

DATA = Path(__file__).parents[1] / "data"
# suite -> (file, most traps served, fewest paraphrases hit), as measured on 2026-12-06
SUITES = {
    "fresh": ("trap_pairs_fresh.jsonl", 0.01, 0.72),  # 0/196 served, 107/140 hit
    "generated": ("trap_pairs_generated.jsonl", 0.02, 0.70),  # 5/250 served, 110/150 hit
    "unseen": ("trap_pairs_unseen.jsonl", 0.02, 0.68),  # 3/200 served, 113/160 hit
    "unseen2": ("trap_pairs_unseen2.jsonl", 0.02, 0.70),  # 3/224 served, 122/168 hit
}


def _rows(suite: str) -> list[dict[str, Any]]:
    text = (DATA / SUITES[suite][0]).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _check(suite: str, decisions: list[tuple[dict[str, Any], bool]]) -> None:
    _, most_served, fewest_hit = SUITES[suite]
    traps = [r for r, _ in decisions if r["label"] == "refuse"]
    served = Counter(r["kind"] for r, hit in decisions if hit and r["label"] == "refuse")
    hits = Counter(r["kind"] for r, hit in decisions if hit and r["label"] == "serve")
    paraphrases = len(decisions) - len(traps)
    print(
        f"{suite}: {sum(served.values())}/{len(traps)} traps served {dict(served)}, "
        f"{sum(hits.values())}/{paraphrases} paraphrases hit"
    )
    assert sum(served.values()) <= most_served * len(traps), dict(served)
    assert sum(hits.values()) >= fewest_hit * paraphrases, dict(hits)


def _through_core(cache: LayeredCache, rows: list[dict[str, Any]]) -> list[tuple[Any, bool]]:
    out = []
    for i, r in enumerate(rows):
        cache.store(r["stored"], f"answer {i}", context=f"pair {i}")
        hit = cache.lookup(r["query"], context=f"pair {i}")
        assert hit is None or hit.response == f"answer {i}"  # never another pair's answer
        out.append((r, hit is not None))
    return out


@pytest.mark.parametrize("suite", sorted(SUITES))
@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_core_on_each_store(suite: str, store: str, tmp_path: Path, minilm: Any) -> None:
    path = None if store == "memory" else tmp_path / "cache"
    with LayeredCache(path=path, embedder=minilm) as cache:
        _check(suite, _through_core(cache, _rows(suite)))


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_through_langchain(suite: str, minilm: Any) -> None:
    from langchain_agent_cache import AgentCache
    from langchain_core.load import dumps
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_core.outputs import ChatGeneration

    cache = AgentCache(path=None, embedder=minilm)
    llm = '{"name": "ChatOpenAI", "model": "m"}---[(\'stop\', None)]'

    def prompt(i: int, text: str) -> str:
        return dumps([SystemMessage(f"Support bot, ticket {i}."), HumanMessage(text)])

    decisions = []
    for i, r in enumerate(_rows(suite)):
        generation = ChatGeneration(message=AIMessage(content=f"answer {i}"))
        cache.update(prompt(i, r["stored"]), llm, [generation])
        decisions.append((r, cache.lookup(prompt(i, r["query"]), llm) is not None))
    _check(suite, decisions)


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_through_llamaindex(suite: str, minilm: Any) -> None:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.llms.mock import MockLLM
    from llama_index.llms.agent_cache import CachedLLM

    calls: list[int] = []

    class Counting(MockLLM):
        def chat(self, messages: Any, **kw: Any) -> Any:
            calls.append(1)
            return super().chat(messages, **kw)

    llm = CachedLLM(llm=Counting(max_tokens=4), cache=LayeredCache(path=None, embedder=minilm))
    ask: Callable[[int, str], Any] = lambda i, text: llm.chat(  # noqa: E731
        [
            ChatMessage(role=MessageRole.SYSTEM, content=f"Ticket {i}."),
            ChatMessage(role=MessageRole.USER, content=text),
        ]
    )
    decisions = []
    for i, r in enumerate(_rows(suite)):
        ask(i, r["stored"])
        before = len(calls)
        ask(i, r["query"])
        decisions.append((r, len(calls) == before))  # no model call: served from the cache
    _check(suite, decisions)
