"""``StablePrefixPostprocessor``: retrieved nodes in a canonical order, for prefix reuse.

A retriever returns nodes by relevance, so two paraphrased questions that retrieve the
same set render it in different orders: different prompts, no shared prefix for vLLM's
prefix cache, and a different scope for the semantic cache. This postprocessor
(optionally) cuts off weak nodes, then sorts the survivors into the core's stable order
(:func:`agent_cache.prompt.order_documents`: sorted by node id first, numeric ids as
numbers, then duplicates of the same text *and* metadata dropped, the best-scored copy
kept), so the same nodes always render the same context, whatever order they were
retrieved in. ``top_n`` counts distinct nodes: a duplicate takes no slot.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any, Literal

from llama_index.core.bridge.pydantic import Field
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from agent_cache.prompt import order_documents

__all__ = ["StablePrefixPostprocessor"]


def _content_key(node: NodeWithScore) -> str:
    return "sha256:" + hashlib.sha256(node.node.get_content().encode("utf-8")).hexdigest()


def _id_key(node: NodeWithScore) -> str:
    return node.node.node_id or _content_key(node)


def _best_first(node: NodeWithScore) -> float:
    return -node.score if node.score is not None else math.inf


def _order(nodes: list[NodeWithScore], key: Callable[[Any], str]) -> list[NodeWithScore]:
    return list(order_documents(nodes, key=key))


class StablePrefixPostprocessor(BaseNodePostprocessor):
    """Reorders retrieved nodes into a stable order, after an optional relevance cut-off.

    Args:
        similarity_cutoff: drop nodes scoring below this (and nodes without a score).
        top_n: keep only the ``top_n`` best-scoring nodes (before reordering).
        order_by: ``"id"`` sorts by node id (falling back to a content hash), stable for
            one index; ``"content"`` sorts by a hash of the text, stable even across
            re-ingestion that assigns new random node ids.

    Example (``index`` a LlamaIndex index)::

        engine = index.as_query_engine(
            node_postprocessors=[StablePrefixPostprocessor(similarity_cutoff=0.3)]
        )
    """

    similarity_cutoff: float | None = Field(default=None, description="Minimum node score.")
    top_n: int | None = Field(default=None, ge=1, description="Keep the best n nodes.")
    order_by: Literal["id", "content"] = Field(default="id", description="Sort key.")

    @classmethod
    def class_name(cls) -> str:
        return "StablePrefixPostprocessor"

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        kept = list(nodes)
        if self.similarity_cutoff is not None:
            cutoff = self.similarity_cutoff
            kept = [n for n in kept if n.score is not None and n.score >= cutoff]
        key = _id_key if self.order_by == "id" else _content_key
        # best copy first, so that of two copies of one node the better-scored survives
        # the dedupe whatever the retrieval order; then order first, then dedupe
        distinct = _order(sorted(kept, key=_best_first), key)
        if self.top_n is not None and len(distinct) > self.top_n:
            # distinct nodes compete for the slots; ties broken by the stable key
            best = sorted(distinct, key=lambda n: (_best_first(n), key(n)))[: self.top_n]
            distinct = _order(best, key)
        return distinct

    async def _apostprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        return self._postprocess_nodes(nodes, query_bundle)  # pure CPU, no I/O
