"""Cache keys: the one place they are built.

A key holds only what changes the answer: namespace, the namespace's version (bumped to
invalidate), model identity (``llm_string``, hashed), template version and the normalized
prompt. Fields are length-prefixed before hashing, so no two different inputs can produce
the same key by concatenation (``("foo", "ab")`` vs ``("fooa", "b")``).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _encode_str
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
    """JSON with sorted keys and no whitespace; floats equal to ints are written as ints.

    Built iteratively, so any depth of nesting is fine (no ``RecursionError``): the text
    is the one ``json.dumps(..., sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` writes for the value with its mapping keys made ``str(key)``
    and its tuples lists (keys built before this did not change). A value that contains
    itself, or a type JSON has no form for, is a ``ConfigurationError``.
    """
    out: list[str] = []
    # the work left, last first: a value to write, or (_TEXT, text) / (_LEAVE, id, text)
    stack: list[Any] = [value]
    inside: set[int] = set()  # the containers being written (a cycle is refused)
    while stack:
        v = stack.pop()
        if type(v) is tuple and v and v[0] is _TEXT:
            out.append(v[1])
            continue
        if type(v) is tuple and v and v[0] is _LEAVE:
            inside.discard(v[1])
            out.append(v[2])
            continue
        v = v[1] if type(v) is tuple and v and v[0] is _VALUE else v
        if v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, str):
            out.append(_encode_str(v))
        elif isinstance(v, int):
            out.append(int.__repr__(v))
        elif isinstance(v, float):
            out.append(_float_text(v))
        elif isinstance(v, Mapping | list | tuple):
            if id(v) in inside:
                raise ConfigurationError("cannot canonicalize a value that contains itself")
            inside.add(id(v))
            if isinstance(v, Mapping):
                items = sorted({str(k): x for k, x in v.items()}.items())
                open_, close = "{", "}"
                parts: list[Any] = []
                for i, (k, x) in enumerate(items):
                    parts.append((_TEXT, ("," if i else "") + _encode_str(k) + ":"))
                    parts.append((_VALUE, x))
            else:
                open_, close = "[", "]"
                parts = []
                for i, x in enumerate(v):
                    if i:
                        parts.append((_TEXT, ","))
                    parts.append((_VALUE, x))
            out.append(open_)
            stack.append((_LEAVE, id(v), close))
            stack.extend(reversed(parts))
        else:
            raise ConfigurationError(f"cannot canonicalize value of type {type(v).__name__}")
    return "".join(out)


_TEXT, _LEAVE, _VALUE = object(), object(), object()  # markers of canonical_json's stack


def _float_text(v: float) -> str:
    if v.is_integer():
        return int.__repr__(int(v))
    if v != v:
        return "NaN"
    if v in (math.inf, -math.inf):
        return "Infinity" if v > 0 else "-Infinity"
    return float.__repr__(v)


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
