"""Batch scheduling: run requests that share a prefix back to back.

vLLM serves requests first come, first served; it never reorders them for cache hits. In
an offline batch (``.batch()``, an evaluation run, a bulk RAG job) the caller chooses the
order, and with a bounded KV cache that choice decides whether a shared prefix is still
cached when the next request that needs it arrives. Sorting the rendered prompts
lexicographically visits them in depth-first order of their prefix tree (what SGLang calls
longest-shared-prefix-first scheduling): every group that shares a prefix runs as one
contiguous run, nested groups inside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_cache.errors import ConfigurationError
from agent_cache.keys import canonical_json

__all__ = ["schedule_batch"]

#: A request -> the sequence whose prefixes matter (text or token ids).
RequestKey = Callable[[Any], str | Sequence[int]]

_SEP_ROLE = "\x1f"
_SEP_MSG = "\x1e"


def _render_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for m in messages:
        content = m.get("content")
        text = content if isinstance(content, str) else canonical_json(content)
        parts.append(f"{m.get('role', '')}{_SEP_ROLE}{text}{_SEP_MSG}")
    return "".join(parts)


def _default_key(request: Any) -> str | tuple[int, ...]:
    if isinstance(request, str):
        return request
    if isinstance(request, Sequence) and not isinstance(request, bytes | bytearray):
        if all(isinstance(x, int) and not isinstance(x, bool) for x in request):
            return tuple(request)
        if all(isinstance(x, Mapping) for x in request):
            return _render_messages(request)
    raise ConfigurationError(
        "schedule_batch takes prompt strings, message lists or token lists; pass key= "
        f"for {type(request).__name__}"
    )


def schedule_batch(requests: Sequence[Any], key: RequestKey | None = None) -> list[int]:
    """The order to run ``requests`` in so that those sharing a prefix run back to back.

    Args:
        requests: Prompt strings, OpenAI message lists or token-id lists (rendered with
            their documents already in a stable order, e.g. by :func:`order_documents`).
        key: Request -> its prompt as text or token ids, for other request types.

    Returns:
        Indices into ``requests``, in the order to run them. Put results back with
        ``results[i]`` for ``i`` in the returned order. Requests with identical prompts
        keep their relative order (the sort is stable).

    Example:
        >>> batch = ["SYS doc-b q1", "SYS doc-a q2", "SYS doc-b q3"]
        >>> schedule_batch(batch)
        [1, 0, 2]
    """
    keyfn = key or _default_key
    keys = [keyfn(r) for r in requests]
    texts = [k for k in keys if isinstance(k, str)]
    if texts and len(texts) != len(keys):
        raise ConfigurationError("schedule_batch: mixed text and token-id requests")
    if texts:
        return sorted(range(len(keys)), key=lambda i: str(keys[i]))
    tokens = [tuple(k) for k in keys]
    return sorted(range(len(tokens)), key=lambda i: tokens[i])
