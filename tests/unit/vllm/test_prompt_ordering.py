"""Canonical and popularity document order, document identity, and the exports."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

import agent_cache.prompt as prompt_pkg
from agent_cache.errors import ConfigurationError
from agent_cache.prompt import PopularityOrderer, doc_key, doc_text, order_documents


def test_all_is_pinned() -> None:
    assert sorted(prompt_pkg.__all__) == sorted(
        [
            "PopularityOrderer",
            "PrefixCacheResult",
            "PrefixCacheSimulator",
            "PrefixIssue",
            "PrefixVolatilityWarning",
            "StablePrompt",
            "default_summarizer",
            "doc_key",
            "doc_text",
            "lint_prefix",
            "order_documents",
            "schedule_batch",
            "simulate_prefix_cache",
        ]
    )
    for name in prompt_pkg.__all__:
        assert hasattr(prompt_pkg, name), name


@dataclass
class LcDocument:  # the shape of langchain_core.documents.Document
    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass
class LiNode:  # the shape of a llama_index TextNode
    text: str
    node_id: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def get_content(self) -> str:
        return self.text


@dataclass
class LiNodeWithScore:
    node: LiNode
    score: float = 0.0


def test_doc_identity_and_text_by_shape() -> None:
    assert doc_key({"id": 3, "content": "x"}) == "3"
    assert doc_key({"metadata": {"doc_id": "d9"}, "text": "x"}) == "d9"
    assert doc_key(LcDocument("x", id="lc-1")) == "lc-1"
    assert doc_key(LcDocument("x", metadata={"id": "meta-1"})) == "meta-1"
    assert doc_key(LiNodeWithScore(LiNode("body", "node-7"))) == "node-7"
    assert doc_text(LiNodeWithScore(LiNode("body", "node-7"))) == "body"
    assert doc_key("same text") == doc_key("same text") != doc_key("other text")
    assert doc_key(LcDocument("same text")) == doc_key("same text")  # falls back to a hash
    with pytest.raises(TypeError):
        doc_text({"title": "no text field"})


def test_canonical_order_ignores_retrieval_order_and_drops_duplicates() -> None:
    docs = [{"id": f"d{i}", "content": f"text {i}"} for i in range(5)]
    orders = {
        tuple(d["id"] for d in order_documents(list(p))) for p in itertools.permutations(docs)
    }
    assert orders == {("d0", "d1", "d2", "d3", "d4")}
    with_dupes = [docs[2], docs[0], dict(docs[2]), docs[1]]
    assert [d["id"] for d in order_documents(with_dupes)] == ["d0", "d1", "d2"]


def test_canonical_order_with_a_custom_key_and_framework_objects() -> None:
    docs = [LcDocument("b text", id="2"), LcDocument("a text", id="1")]
    assert [d.id for d in order_documents(docs)] == ["1", "2"]
    by_text = order_documents(docs, key=lambda d: d.page_content)
    assert [d.page_content for d in by_text] == ["a text", "b text"]
    nodes = [LiNodeWithScore(LiNode("x", "n2"), 0.9), LiNodeWithScore(LiNode("y", "n1"), 0.5)]
    assert [n.node.node_id for n in order_documents(nodes)] == ["n1", "n2"]


def same(doc: str) -> str:
    return doc


def test_popularity_puts_the_most_shared_first() -> None:
    orderer = PopularityOrderer()
    for i in range(10):
        orderer.order(["hot", f"cold-{i}"], key=same)
    assert orderer.order(["a-new-doc", "hot", "cold-3"], key=same)[0] == "hot"
    assert orderer.ranking()[0] == "hot"
    assert orderer.count("hot") == 11


def test_popularity_counts_a_request_at_once_and_dedupes() -> None:
    orderer = PopularityOrderer(min_lead=0, hysteresis=0)
    assert orderer.order(["b", "a", "b"], key=same) == ["a", "b"]  # unseen: canonical order
    assert orderer.count("b") == 1  # a duplicate is counted once


def _rank_changes(orderer: PopularityOrderer) -> int:
    orderer.order(["x", "y"], key=same)
    changes, last = 0, orderer.ranking()
    for name in "y" + "xxyy" * 50:  # equally popular: they keep trading a lead of one
        orderer.order([name], key=same)
        changes += orderer.ranking() != last
        last = orderer.ranking()
    return changes


def test_hysteresis_keeps_the_order_from_churning() -> None:
    assert _rank_changes(PopularityOrderer(hysteresis=0.25, min_lead=2)) == 0
    assert _rank_changes(PopularityOrderer(hysteresis=0, min_lead=0)) >= 50


def test_a_clear_lead_does_pass() -> None:
    orderer = PopularityOrderer(hysteresis=0.25, min_lead=2)
    orderer.order(["a", "z"], key=same)
    for _ in range(4):
        orderer.order(["z"], key=same)
    assert orderer.ranking()[0] == "z"  # 5 > 1.25 * 1 + 2


def test_half_life_follows_a_drifting_workload() -> None:
    forever = PopularityOrderer(min_lead=0)
    decaying = PopularityOrderer(min_lead=0, half_life=5)
    for orderer in (forever, decaying):
        for _ in range(50):
            orderer.order(["old"], key=same)
        for _ in range(30):
            orderer.order(["new"], key=same)
    assert forever.ranking()[0] == "old"
    assert decaying.ranking()[0] == "new"
    assert decaying.count("old") < 1


def test_memory_is_bounded_and_reset_forgets() -> None:
    orderer = PopularityOrderer(max_docs=5)
    for i in range(20):
        orderer.order([f"d{i}"], key=same)
    assert len(orderer.ranking()) == 5
    orderer.reset()
    assert orderer.ranking() == []


def test_bad_parameters() -> None:
    for kwargs in ({"hysteresis": -1}, {"half_life": 0}, {"max_docs": 0}):
        with pytest.raises(ConfigurationError):
            PopularityOrderer(**kwargs)  # type: ignore[arg-type]
