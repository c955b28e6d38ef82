"""StableContextOrderer and the stable RAG prompt: same documents, same prefix."""

from __future__ import annotations

import itertools

from langchain_agent_cache import (
    StableContextOrderer,
    document_key,
    format_documents,
    stable_rag_prompt,
)
from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.runnables import Runnable, RunnableLambda

DOCS = [
    Document("Refunds take 5 days.", metadata={"id": "refunds"}),
    Document("Shipping is free over $50.", metadata={"id": "shipping"}),
    Document("Support is open 9-5.", id="hours"),
    Document("No id here."),
]


def test_order_does_not_depend_on_retrieval_order() -> None:
    orderer = StableContextOrderer()
    outputs = {
        tuple(d.page_content for d in orderer.invoke(list(p))) for p in itertools.permutations(DOCS)
    }
    assert len(outputs) == 1


def test_duplicates_are_dropped_and_keys_are_ids_or_hashes() -> None:
    docs = [*DOCS, Document("Refunds take 5 days.", metadata={"id": "refunds"})]
    assert len(StableContextOrderer().transform_documents(docs)) == 4
    assert document_key(DOCS[0]) == "refunds"
    assert document_key(DOCS[2]) == "hours"
    assert document_key(DOCS[3]).startswith("sha256:")


def test_is_a_document_transformer_and_a_runnable() -> None:
    orderer = StableContextOrderer(key=lambda d: d.page_content[::-1])
    assert isinstance(orderer, BaseDocumentTransformer) and isinstance(orderer, Runnable)
    retriever = RunnableLambda(lambda q: list(reversed(DOCS)))
    chain = retriever | orderer | RunnableLambda(format_documents)
    text = chain.invoke("refunds?")
    assert text.startswith("[1] ") and text.count("\n\n") == 3
    assert [d.page_content[::-1] for d in orderer.invoke(DOCS)] == sorted(
        d.page_content[::-1] for d in DOCS
    )


async def test_async_transform() -> None:
    orderer = StableContextOrderer()
    assert await orderer.atransform_documents(list(reversed(DOCS))) == orderer.invoke(DOCS)
    assert await orderer.ainvoke(list(reversed(DOCS))) == orderer.invoke(DOCS)


def test_prompt_layout_shares_everything_before_the_question() -> None:
    prompt = stable_rag_prompt(
        "You are a {support} bot.",
        static_knowledge="Policy v3.",
        instructions="Cite document numbers.",
    )
    assert sorted(prompt.input_variables) == ["context", "question"]
    context = format_documents(StableContextOrderer().invoke(DOCS))
    a = prompt.format_messages(context=context, question="How long do refunds take?")
    b = prompt.format_messages(
        context=format_documents(StableContextOrderer().invoke(list(reversed(DOCS)))),
        question="Is shipping free?",
    )
    assert a[0].content == b[0].content == "You are a {support} bot.\n\nPolicy v3."
    body_a, body_b = str(a[1].content), str(b[1].content)
    shared = body_a.split("Question:")[0]
    assert body_b.startswith(shared) and shared.startswith("Documents:\n[1] ")
    assert shared.rstrip().endswith("Cite document numbers.")
    assert body_a.endswith("Question: How long do refunds take?")
