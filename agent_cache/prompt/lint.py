"""Find volatile content in the parts of a prompt that should never change.

A date, a clock time, a UUID or a request counter near the start of a prompt changes the
very first KV block, and with it every block after it (block hashes are chained): such a
prompt never hits vLLM's prefix cache. :func:`lint_prefix` says what it found and where,
so it can be moved after the documents (or dropped).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PrefixIssue", "PrefixVolatilityWarning", "lint_prefix"]


class PrefixVolatilityWarning(UserWarning):
    """Volatile content found in a segment that should be stable (debug mode)."""


_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_COUNTER_WORDS = (
    r"(?:request|req|turn|attempt|iteration|run|session|call|message|msg|ticket|visit"
    r"|query|round|counter|count|invocation|conversation)"
)

# Checked in this order; a later match that overlaps an earlier one is not reported.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "uuid",
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
            r"-[0-9a-fA-F]{12}\b"
        ),
    ),
    (
        "timestamp",
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
            r"(?:Z|[+-]\d{2}:?\d{2})?"
        ),
    ),
    ("timestamp", re.compile(r"\b1[5-9]\d{8}(?:\d{3})?\b")),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b")),
    ("date", re.compile(r"\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b")),
    ("date", re.compile(rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b")),
    ("date", re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\.?,?\s+\d{{4}}\b")),
    ("time", re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?[Mm]\.?)?(?![\d:])")),
    ("hex id", re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{16,}\b")),
    (
        "counter",
        re.compile(rf"\b{_COUNTER_WORDS}\s*(?:#|no\.?|number|id)?\s*[:=#]?\s*\d+\b", re.IGNORECASE),
    ),
    ("counter", re.compile(r"(?<![\w#])#\d{2,}\b")),
)


@dataclass(frozen=True)
class PrefixIssue:
    """One piece of volatile content in a stable segment.

    Example:
        >>> issue = lint_prefix("Now: 12:30")[0]
        >>> issue.kind, issue.text, issue.line, issue.column
        ('time', '12:30', 1, 6)

    Attributes:
        segment: Which segment (``"system"``, ``"messages[0].system"``, ``"prompt"``, ...).
        kind: ``"date"``, ``"time"``, ``"timestamp"``, ``"uuid"``, ``"hex id"`` or
            ``"counter"``.
        text: The matched text.
        start: Character offset in the segment.
        line: 1-based line in the segment.
        column: 1-based column in that line.
    """

    segment: str
    kind: str
    text: str
    start: int
    line: int
    column: int

    def __str__(self) -> str:
        return (
            f"{self.segment}:{self.line}:{self.column}: {self.kind} {self.text!r} changes "
            "between requests and breaks the cached prefix; move it after the documents"
        )


def _segments(content: Any) -> list[tuple[str, str]]:
    if isinstance(content, str):
        return [("prompt", content)]
    if isinstance(content, Mapping):
        return [(str(k), v) for k, v in content.items() if isinstance(v, str)]
    if isinstance(content, Sequence):
        out = []
        for i, m in enumerate(content):
            if isinstance(m, Mapping) and isinstance(m.get("content"), str):
                out.append((f"messages[{i}].{m.get('role', '?')}", m["content"]))
        return out
    raise TypeError(f"lint_prefix: cannot read segments from {type(content).__name__}")


def _scan(name: str, text: str) -> list[PrefixIssue]:
    taken: list[tuple[int, int]] = []
    found: list[PrefixIssue] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            s, e = m.span()
            if any(s < te and ts < e for ts, te in taken):
                continue
            taken.append((s, e))
            line = text.count("\n", 0, s) + 1
            column = s - (text.rfind("\n", 0, s) + 1) + 1
            found.append(PrefixIssue(name, kind, m.group(0), s, line, column))
    found.sort(key=lambda i: i.start)
    return found


def lint_prefix(
    content: str | Mapping[str, str] | Sequence[Mapping[str, Any]],
) -> list[PrefixIssue]:
    """Find dates, times, UUIDs, long hex ids and counters in stable prompt segments.

    Args:
        content: One text, named segments (``{"system": ..., "knowledge": ...}``) or the
            stable messages of a prompt (``[{"role": "system", "content": ...}]``).

    Returns:
        The issues in segment order, then by position; empty when the text is stable.

    Example:
        >>> [i.kind for i in lint_prefix({"system": "Today is 2024-05-01. Be brief."})]
        ['date']
        >>> lint_prefix("You are a helpful assistant.")
        []
    """
    issues: list[PrefixIssue] = []
    for name, text in _segments(content):
        issues.extend(_scan(name, text))
    return issues
