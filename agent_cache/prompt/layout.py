"""``StablePrompt``: a prompt laid out so that its prefix stays the same between requests.

Segments go from the most stable to the most volatile, because vLLM (like every prefix
cache) reuses KV blocks only up to the first token that differs::

    system  ->  static knowledge  ->  [summary of old turns -> recent turns]
            ->  documents (stable order)  ->  instructions  ->  question

Chat history is append-only. Turns older than ``window`` are folded into a summary in
steps of ``window`` turns, so the summary (and everything after it) changes only when a
window boundary is crossed; between boundaries each new turn only *extends* the prefix.
History sits before the documents because documents usually change with every question
while history only grows.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from agent_cache.errors import ConfigurationError
from agent_cache.prompt._docs import DocKey, doc_text
from agent_cache.prompt.lint import PrefixIssue, PrefixVolatilityWarning, lint_prefix
from agent_cache.prompt.ordering import PopularityOrderer, order_documents

__all__ = ["StablePrompt", "default_summarizer"]

Message = dict[str, str]
Summarizer = Callable[[Sequence[Mapping[str, str]]], str]
DocOrder = Literal["canonical", "given"] | PopularityOrderer | Callable[[Sequence[Any]], list[Any]]

_ROLES = ("system", "user", "assistant", "tool")
_SUMMARY_CHARS = 200


def default_summarizer(messages: Sequence[Mapping[str, str]]) -> str:
    """A deterministic extractive summary: one truncated line per folded turn.

    Pass an LLM-backed ``summarizer`` for a real summary; it runs once per window boundary.

    Example:
        >>> default_summarizer([{"role": "user", "content": "Hi\\nthere"}])
        'user: Hi there'
    """
    lines = []
    for m in messages:
        text = " ".join(str(m.get("content", "")).split())
        if len(text) > _SUMMARY_CHARS:
            text = text[: _SUMMARY_CHARS - 1] + "…"
        lines.append(f"{m.get('role', 'user')}: {text}")
    return "\n".join(lines)


def _debug_default() -> bool:
    return os.environ.get("AGENT_CACHE_DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}


class StablePrompt:
    """A prompt builder whose output keeps a stable, cache-friendly prefix.

    Args:
        system: The system prompt (never changes).
        knowledge: Static knowledge shared by every request (a text or a list of texts).
        instructions: Task instructions; rendered after the documents, before the question.
        window: Recent turns kept verbatim; older ones are folded into a summary in
            steps of ``window`` turns (default 6).
        summarizer: Folded turns -> summary text (default :func:`default_summarizer`).
            Called once per window boundary, its result is kept.
        doc_order: ``"canonical"`` (:func:`order_documents`, the default), ``"given"``
            (keep the caller's order), a :class:`PopularityOrderer`, or a callable.
        doc_key: Document -> identity, for the ordering (default: id / metadata id /
            content hash).
        relevance_hint: After the documents, name them in the order they were given
            (relevance order), since the stable order loses it. Off by default.
        debug: Lint the stable segments now and warn (:class:`PrefixVolatilityWarning`)
            about dates, times, ids or counters in them. Default: the
            ``AGENT_CACHE_DEBUG`` environment variable.

    Example:
        >>> p = StablePrompt("You are a support bot.", instructions="Answer briefly.")
        >>> docs = [{"id": "b", "content": "B"}, {"id": "a", "content": "A"}]
        >>> msgs = p.to_messages("How long do refunds take?", documents=docs)
        >>> [m["role"] for m in msgs]
        ['system', 'user']
        >>> msgs[1]["content"].index("A") < msgs[1]["content"].index("B")
        True
    """

    def __init__(
        self,
        system: str = "",
        *,
        knowledge: str | Sequence[str] = "",
        instructions: str = "",
        window: int = 6,
        summarizer: Summarizer | None = None,
        doc_order: DocOrder = "canonical",
        doc_key: DocKey | None = None,
        relevance_hint: bool = False,
        debug: bool | None = None,
    ) -> None:
        if window < 1:
            raise ConfigurationError("window must be >= 1")
        if isinstance(doc_order, str) and doc_order not in ("canonical", "given"):
            raise ConfigurationError(f"unknown doc_order {doc_order!r}")
        self.system = system
        self.knowledge = knowledge if isinstance(knowledge, str) else "\n\n".join(knowledge)
        self.instructions = instructions
        self.window = window
        self.summarizer: Summarizer = summarizer or default_summarizer
        self.doc_order = doc_order
        self.doc_key = doc_key
        self.relevance_hint = relevance_hint
        self._history: list[Message] = []
        self._summary: tuple[int, str] = (0, "")
        if _debug_default() if debug is None else debug:
            for issue in self.lint():
                warnings.warn(str(issue), PrefixVolatilityWarning, stacklevel=2)

    # ------------------------------------------------------------------ history
    @property
    def history(self) -> tuple[Message, ...]:
        """Every turn added so far (append-only)."""
        return tuple(dict(m) for m in self._history)

    def add_turn(self, role: str, content: str) -> None:
        """Append one turn to the conversation.

        Example:
            >>> p = StablePrompt("sys"); p.add_turn("user", "hi"); len(p.history)
            1
        """
        if role not in _ROLES:
            raise ConfigurationError(f"role must be one of {_ROLES}, not {role!r}")
        self._history.append({"role": role, "content": str(content)})

    def extend(self, messages: Iterable[Mapping[str, str]]) -> None:
        """Append several turns (``{"role": ..., "content": ...}``)."""
        for m in messages:
            self.add_turn(m["role"], m["content"])

    def folded_count(self) -> int:
        """How many of the oldest turns are folded into the summary.

        Turns older than ``window`` are folded in whole windows: with ``window=6``, 7 to
        12 turns fold 6, 13 to 18 fold 12, so 1 to ``window`` turns stay verbatim.

        Example:
            >>> p = StablePrompt(window=6); p.extend([{"role": "user", "content": "x"}] * 7)
            >>> p.folded_count()
            6
        """
        older = max(0, len(self._history) - self.window)
        return -(-older // self.window) * self.window

    def summary(self) -> str:
        """The summary of the folded turns ('' when none are folded).

        Example:
            >>> p = StablePrompt(window=1)
            >>> p.extend([{"role": "user", "content": "hi"}, {"role": "user", "content": "yo"}])
            >>> p.summary()
            'user: hi'
        """
        folded = self.folded_count()
        if folded == 0:
            return ""
        if self._summary[0] != folded:
            self._summary = (folded, self.summarizer(self._history[:folded]))
        return self._summary[1]

    # ------------------------------------------------------------------ documents
    def order(self, documents: Sequence[Any]) -> list[Any]:
        """Put ``documents`` in this prompt's stable order (deduplicated)."""
        if self.doc_order == "canonical":
            return order_documents(documents, key=self.doc_key)
        if self.doc_order == "given":
            return list(documents)
        if isinstance(self.doc_order, PopularityOrderer):
            return self.doc_order.order(documents, key=self.doc_key)
        if callable(self.doc_order):
            return list(self.doc_order(documents))
        raise ConfigurationError(f"unknown doc_order {self.doc_order!r}")

    def _documents_block(self, documents: Sequence[Any]) -> str:
        if not documents:
            return ""
        ordered = self.order(documents)
        parts = [f"[{i}] {doc_text(d).strip()}" for i, d in enumerate(ordered, 1)]
        block = "Documents:\n\n" + "\n\n".join(parts)
        if self.relevance_hint and len(ordered) > 1:
            number = {id(d): i for i, d in enumerate(ordered, 1)}
            ranked = [str(number[id(d)]) for d in documents if id(d) in number]
            block += "\n\nMost relevant first: " + ", ".join(ranked)
        return block

    # ------------------------------------------------------------------ rendering
    def _system_text(self) -> str:
        summary = self.summary()
        parts = [self.system, self.knowledge]
        if summary:
            parts.append("Summary of the earlier conversation:\n" + summary)
        return "\n\n".join(p.strip() for p in parts if p and p.strip())

    def _question_text(self, question: str, documents: Sequence[Any]) -> str:
        parts = [self._documents_block(documents), self.instructions, question]
        return "\n\n".join(p.strip() for p in parts if p and p.strip())

    def prefix_messages(self) -> list[Message]:
        """The messages before the final user turn: the part to warm up.

        Example:
            >>> StablePrompt("sys").prefix_messages()
            [{'role': 'system', 'content': 'sys'}]
        """
        out: list[Message] = []
        system = self._system_text()
        if system:
            out.append({"role": "system", "content": system})
        out.extend(dict(m) for m in self._history[self.folded_count() :])
        return out

    def to_messages(self, question: str, documents: Sequence[Any] = ()) -> list[Message]:
        """Render as OpenAI chat messages.

        Args:
            question: The volatile part; always last.
            documents: Retrieved documents in any order (strings, mappings, LangChain
                ``Document``s, LlamaIndex nodes).

        Returns:
            ``[system?] + recent turns + [user: documents, instructions, question]``.

        Example:
            >>> StablePrompt("sys").to_messages("q")[-1]
            {'role': 'user', 'content': 'q'}
        """
        return [
            *self.prefix_messages(),
            {"role": "user", "content": self._question_text(question, documents)},
        ]

    def to_text(self, question: str, documents: Sequence[Any] = ()) -> str:
        """Render as one completion prompt (same order as :meth:`to_messages`).

        Example:
            >>> StablePrompt("sys", instructions="Be brief.").to_text("q")
            'sys\\n\\nBe brief.\\n\\nq'
        """
        parts = [self._system_text()]
        parts.extend(
            f"{m['role'].capitalize()}: {m['content']}"
            for m in self._history[self.folded_count() :]
        )
        parts.append(self._question_text(question, documents))
        return "\n\n".join(p for p in parts if p)

    def lint(self) -> list[PrefixIssue]:
        """Volatile content in the stable segments (system, knowledge, instructions)."""
        return lint_prefix(
            {"system": self.system, "knowledge": self.knowledge, "instructions": self.instructions}
        )
