"""The token usage an OpenAI-compatible server reported, read in one place.

:func:`parse_usage` reads the ``usage`` object of a chat or text completion
(``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``) or of
the Responses API (``input_tokens``, ``output_tokens``, ``input_tokens_details``), as a
JSON mapping or as the objects the ``openai`` SDK and the frameworks wrap it in. What the
server left out is 0: vLLM sends ``prompt_tokens_details`` only with
``--enable-prompt-tokens-details``, and as ``null`` when nothing was cached; llama.cpp's
server sends none. The router's KV-layer counts, the demo and the adapters all read
usage through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ModelUsage", "parse_usage", "response_usage"]


@dataclass(frozen=True)
class ModelUsage:
    """Tokens one model call reported.

    Attributes:
        prompt_tokens: prompt (input) tokens the server counted.
        completion_tokens: generated (output) tokens.
        cached_tokens: prompt tokens served from the server's prefix (KV) cache.
        total_tokens: the server's total, or prompt + completion when it sent none.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    total_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        """The OpenAI field names, JSON-ready (what the demo stores with an answer)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "total_tokens": self.total_tokens,
        }


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)


def parse_usage(usage: Any) -> ModelUsage | None:
    """A ``usage`` object as :class:`ModelUsage`; ``None`` when there is none, or it
    carries no token count at all.

    Example:
        >>> parse_usage({"prompt_tokens": 40, "completion_tokens": 8,
        ...              "prompt_tokens_details": {"cached_tokens": 32}})
        ModelUsage(prompt_tokens=40, completion_tokens=8, cached_tokens=32, total_tokens=48)
        >>> parse_usage({"input_tokens": 40, "input_tokens_details": None}).cached_tokens
        0
        >>> parse_usage(None) is None
        True
    """
    if usage is None or isinstance(usage, str | bytes | int | float):
        return None
    responses = _field(usage, "prompt_tokens") is None and _field(usage, "input_tokens") is not None
    prompt = _count(_field(usage, "input_tokens" if responses else "prompt_tokens"))
    completion = _count(_field(usage, "output_tokens" if responses else "completion_tokens"))
    total = _count(_field(usage, "total_tokens"))
    if prompt is None and completion is None and total is None:
        return None
    details = _field(usage, "input_tokens_details" if responses else "prompt_tokens_details")
    cached = _count(_field(details, "cached_tokens")) if details is not None else None
    p, c = prompt or 0, completion or 0
    return ModelUsage(p, c, cached or 0, total if total is not None else p + c)


def response_usage(body: Any) -> ModelUsage | None:
    """The usage of a whole response body (``body["usage"]``, or ``body.usage``).

    Example:
        >>> response_usage({"choices": [], "usage": {"prompt_tokens": 5}}).prompt_tokens
        5
    """
    return parse_usage(_field(body, "usage")) if body is not None else None
