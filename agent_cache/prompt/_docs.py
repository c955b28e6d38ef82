"""What a "document" is to the prompt helpers: its text and its identity.

Documents are duck-typed so the core never imports a framework: a plain string, a mapping
(``{"id": ..., "content" | "text" | "page_content": ...}``), a LangChain ``Document``
(``.id``, ``.page_content``, ``.metadata``), a LlamaIndex node (``.node_id``/``.id_``,
``.get_content()``, ``.metadata``) or ``NodeWithScore`` (``.node``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["DocKey", "dedupe", "doc_key", "doc_text"]

T = TypeVar("T")

#: A function from a document to the string that identifies it.
DocKey = Callable[[Any], str]

_TEXT_FIELDS = ("page_content", "content", "text")
_ID_ATTRS = ("id", "node_id", "id_", "doc_id")
_ID_METADATA = ("id", "doc_id", "document_id", "source_id", "chunk_id")


def _unwrap(doc: Any) -> Any:
    """A LlamaIndex ``NodeWithScore`` holds the node in ``.node``."""
    inner = getattr(doc, "node", None)
    return inner if inner is not None and not isinstance(doc, str | Mapping) else doc


def doc_text(doc: Any) -> str:
    """The text of a document, whatever its type.

    Example:
        >>> doc_text({"id": 7, "content": "Refunds take 5 days."})
        'Refunds take 5 days.'
    """
    doc = _unwrap(doc)
    if isinstance(doc, str):
        return doc
    if isinstance(doc, Mapping):
        for name in _TEXT_FIELDS:
            value = doc.get(name)
            if isinstance(value, str):
                return value
        raise TypeError(f"document mapping has none of {_TEXT_FIELDS}: {sorted(doc)!r:.120}")
    get_content = getattr(doc, "get_content", None)
    if callable(get_content):
        return str(get_content())
    for name in _TEXT_FIELDS:
        value = getattr(doc, name, None)
        if isinstance(value, str):
            return value
    raise TypeError(f"cannot find the text of a {type(doc).__name__}")


def _content_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def doc_key(doc: Any) -> str:
    """A document's identity: its id attribute, else a metadata id, else a content hash.

    Example:
        >>> doc_key({"id": 42, "content": "x"})
        '42'
        >>> doc_key("plain text").startswith("sha256:")
        True
    """
    doc = _unwrap(doc)
    if isinstance(doc, str):
        return _content_hash(doc)
    if isinstance(doc, Mapping):
        for name in _ID_ATTRS:
            if doc.get(name) is not None:
                return str(doc[name])
        metadata = doc.get("metadata")
    else:
        for name in _ID_ATTRS:
            value = getattr(doc, name, None)
            if value is not None and not callable(value):
                return str(value)
        metadata = getattr(doc, "metadata", None)
    if isinstance(metadata, Mapping):
        for name in _ID_METADATA:
            if metadata.get(name) is not None:
                return str(metadata[name])
    return _content_hash(doc_text(doc))


def dedupe(docs: Iterable[T]) -> list[T]:
    """Drop exact duplicates (same text), keeping the first occurrence.

    Example:
        >>> dedupe(["a", "b", "a"])
        ['a', 'b']
    """
    seen: set[str] = set()
    out: list[T] = []
    for doc in docs:
        text = doc_text(doc)
        if text not in seen:
            seen.add(text)
            out.append(doc)
    return out
