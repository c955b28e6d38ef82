"""Stable RAG prompts: documents in a canonical order, static parts first.

vLLM's automatic prefix caching reuses KV blocks only for an identical prefix. Retrieval
returns the same documents in a different order from one request to the next;
:class:`StableContextOrderer` puts them in one canonical order (sorted, then duplicates
dropped), and
:func:`stable_rag_prompt` lays a prompt out as system -> static knowledge -> documents ->
instructions -> question, so everything before the question is shared.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from langchain_core.runnables.config import ensure_config
from pydantic import ConfigDict, Field

from agent_cache.prompt import order_documents

__all__ = ["StableContextOrderer", "document_key", "format_documents", "stable_rag_prompt"]

DocumentKey = Callable[[Document], str]
_ID_METADATA = ("id", "doc_id", "document_id", "source_id", "chunk_id")


def document_key(doc: Document) -> str:
    """A document's identity: ``doc.id``, else a metadata id, else a hash of its text.

    Example:
        >>> document_key(Document("x", metadata={"id": 7}))
        '7'
    """
    if doc.id is not None:
        return str(doc.id)
    for name in _ID_METADATA:
        if doc.metadata.get(name) is not None:
            return str(doc.metadata[name])
    return "sha256:" + hashlib.sha256(doc.page_content.encode("utf-8")).hexdigest()


def _order(docs: Sequence[Document | str], key: DocumentKey | None) -> list[Document]:
    """The core's canonical order (sort first, then drop exact duplicates); plain strings
    become documents."""
    given = [Document(page_content=d) if isinstance(d, str) else d for d in docs]
    return list(order_documents(given, key=key or document_key))


class StableContextOrderer(RunnableSerializable[Sequence[Document], list[Document]],
                           BaseDocumentTransformer):  # fmt: skip
    """Puts retrieved documents into a canonical order so RAG prompts share a prefix.

    A ``BaseDocumentTransformer`` and a Runnable: use it after a retriever in LCEL
    (``retriever | StableContextOrderer()``) or call ``transform_documents``. The order
    depends only on the documents retrieved (by ``key``: ``doc.id``, a metadata id, or a
    content hash; numeric ids in numeric order), never on retrieval order: they are
    sorted first, then exact duplicates (same text and metadata) are dropped. Plain
    strings are accepted and returned as ``Document``s.

    Args:
        key: document -> identity string; default :func:`document_key`.

    Example:
        >>> docs = [Document("B", metadata={"id": "b"}), Document("A", metadata={"id": "a"})]
        >>> [d.page_content for d in StableContextOrderer().invoke(docs)]
        ['A', 'B']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    key: DocumentKey | None = Field(default=None, exclude=True)

    def transform_documents(
        self, documents: Sequence[Document | str], **kwargs: Any
    ) -> list[Document]:
        """The documents, deduplicated, in canonical order."""
        return _order(list(documents), self.key)

    async def atransform_documents(
        self, documents: Sequence[Document | str], **kwargs: Any
    ) -> list[Document]:
        """Async twin of :meth:`transform_documents` (pure computation)."""
        return self.transform_documents(documents)

    def invoke(
        self, input: Sequence[Document], config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Runnable entry point: see :meth:`transform_documents`."""
        return self._call_with_config(self.transform_documents, input, ensure_config(config))


def format_documents(docs: Sequence[Document]) -> str:
    """Render documents as numbered blocks, in the order given (order them first).

    Example:
        >>> format_documents([Document("Refunds take 5 days.")])
        '[1] Refunds take 5 days.'
    """
    return "\n\n".join(f"[{i}] {doc.page_content}" for i, doc in enumerate(docs, 1))


def _literal(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def stable_rag_prompt(
    system: str,
    *,
    static_knowledge: str = "",
    instructions: str = "Answer the question using only the documents above.",
) -> ChatPromptTemplate:
    """A chat prompt laid out for prefix caching: system -> static knowledge ->
    documents (``{context}``) -> instructions -> question (``{question}``).

    ``system``, ``static_knowledge`` and ``instructions`` are literal text (braces in
    them are not template variables).

    Example:
        >>> prompt = stable_rag_prompt("You are a support bot.", static_knowledge="Hours: 9-5.")
        >>> sorted(prompt.input_variables)
        ['context', 'question']
    """
    head = _literal(system)
    if static_knowledge:
        head += "\n\n" + _literal(static_knowledge)
    body = "Documents:\n{context}\n\n" + _literal(instructions) + "\n\nQuestion: {question}"
    return ChatPromptTemplate.from_messages([("system", head), ("human", body)])
