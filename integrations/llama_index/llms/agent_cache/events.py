"""Instrumentation events: a served hit and a miss, on LlamaIndex's dispatcher.

Attach a handler to the root dispatcher to see them next to the ``LLMChatStartEvent`` /
``LLMChatEndEvent`` of the same call (same ``span_id``).

Example (adds a handler to the process's root dispatcher)::

    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    class Hits(BaseEventHandler):
        def handle(self, event, **kwargs):
            if isinstance(event, CacheHitEvent):
                print(event.layer, event.score)

    get_dispatcher().add_event_handler(Hits())
"""

from __future__ import annotations

from llama_index.core.instrumentation.events import BaseEvent

__all__ = ["CacheHitEvent", "CacheMissEvent"]


class CacheHitEvent(BaseEvent):
    """A response served from the cache instead of the model.

    Attributes:
        layer: ``"exact"``, ``"template"`` or ``"semantic"``.
        score: similarity or verifier score; ``None`` for exact and template hits.
        key: the served entry's key.
        question: the question the lookup used.
        matched_prompt: the stored question whose answer is served.
        namespace: the cache namespace.
    """

    layer: str
    score: float | None = None
    key: str
    question: str
    matched_prompt: str
    namespace: str

    @classmethod
    def class_name(cls) -> str:
        return "AgentCacheHitEvent"


class CacheMissEvent(BaseEvent):
    """A lookup that found nothing: the wrapped model is called.

    Attributes:
        question: the question the lookup used.
        namespace: the cache namespace.
    """

    question: str
    namespace: str

    @classmethod
    def class_name(cls) -> str:
        return "AgentCacheMissEvent"
