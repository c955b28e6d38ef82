"""Write-back policy: what may be cached, and for how long.

TTL tiers are chosen by rules (regexes over the normalized prompt), first match wins, with
random jitter so that entries written together do not expire together. An explicit
per-entry ``ttl`` always wins over the tiers.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_cache.errors import ConfigurationError

__all__ = [
    "DEFAULT_TIERS",
    "RequestPolicy",
    "TtlPolicy",
    "TtlTier",
    "is_cacheable",
    "request_policy",
]

DAY = 86_400.0


@dataclass(frozen=True)
class TtlTier:
    """A TTL chosen for prompts matching any of ``patterns`` (``ttl=None``: never expires).

    Example:
        >>> TtlTier("realtime", 30, (r"\\bweather\\b",)).matches("weather in oslo today")
        True
    """

    name: str
    ttl: float | None
    patterns: tuple[str, ...] = ()
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ttl is not None and self.ttl <= 0:
            raise ConfigurationError(f"tier {self.name!r}: ttl must be positive or None")
        object.__setattr__(
            self, "_compiled", tuple(re.compile(p, re.IGNORECASE) for p in self.patterns)
        )

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self._compiled)


DEFAULT_TIERS: tuple[TtlTier, ...] = (
    TtlTier(
        "realtime",
        60.0,
        (
            r"\b(right now|today|tonight|currently|current|latest|live|breaking)\b",
            r"\b(weather|stock price|exchange rate|score of)\b",
        ),
    ),
)


@dataclass
class TtlPolicy:
    """Chooses an entry's TTL: explicit ``ttl`` > first matching tier > ``default_ttl``.

    Args:
        default_ttl: seconds for prompts no tier matches (static knowledge: a day).
        tiers: rules checked in order against the normalized prompt.
        jitter: relative spread, e.g. 0.1 makes a 3600 s TTL land in [3240, 3960].
        semantic_ttl: an upper bound for the semantic layer's copy of an entry
            (paraphrase hits are riskier than exact ones); ``None``: same as the entry.
        seed: seed for the jitter's random generator (tests).

    Example:
        >>> p = TtlPolicy(default_ttl=3600, jitter=0.0)
        >>> p.ttl_for("what is rag?", None)
        (3600, 'default')
    """

    default_ttl: float | None = DAY
    tiers: Sequence[TtlTier] = DEFAULT_TIERS
    jitter: float = 0.1
    semantic_ttl: float | None = None
    seed: int | None = None
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.jitter < 1.0:
            raise ConfigurationError("jitter must be in [0, 1)")
        if self.default_ttl is not None and self.default_ttl <= 0:
            raise ConfigurationError("default_ttl must be positive or None")
        self._rng = random.Random(self.seed)

    def ttl_for(self, normalized_prompt: str, explicit: float | None) -> tuple[float | None, str]:
        """The TTL (before jitter) and the name of the tier that chose it."""
        if explicit is not None:
            if explicit < 0:
                raise ConfigurationError("ttl must be >= 0 (or None for the policy's)")
            return explicit, "explicit"
        for tier in self.tiers:
            if tier.matches(normalized_prompt):
                return tier.ttl, tier.name
        return self.default_ttl, "default"

    def expires_at(self, now: float, ttl: float | None) -> float | None:
        """Absolute expiry with jitter applied; ``None`` for no expiry."""
        if ttl is None:
            return None
        spread = ttl * self.jitter
        return now + ttl + (self._rng.uniform(-spread, spread) if spread else 0.0)

    def semantic_expires_at(self, now: float, entry_expires: float | None) -> float | None:
        if self.semantic_ttl is None:
            return entry_expires
        capped = now + self.semantic_ttl
        return capped if entry_expires is None else min(capped, entry_expires)


def is_cacheable(value: Any) -> bool:
    """False for errors and empty answers, which must never be cached.

    Example:
        >>> is_cacheable(""), is_cacheable({"error": "rate limited"}), is_cacheable("42")
        (False, False, True)
    """
    if value is None or isinstance(value, BaseException):
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, Mapping):
        if not value or value.get("error"):
            return False
        text = value.get("text", value.get("content"))
        return not (isinstance(text, str) and not text.strip())
    if isinstance(value, list | tuple):
        return bool(value)
    return True


#: The per-request policies (the same literals as ``agent_cache.CachePolicy``).
RequestPolicy = Literal["use", "bypass", "no_store", "refresh"]
_REQUEST_POLICIES: tuple[RequestPolicy, ...] = ("use", "bypass", "refresh", "no_store")


def request_policy(value: Any) -> RequestPolicy:
    """The cache policy of one request, as the adapters take it (LangChain:
    ``configurable["agent_cache"]``; LlamaIndex: the ``agent_cache=`` call kwarg).

    Accepts a policy name (``"bypass"``: neither read nor write; ``"refresh"``: call the
    model and overwrite; ``"no_store"``: read, never write; ``"use"``), a mapping with
    ``"policy"``, or a mapping of flags (``{"bypass": True}``).

    Raises:
        ConfigurationError: anything else.

    Example:
        >>> request_policy({"refresh": True}), request_policy(None)
        ('refresh', 'use')
    """
    if value is None:
        return "use"
    for name in _REQUEST_POLICIES:
        if value == name:
            return name
    if isinstance(value, Mapping):
        if "policy" in value:
            return request_policy(value["policy"])
        flags = [flag for flag in _REQUEST_POLICIES if value.get(flag)]
        unknown = set(value) - set(_REQUEST_POLICIES)
        if len(flags) <= 1 and not unknown:
            return flags[0] if flags else "use"
    raise ConfigurationError(
        f"a request's cache policy must be one of {_REQUEST_POLICIES} or e.g. "
        f"{{'policy': 'bypass'}}, not {value!r}"
    )
