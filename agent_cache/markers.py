"""The ``agent_cache`` marker the framework adapters put on every answer they return.

One schema for both adapters, the same keys on a hit, a miss and a coalesced answer:

=================  ==========================================================================
key                value
=================  ==========================================================================
``hit``            ``True``: served from the cache (no model call); ``False``: a model answer
``layer``          ``"exact"``, ``"template"`` or ``"semantic"`` on a hit, else ``None``
``score``          a semantic hit's similarity (or its reranker's score), else ``None``
``matched_prompt`` the stored question whose answer was served, else ``None``
``key``            the served entry's key (for ``LayeredCache.feedback``), else ``None``
``saved_usage``    the tokens the served answer's model call reported (``input_tokens``,
                   ``output_tokens``, ``total_tokens``), ``None`` when none were reported
``coalesced``      ``True``: the answer of a concurrent identical request's model call
                   (that call, not this one, paid for it), else ``False``
=================  ==========================================================================

Where it is:

- LangChain (``CachedChatModel``, ``AgentCache``): ``message.response_metadata["agent_cache"]``;
  a served message also reports zero ``usage_metadata``. Through ``set_llm_cache`` LangChain
  calls the model itself on a miss, so only hits carry the marker there.
- LlamaIndex (``CachedLLM``): ``response.additional_kwargs["agent_cache"]`` on chat and
  completion responses (streamed ones: every chunk). A query engine's answer carries the
  query's summary as ``response.agent_cache`` (see
  :func:`llama_index.llms.agent_cache.query_cache_info`), never in ``Response.metadata``,
  which maps node ids to node metadata.

Example:
    >>> hit_info(None)["hit"], sorted(hit_info(None)) == sorted(MARKER_KEYS)
    (False, True)
"""

from __future__ import annotations

from typing import Any

from agent_cache._hits import CacheHit

__all__ = ["MARKER_KEYS", "hit_info"]

#: The keys of every marker, hit or not.
MARKER_KEYS = ("hit", "layer", "score", "matched_prompt", "key", "saved_usage", "coalesced")


def hit_info(
    hit: CacheHit | None = None,
    *,
    coalesced: bool = False,
    saved_usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The marker of one answer: ``hit`` served, else a model answer (``coalesced``: a
    concurrent identical request's). ``saved_usage`` overrides the hit's recorded usage
    (an adapter that holds the framework's own usage figures)."""
    if saved_usage is None and hit is not None and hit.usage is not None:
        u = hit.usage
        if u.input or u.output or u.total:
            total = u.input + u.output + u.total
            saved_usage = {
                "input_tokens": u.input,
                "output_tokens": u.output,
                "total_tokens": total,
            }
    return {
        "hit": hit is not None,
        "layer": None if hit is None else hit.layer,
        "score": None if hit is None else hit.score,
        "matched_prompt": None if hit is None else hit.matched_prompt,
        "key": None if hit is None else hit.key,
        "saved_usage": saved_usage,
        "coalesced": coalesced and hit is None,
    }
