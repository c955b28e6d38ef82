"""What a hit saves, measured: the token usage the model reported, priced by a table.

A stored answer keeps the usage its model call reported (``tokens=`` on
:meth:`~agent_cache.LayeredCache.store` / ``get_or_compute``). Every later hit saves
exactly that: prompt (``input``) and completion (``output``) tokens separately when the
model reported them split, one ``total`` when only an int was given, and an
``estimated`` count (the answer's length / 4) only when nothing was reported, kept apart
so a dashboard never mixes measured and assumed figures. Money is computed from
:class:`PriceTable` for measured input/output tokens only; no price is assumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_cache.errors import ConfigurationError

__all__ = ["KINDS", "PriceTable", "Usage", "usage_from"]

#: The ``kind`` label of ``agent_cache_tokens_saved_total``.
KINDS = ("input", "output", "total", "estimated")

_INPUT = ("input", "input_tokens", "prompt_tokens", "prompt")
_OUTPUT = ("output", "output_tokens", "completion_tokens", "completion")
_TOTAL = ("total", "total_tokens")


@dataclass(frozen=True)
class Usage:
    """Tokens one model call spent: ``input`` (prompt), ``output`` (completion), and
    ``total`` when only an unsplit count is known."""

    input: int = 0
    output: int = 0
    total: int = 0

    def as_record(self) -> int | dict[str, int] | None:
        """The JSON form kept in a cache record (an int when only a total is known)."""
        if self.input or self.output:
            return {"input": self.input, "output": self.output}
        return self.total or None

    @property
    def tokens(self) -> int:
        return self.input + self.output + self.total


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigurationError(f"token counts are non-negative numbers, not {value!r}")
    return int(value)


def usage_from(tokens: Any) -> Usage | None:
    """Read a usage from an int (a total), a ``Usage``, or a mapping in OpenAI
    (``prompt_tokens``/``completion_tokens``), LangChain (``input_tokens``/
    ``output_tokens``) or the short ``input``/``output`` form. ``None`` for nothing.

    Example:
        >>> usage_from({"prompt_tokens": 120, "completion_tokens": 30})
        Usage(input=120, output=30, total=0)
        >>> usage_from(42)
        Usage(input=0, output=0, total=42)
    """
    if tokens is None:
        return None
    if isinstance(tokens, Usage):
        return tokens
    if isinstance(tokens, Mapping):

        def first(names: tuple[str, ...]) -> int:
            for name in names:
                if tokens.get(name) is not None:
                    return _int(tokens[name])
            return 0

        inp, out = first(_INPUT), first(_OUTPUT)
        total = 0 if (inp or out) else first(_TOTAL)
        usage = Usage(inp, out, total)
        return usage if usage.tokens else None
    n = _int(tokens)
    return Usage(total=n) if n else None


class PriceTable:
    """Prices per model, in money per **million** tokens: ``(input, output)``.

    A model identity (an ``llm_string``) is priced by the longest key it contains, so
    ``"gpt-4o-mini"`` matches LangChain's serialized model strings that name it; the key
    ``"*"`` prices everything else. A model with no price saves tokens but no money.

    Example:
        >>> prices = PriceTable({"gpt-4o-mini": (0.15, 0.60), "gpt-4o": (2.50, 10.00)})
        >>> prices.cost("openai/gpt-4o-mini", Usage(input=1_000_000, output=0))
        0.15
    """

    def __init__(self, prices: Mapping[str, tuple[float, float]] | None = None) -> None:
        self.prices: dict[str, tuple[float, float]] = {}
        for model, pair in (prices or {}).items():
            try:
                pin, pout = (float(x) for x in pair)
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(
                    f"price of {model!r} must be (input, output) per million tokens"
                ) from exc
            if pin < 0 or pout < 0:
                raise ConfigurationError(f"price of {model!r} must not be negative")
            self.prices[str(model)] = (pin, pout)
        self._by_length = sorted((k for k in self.prices if k != "*"), key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self.prices)

    def price_for(self, model: str) -> tuple[float, float] | None:
        if model in self.prices:
            return self.prices[model]
        for key in self._by_length:
            if key in model:
                return self.prices[key]
        return self.prices.get("*")

    def cost(self, model: str, usage: Usage) -> float:
        """Money ``usage`` cost on ``model`` (0.0 without a price or a measured split)."""
        price = self.price_for(model)
        if price is None:
            return 0.0
        return (usage.input * price[0] + usage.output * price[1]) / 1_000_000
