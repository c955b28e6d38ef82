"""agent-cache for LlamaIndex: cached tools and cached workflow steps.

Example (``get_weather`` a function)::

    from llama_index.tools.agent_cache import cache_tool, cache_step
    weather = cache_tool(FunctionTool.from_defaults(get_weather), ttl=600)
"""

from llama_index.tools.agent_cache.base import CachedTool, cache_tool
from llama_index.tools.agent_cache.steps import cache_step

__all__ = ["CachedTool", "cache_step", "cache_tool"]
