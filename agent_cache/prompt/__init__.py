"""Prompt layout for vLLM's prefix cache: stable order, batch scheduling, linting, simulation.

Example:
    >>> from agent_cache.prompt import StablePrompt, simulate_prefix_cache
    >>> prompt = StablePrompt("You answer from the documents.")
    >>> messages = prompt.to_messages("Where is my order?", documents=["doc b", "doc a"])
    >>> simulate_prefix_cache([list(range(32))] * 2).cached_tokens
    [0, 16]
"""

from __future__ import annotations

from agent_cache.prompt._docs import doc_key, doc_text
from agent_cache.prompt.layout import StablePrompt, default_summarizer
from agent_cache.prompt.lint import PrefixIssue, PrefixVolatilityWarning, lint_prefix
from agent_cache.prompt.ordering import PopularityOrderer, order_documents
from agent_cache.prompt.schedule import schedule_batch
from agent_cache.prompt.simulator import (
    PrefixCacheResult,
    PrefixCacheSimulator,
    simulate_prefix_cache,
)

__all__ = [
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
