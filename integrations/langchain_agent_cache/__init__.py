"""LangChain adapters for agent-cache: thin layers over the core's public API.

- :class:`AgentCache`: a ``BaseCache`` for ``set_llm_cache`` / ``ChatOpenAI(cache=...)``.
- :class:`CachedChatModel`: wraps any chat model; caches invoke/batch/stream, replays
  hits as chunks.
- :func:`cache_tool`: a tool that reuses results for the same canonical arguments.
- :func:`cache_step` / :func:`cached_step`: reuse an intermediate step's output.
- :class:`StableContextOrderer`, :func:`stable_rag_prompt`: prompts that share a prefix.

Example (sets LangChain's global cache, kept in ``.agent_cache``)::

    from langchain_core.globals import set_llm_cache
    from langchain_agent_cache import AgentCache
    set_llm_cache(AgentCache(path=".agent_cache"))
"""

from __future__ import annotations

from agent_cache import default_cache
from langchain_agent_cache.caches import AgentCache, CachedResult, FetchedResult
from langchain_agent_cache.chat_models import CachedChatModel, request_policy
from langchain_agent_cache.documents import (
    StableContextOrderer,
    document_key,
    format_documents,
    stable_rag_prompt,
)
from langchain_agent_cache.steps import CachedStep, cache_step, cached_step
from langchain_agent_cache.tools import CachedTool, cache_tool, is_side_effecting

__all__ = [
    "AgentCache",
    "CachedChatModel",
    "CachedResult",
    "CachedStep",
    "CachedTool",
    "FetchedResult",
    "StableContextOrderer",
    "cache_step",
    "cache_tool",
    "cached_step",
    "default_cache",
    "document_key",
    "format_documents",
    "is_side_effecting",
    "request_policy",
    "stable_rag_prompt",
]
