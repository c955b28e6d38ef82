"""Cache keys: the one place they are built.

A key holds only what changes the answer: namespace, the namespace's version (bumped to
invalidate), model identity (``llm_string``, hashed), template version and the normalized
prompt. Fields are length-prefixed before hashing, so no two different inputs can produce
the same key by concatenation (``("foo", "ab")`` vs ``("fooa", "b")``).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_cache.errors import ConfigurationError

__all__ = [
    "KEY_PREFIX",
    "Template",
    "canonical_json",
    "digest",
    "normalize",
]

KEY_PREFIX = "ac1"
_WS = re.compile(r"\s+")


def normalize(text: str, *, casefold: bool = True) -> str:
    """Normalize a prompt for exact matching.

    Unicode NFKC, whitespace runs collapsed to one space, ends stripped, and (unless
    ``casefold=False``, e.g. for code where case matters) case-folded.

    Example:
        >>> normalize("  What\\u00a0is   RAG? ")
        'what is rag?'
    """
    text = unicodedata.normalize("NFKC", text)
    text = _WS.sub(" ", text).strip()
    return text.casefold() if casefold else text


def _encode_field(value: str) -> bytes:
    raw = value.encode("utf-8")
    return str(len(raw)).encode("ascii") + b":" + raw + b","


def digest(*fields: str) -> str:
    """SHA-256 hex of length-prefixed fields (a netstring per field: unambiguous).

    Example:
        >>> digest("foo", "ab") != digest("fooa", "b")
        True
    """
    return hashlib.sha256(b"".join(map(_encode_field, fields))).hexdigest()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace; floats equal to ints are written as ints."""

    def fix(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str | int):
            return v
        if isinstance(v, float):
            return int(v) if v.is_integer() else v
        if isinstance(v, Mapping):
            return {str(k): fix(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [fix(x) for x in v]
        raise ConfigurationError(f"cannot canonicalize value of type {type(v).__name__}")

    return json.dumps(fix(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Template:
    """A parameterized prompt: ``"status of order {id}"``.

    Prompts matching any of ``patterns`` share one template id; the key is template id +
    the canonical parameters, so ``order 12345`` and ``order 12346`` never share an answer,
    while ``"status of order 12345"`` and ``"where is my order 12345"`` (two patterns of the
    same template) do.

    Example:
        >>> t = Template("order_status", ("status of order {id}", "where is order {id}"))
        >>> t.match("where is order 12345")
        {'id': '12345'}
    """

    name: str
    patterns: tuple[str, ...]
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not self.patterns:
            raise ConfigurationError("a template needs a name and at least one pattern")
        compiled = []
        for pattern in self.patterns:
            names = _PLACEHOLDER.findall(pattern)
            if not names:
                raise ConfigurationError(f"template pattern has no {{placeholder}}: {pattern!r}")
            if len(set(names)) != len(names):
                raise ConfigurationError(f"template pattern repeats a placeholder: {pattern!r}")
            parts = _PLACEHOLDER.split(normalize(pattern, casefold=False))
            regex = ""
            for i, part in enumerate(parts):
                # even indexes: literal text; odd: placeholder names
                regex += f"(?P<{part}>.+?)" if i % 2 else re.escape(part)
            compiled.append(re.compile(regex, re.IGNORECASE))
        object.__setattr__(self, "_compiled", tuple(compiled))

    def match(self, normalized_prompt: str) -> dict[str, str] | None:
        """The parameters if the (normalized) prompt matches a pattern, else ``None``."""
        text = normalized_prompt.rstrip(" ?.!")
        for regex in self._compiled:
            m = regex.fullmatch(text)
            if m:
                return {k: v.strip() for k, v in m.groupdict().items()}
        return None


def templates_from(value: Mapping[str, str | Sequence[str]] | None) -> tuple[Template, ...]:
    """Build templates from ``{name: pattern | [patterns]}``."""
    if not value:
        return ()
    out = []
    for name, patterns in value.items():
        pats = (patterns,) if isinstance(patterns, str) else tuple(patterns)
        out.append(Template(name, pats))
    return tuple(out)
