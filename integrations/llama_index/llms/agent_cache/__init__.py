"""agent-cache for LlamaIndex: ``CachedLLM`` puts any LLM behind the layered cache.

Example (needs an OpenAI-compatible server)::

    from llama_index.core import Settings
    from llama_index.llms.agent_cache import CachedLLM
    Settings.llm = CachedLLM(llm=OpenAILike(api_base="http://gpu-1:8000/v1"))
"""

from llama_index.llms.agent_cache._marker import query_cache_info
from llama_index.llms.agent_cache.base import CachedLLM
from llama_index.llms.agent_cache.events import CacheHitEvent, CacheMissEvent
from llama_index.llms.agent_cache.question import (
    DEFAULT_QUESTION_VARS,
    QuestionExtractor,
    Scope,
)

__all__ = [
    "DEFAULT_QUESTION_VARS",
    "CacheHitEvent",
    "CacheMissEvent",
    "CachedLLM",
    "QuestionExtractor",
    "Scope",
    "query_cache_info",
]
