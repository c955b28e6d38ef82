"""StablePrefixPostprocessor: the same retrieved set always renders the same context."""

from __future__ import annotations

import random

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.agent_cache import StablePrefixPostprocessor


def nodes() -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(id_=f"doc-{i}", text=f"text {i}"), score=s)
        for i, s in enumerate([0.9, 0.2, 0.7, 0.5, None])
    ]


def ids(result: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in result]


@pytest.mark.parametrize("seed", range(5))
def test_order_is_stable_under_shuffled_retrieval(seed: int) -> None:
    shuffled = nodes()
    random.Random(seed).shuffle(shuffled)
    post = StablePrefixPostprocessor()
    assert ids(post.postprocess_nodes(shuffled)) == ["doc-0", "doc-1", "doc-2", "doc-3", "doc-4"]


def test_cutoff_then_top_n_then_stable_order() -> None:
    post = StablePrefixPostprocessor(similarity_cutoff=0.4)
    assert ids(post.postprocess_nodes(nodes())) == ["doc-0", "doc-2", "doc-3"]
    best_two = StablePrefixPostprocessor(top_n=2)
    assert ids(best_two.postprocess_nodes(nodes()[::-1])) == ["doc-0", "doc-2"]


def test_duplicate_texts_are_dropped_and_content_order() -> None:
    twins = [
        NodeWithScore(node=TextNode(id_="b", text="same"), score=0.5),
        NodeWithScore(node=TextNode(id_="a", text="same"), score=0.4),
        NodeWithScore(node=TextNode(id_="c", text="other"), score=0.3),
    ]
    assert len(StablePrefixPostprocessor().postprocess_nodes(twins)) == 2
    by_content = StablePrefixPostprocessor(order_by="content")
    renamed = [
        NodeWithScore(node=TextNode(id_=f"x{i}", text=n.node.get_content()), score=n.score)
        for i, n in enumerate(twins[::-1])
    ]
    texts = [n.node.get_content() for n in by_content.postprocess_nodes(twins)]
    assert texts == [n.node.get_content() for n in by_content.postprocess_nodes(renamed)]


async def test_async_path_matches_sync() -> None:
    post = StablePrefixPostprocessor(similarity_cutoff=0.1)
    shuffled = nodes()[::-1]
    assert ids(await post.apostprocess_nodes(shuffled, QueryBundle("q"))) == ids(
        post.postprocess_nodes(nodes())
    )


def test_query_engine_prompt_is_identical_for_any_retrieval_order() -> None:
    texts = ["Alpha doc.", "Beta doc.", "Gamma doc."]
    index = VectorStoreIndex(
        [TextNode(id_=f"n{i}", text=t) for i, t in enumerate(texts)],
        embed_model=MockEmbedding(embed_dim=4),
    )
    retriever = index.as_retriever(similarity_top_k=3)
    post = StablePrefixPostprocessor()
    retrieved = retriever.retrieve("q")
    orders = set()
    for seed in range(4):
        shuffled = list(retrieved)
        random.Random(seed).shuffle(shuffled)
        orders.add(tuple(n.node.get_content() for n in post.postprocess_nodes(shuffled)))
    assert orders == {("Alpha doc.", "Beta doc.", "Gamma doc.")}
    engine = index.as_query_engine(llm=MockLLM(), node_postprocessors=[post], similarity_top_k=3)
    # MockLLM echoes the prompt: the context appears in the stable order
    answer = str(engine.query("q"))
    assert answer.index("Alpha") < answer.index("Beta") < answer.index("Gamma")


def test_a_duplicate_text_is_dropped_whatever_its_position() -> None:
    shuffled = [*nodes()[::-1], NodeWithScore(node=TextNode(id_="dup", text="text 1"), score=0.1)]
    with_dup_first = [shuffled[-1], *shuffled[:-1]]
    out = ids(StablePrefixPostprocessor().postprocess_nodes(shuffled))
    assert out == ids(StablePrefixPostprocessor().postprocess_nodes(with_dup_first))
    assert len(out) == 5  # the duplicate text was dropped


def _noisy() -> list[NodeWithScore]:
    """Retrieval with duplicates: one chunk returned twice (two scores), one text from two
    sources (different metadata), numeric ids."""
    return [
        NodeWithScore(node=TextNode(id_="10", text="shared", metadata={"src": "a.pdf"}), score=0.8),
        NodeWithScore(node=TextNode(id_="10", text="shared", metadata={"src": "a.pdf"}), score=0.6),
        NodeWithScore(node=TextNode(id_="2", text="shared", metadata={"src": "b.pdf"}), score=0.7),
        NodeWithScore(node=TextNode(id_="1", text="alone"), score=0.5),
        NodeWithScore(node=TextNode(id_="3", text="alone"), score=0.4),
    ]


def _render(result: list[NodeWithScore]) -> tuple[tuple[str, str, str, float | None], ...]:
    return tuple(
        (n.node.node_id, n.node.get_content(), str(n.node.metadata), n.score) for n in result
    )


@pytest.mark.parametrize("top_n", [None, 3])
def test_dedupe_does_not_depend_on_retrieval_order(top_n: int | None) -> None:
    post = StablePrefixPostprocessor(top_n=top_n)
    outcomes = set()
    for seed in range(20):
        shuffled = _noisy()
        random.Random(seed).shuffle(shuffled)
        outcomes.add(_render(post.postprocess_nodes(shuffled)))
    assert len(outcomes) == 1


def test_same_text_with_different_metadata_is_kept_apart() -> None:
    result = StablePrefixPostprocessor().postprocess_nodes(_noisy())
    assert [n.node.node_id for n in result] == ["1", "2", "10"]  # numbers as numbers; "3"
    # has the text of "1" and no metadata: a duplicate, dropped whatever the order
    sources = [n.node.metadata.get("src") for n in result if n.node.get_content() == "shared"]
    assert sorted(sources) == ["a.pdf", "b.pdf"]
    assert next(n.score for n in result if n.node.node_id == "10") == 0.8  # the best copy


def test_top_n_counts_distinct_nodes() -> None:
    result = StablePrefixPostprocessor(top_n=3).postprocess_nodes(_noisy())
    assert [n.node.node_id for n in result] == ["1", "2", "10"]  # the duplicate took no slot
