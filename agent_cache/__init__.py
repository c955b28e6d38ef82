"""agent-cache: a layered result / semantic cache for LLM apps and agents.

Core; never imports LangChain or LlamaIndex.
"""

from __future__ import annotations

from agent_cache._fetch import NOT_STORED
from agent_cache._stream import AStreamed, StreamAbandoned, Streamed
from agent_cache.cache import DEFAULT_THRESHOLD, CacheHit, CachePolicy, Fetched, LayeredCache
from agent_cache.errors import (
    AgentCacheError,
    BackendError,
    ConfigurationError,
    MissingDependencyError,
    SerializationError,
)
from agent_cache.policy import TtlPolicy, TtlTier
from agent_cache.savings import PriceTable
from agent_cache.shared import default_cache
from agent_cache.stats import CacheStats
from agent_cache.tools import StepCache, ToolCache

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_THRESHOLD",
    "NOT_STORED",
    "AStreamed",
    "AgentCacheError",
    "BackendError",
    "CacheHit",
    "CachePolicy",
    "CacheStats",
    "ConfigurationError",
    "Fetched",
    "LayeredCache",
    "MissingDependencyError",
    "PriceTable",
    "SerializationError",
    "StepCache",
    "StreamAbandoned",
    "Streamed",
    "ToolCache",
    "TtlPolicy",
    "TtlTier",
    "__version__",
    "default_cache",
]
