"""Vector stores for the semantic layer.

:class:`MemoryVectorStore` (numpy, in process) and :class:`ChromaVectorStore` (Chroma:
embedded persistent, a server, or a client you pass). Both satisfy
:class:`~agent_cache.protocols.VectorStore`; chromadb is imported only when a
:class:`ChromaVectorStore` is first used.
"""

from __future__ import annotations

from agent_cache.vectors.chroma import ChromaVectorStore
from agent_cache.vectors.memory import MemoryVectorStore

__all__ = ["ChromaVectorStore", "MemoryVectorStore"]
