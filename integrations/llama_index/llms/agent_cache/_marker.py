"""The hit marker on a query engine's answer: ``response.agent_cache``.

A query engine builds its ``Response`` itself, out of the wrapper's reach; what the wrapper
sees is LlamaIndex's instrumentation. One handler on the root dispatcher (installed by the
first ``CachedLLM``) opens a record at every ``QueryStartEvent``, adds each
``CacheHitEvent`` / ``CacheMissEvent`` fired inside the query, and at ``QueryEndEvent``
sets the summary as the response's ``agent_cache`` attribute before the caller gets it
(read it with :func:`query_cache_info`)::

    {"hit": True, "hits": 1, "misses": 0, "layers": ["semantic"]}

Not in ``Response.metadata``: LlamaIndex fills that with node ids mapped to node metadata,
and code that loops over it expects nothing else there.

``hit`` is true when every LLM call of the query was served from the cache (no model
call). Nested queries (sub-question engines) each get their own record; an LLM call
counts in every query it runs inside.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
from llama_index.llms.agent_cache.events import CacheHitEvent, CacheMissEvent

__all__ = ["ATTRIBUTE", "QueryMarker", "install", "query_cache_info"]

#: The attribute of a query engine's response that holds the query's marker.
ATTRIBUTE = "agent_cache"

# One list per query in progress in this context, innermost last.
_OPEN: ContextVar[tuple[list[str | None], ...]] = ContextVar("agent_cache_queries", default=())
_lock = threading.Lock()
_installed = False


def summary(layers: list[str | None]) -> dict[str, Any]:
    """The marker for one query: ``None`` entries are misses, strings the hit layers."""
    hits = [layer for layer in layers if layer is not None]
    misses = len(layers) - len(hits)
    return {"hit": bool(layers) and not misses, "hits": len(hits), "misses": misses, "layers": hits}


class QueryMarker(BaseEventHandler):
    """Sets ``response.agent_cache`` for the queries that ran a ``CachedLLM``."""

    @classmethod
    def class_name(cls) -> str:
        return "AgentCacheQueryMarker"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, QueryStartEvent):
            _OPEN.set((*_OPEN.get(), []))
        elif isinstance(event, CacheHitEvent | CacheMissEvent):
            layer = event.layer if isinstance(event, CacheHitEvent) else None
            for record in _OPEN.get():
                record.append(layer)
        elif isinstance(event, QueryEndEvent):
            open_ = _OPEN.get()
            if not open_:
                return
            _OPEN.set(open_[:-1])
            if not open_[-1]:
                return  # no CachedLLM call in this query: nothing to say
            try:
                setattr(event.response, ATTRIBUTE, summary(open_[-1]))
            except (AttributeError, TypeError):  # a response type that takes no attribute
                return


def query_cache_info(response: Any) -> dict[str, Any] | None:
    """The cache's summary of the query that produced ``response`` (a query engine's
    ``Response``): ``{"hit", "hits", "misses", "layers"}``; ``None`` when no
    ``CachedLLM`` call ran inside it, or for a streaming engine (its LLM runs while the
    caller iterates, after the response was returned).

    Example (``engine`` a query engine whose LLM is a ``CachedLLM``)::

        query_cache_info(engine.query("What is RAG?"))
        # -> {'hit': True, 'hits': 1, 'misses': 0, 'layers': ['exact']}
    """
    info = getattr(response, ATTRIBUTE, None)
    return info if isinstance(info, dict) else None


def install() -> None:
    """Add the marker to the root dispatcher, once per process."""
    global _installed
    with _lock:
        if not _installed:
            instrument.get_dispatcher().add_event_handler(QueryMarker())  # type: ignore[attr-defined]
            _installed = True
