"""Vector stores for the semantic layer.

:class:`SQLiteVectorStore` (the embedded default: vectors in the exact layer's SQLite
database, safe for many processes), :class:`MemoryVectorStore` (numpy, in process) and
:class:`ChromaVectorStore` (Chroma: a server, embedded persistent for single-process use,
or a client you pass). All satisfy :class:`~agent_cache.protocols.VectorStore`; chromadb
is imported only when a :class:`ChromaVectorStore` is first used.
"""

from __future__ import annotations

from agent_cache.vectors.chroma import ChromaVectorStore
from agent_cache.vectors.memory import MemoryVectorStore
from agent_cache.vectors.sqlite import SQLiteVectorStore

__all__ = ["ChromaVectorStore", "MemoryVectorStore", "SQLiteVectorStore"]
