"""Judging a semantic hit after the fact: shadow hits, audits, exploration, feedback.

A *pending judgment* is a stored answer the semantic layer would have served (shadow
mode), withheld on purpose (an audit), or almost served (exploration below the
threshold), kept until the model's fresh answer to the same query arrives. The two
answers are then compared **by meaning**, not by string equality:

- equal after normalization → agree;
- otherwise the answers' embedding similarity decides: ≥ ``agree_at`` agrees, <
  ``disagree_below`` disagrees, and in between an optional ``judge(query, stored, fresh)``
  callable (an LLM judge through the user's own model) decides, else the pair is counted
  as *undecided* and not used as evidence;
- for short answers, a difference that refuses questions (numbers, negation, a date, an
  opposite, another name: "Yes, it is open on Sunday" vs "No, it is closed") makes them
  disagree whatever the similarity.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent_cache import _fork
from agent_cache import _io as io
from agent_cache._flow import Flow
from agent_cache.differences import analyze
from agent_cache.keys import normalize

__all__ = ["AnswerJudge", "Pending", "answer_text"]

_HARD = frozenset({"numbers", "negation", "temporal", "opposites", "entities"})
_SHORT_WORDS = 40


def answer_text(value: Any) -> str:
    """The text of a stored answer (a string, or the text/content of a JSON object)."""
    if isinstance(value, Mapping):
        for key in ("text", "content", "answer", "output"):
            if isinstance(value.get(key), str):
                return str(value[key])
        gens = value.get("generations")
        if isinstance(gens, list) and gens:
            return answer_text(gens[0])
    if isinstance(value, list) and value:
        return answer_text(value[0])
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class Pending:
    """A semantic candidate waiting for the model's answer to be judged."""

    namespace: str
    query: str
    matched_prompt: str
    stored: Any
    similarity: float
    kind: str  # "shadow" | "audit" | "explore"


class AnswerJudge:
    """Keeps pending judgments and compares answers by meaning (see the module doc).

    Args:
        agree_at / disagree_below: answer-embedding similarities of the grey zone.
        judge: optional ``judge(query, stored_answer, fresh_answer) -> bool`` for the
            grey zone (e.g. a call to the user's own model).
        max_pending: how many pending judgments are remembered (oldest dropped).
    """

    def __init__(
        self,
        *,
        agree_at: float = 0.85,
        disagree_below: float = 0.6,
        judge: Callable[[str, str, str], bool] | None = None,
        max_pending: int = 10_000,
    ) -> None:
        self.agree_at = agree_at
        self.disagree_below = disagree_below
        self.judge = judge
        self.max_pending = max_pending
        self._pending: OrderedDict[str, Pending] = OrderedDict()
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))

    def expect(self, query_key: str, pending: Pending) -> None:
        with self._lock:
            self._pending[query_key] = pending
            self._pending.move_to_end(query_key)
            while len(self._pending) > self.max_pending:
                self._pending.popitem(last=False)

    def take(self, query_key: str) -> Pending | None:
        with self._lock:
            return self._pending.pop(query_key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def agree_flow(self, pending: Pending, fresh: Any, embedder: Any) -> Flow[bool | None]:
        """True/False: the answers agree/disagree; None: undecided (no evidence)."""
        a, b = answer_text(pending.stored), answer_text(fresh)
        if normalize(a) == normalize(b):
            return True
        short = max(len(a.split()), len(b.split())) <= _SHORT_WORDS
        if short:
            found = analyze(a, b)
            if any(d.kind in _HARD for d in found.refusals):
                return False
        vectors = yield from io.embed(embedder, [a, b])
        sim = float(np.dot(vectors[0], vectors[1]))
        if sim >= self.agree_at:
            return True
        if sim < self.disagree_below:
            return False
        if self.judge is not None:
            return bool(self.judge(pending.query, a, b))
        return None
