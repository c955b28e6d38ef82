"""agent-cache for LlamaIndex: a node postprocessor that keeps RAG prompt prefixes stable.

Example (``index`` a LlamaIndex index)::

    from llama_index.postprocessor.agent_cache import StablePrefixPostprocessor
    post = StablePrefixPostprocessor(similarity_cutoff=0.3)
    engine = index.as_query_engine(node_postprocessors=[post])
"""

from llama_index.postprocessor.agent_cache.base import StablePrefixPostprocessor

__all__ = ["StablePrefixPostprocessor"]
