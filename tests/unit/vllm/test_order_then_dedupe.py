"""Order first, then dedupe: the context never depends on retrieval order (issue 9)."""

from __future__ import annotations

import random

from langchain_agent_cache import StableContextOrderer
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.agent_cache import StablePrefixPostprocessor

from agent_cache.prompt import order_documents


def test_core_order_with_duplicates_is_independent_of_retrieval_order() -> None:
    # the same text under two ids: which one is kept must not depend on input order
    docs = [
        {"id": "b", "content": "same"},
        {"id": "a", "content": "same"},
        {"id": "c", "content": "other"},
    ]
    seen = set()
    rng = random.Random(0)
    for _ in range(20):
        rng.shuffle(docs)
        seen.add(tuple(d["id"] for d in order_documents(docs)))
    assert seen == {("a", "c")}


def test_core_numeric_ids_sort_as_numbers() -> None:
    docs = [{"id": i, "content": f"doc {i}"} for i in (10, 2, 1)]
    assert [d["id"] for d in order_documents(docs)] == [1, 2, 10]


def test_lc_orderer_is_independent_of_retrieval_order_with_duplicates() -> None:
    docs = [Document("same", id="b"), Document("same", id="a"), Document("x", id="c")]
    contexts = set()
    rng = random.Random(1)
    for _ in range(20):
        rng.shuffle(docs)
        contexts.add(tuple(d.id for d in StableContextOrderer().invoke(docs)))
    assert contexts == {("a", "c")}


def test_lc_orderer_numeric_ids_and_plain_strings() -> None:
    docs = [Document(f"d{i}", metadata={"id": i}) for i in (10, 2, 1)]
    assert [d.metadata["id"] for d in StableContextOrderer().invoke(docs)] == [1, 2, 10]
    out = StableContextOrderer().transform_documents(["beta", "alpha", "beta"])
    assert all(isinstance(d, Document) for d in out)
    assert sorted(d.page_content for d in out) == ["alpha", "beta"]


def _nodes(*specs: tuple[str, str, dict[str, str]]) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=i, text=t, metadata=m), score=0.5) for i, t, m in specs]


def test_li_postprocessor_orders_then_dedupes() -> None:
    specs = [("b", "same", {}), ("a", "same", {}), ("c", "other", {})]
    seen = set()
    rng = random.Random(2)
    for _ in range(20):
        rng.shuffle(specs)
        out = StablePrefixPostprocessor().postprocess_nodes(_nodes(*specs))
        seen.add(tuple(n.node.node_id for n in out))
    assert seen == {("a", "c")}


def test_li_postprocessor_keeps_equal_text_with_different_metadata() -> None:
    nodes = _nodes(
        ("a", "Refunds take 5 days.", {"source": "eu.md"}),
        ("b", "Refunds take 5 days.", {"source": "us.md"}),
    )
    out = StablePrefixPostprocessor().postprocess_nodes(nodes)
    assert [n.node.node_id for n in out] == ["a", "b"]
