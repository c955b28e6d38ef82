"""Shadow mode, audits, exploration, feedback and the error bound: trusting the semantic layer.

A semantic hit can be withheld and judged against the model's fresh answer: always in
shadow mode (``shadow=True``: look up, record, never serve), for a share ``audit_rate``
of would-be hits and a share ``explore_rate`` of candidates just below the threshold
with ``max_error_rate``. The judged evidence (and every :meth:`LayeredCache.feedback`)
is recorded per namespace in the shared store (:mod:`agent_cache.errorbound`); with
``max_error_rate`` it sets the namespace's threshold.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from agent_cache import _io as io
from agent_cache import _request as rq
from agent_cache import semantic
from agent_cache._backends import Backends
from agent_cache._flow import Flow
from agent_cache._hits import CacheHit, Outcome
from agent_cache._settings import Settings
from agent_cache.differences import analyze
from agent_cache.errorbound import ErrorBound
from agent_cache.judging import AnswerJudge, Pending
from agent_cache.stats import Count, LookupOutcome, StatsRecorder

__all__ = ["Trust"]


class Trust:
    """Decides which semantic hits are withheld for judging, judges them, and keeps the
    evidence that sets each namespace's threshold."""

    def __init__(
        self,
        settings: Settings,
        backends: Backends,
        stats: StatsRecorder,
        *,
        rng: random.Random,
        failed: Callable[[Exception, str], None],
        judge: Callable[[str, str, str], bool] | None = None,
    ) -> None:
        self._s = settings
        self._b = backends
        self._stats = stats
        self._rng = rng
        self._failed = failed
        self.judge = AnswerJudge(judge=judge)
        # judged evidence per namespace, in the shared store; it drives the threshold
        # only with max_error_rate, but feedback is always recorded (for calibration)
        rate = settings.max_error_rate
        self.bound = ErrorBound(
            rate if rate is not None else 0.05,
            lambda: backends.kv,
            base=settings.threshold_in,
            clock=time.monotonic,
        )

    def threshold_for(self, namespace: str) -> float:
        """The threshold in force: the configured one, or the error bound's."""
        if self._s.max_error_rate is not None:
            try:
                return self.bound.threshold(namespace)
            except Exception as exc:  # the store failed: the configured threshold
                self._failed(exc, "error bound")
        return self._s.threshold_in(namespace)

    def explore_flow(
        self, req: rq.Request, verdicts: Sequence[semantic.Verdict], now: float
    ) -> Flow[Pending | None]:
        """With ``max_error_rate``: now and then, keep the best candidate that just missed
        the threshold, to judge it against the model's answer (the evidence that lets
        the threshold come down)."""
        if self._s.max_error_rate is None or not self._s.explore_rate:
            return None
        best = next((v for v in verdicts if v.outcome == "below_threshold"), None)
        if best is None or best.candidate.similarity < self.bound.lowest:
            return None
        if self._rng.random() >= self._s.explore_rate:
            return None
        analysis = best.analysis or analyze(
            req.prompt,
            best.candidate.text,
            case_sensitive=req.namespace in self._s.case_sensitive,
        )
        if analysis.refused:
            return None
        raw = yield from io.kv_get(self._b.kv, best.candidate.key, now)
        if raw is None:
            return None
        record = rq.Record.decode(raw, best.candidate.key)
        if record.mismatch(best.candidate.key, None) is not None:
            return None  # not the candidate's record: nothing to judge
        return Pending(
            req.namespace,
            req.prompt,
            best.candidate.text,
            record.response,
            best.candidate.similarity,
            "explore",
        )

    def review(self, outcome: Outcome, namespace: str) -> tuple[CacheHit | None, str]:
        """What a finished lookup serves, and its label when it serves nothing: a
        semantic hit withheld in shadow mode or for an audit is kept for judging."""
        hit = outcome.hit
        label: str = (
            LookupOutcome.ERROR if outcome.error else (outcome.refused or LookupOutcome.MISS)
        )
        if hit is not None and hit.layer == "semantic":
            kind = ""
            if self._s.shadow:
                kind = LookupOutcome.SHADOW.value
                self._stats.incr(Count.SHADOW_WOULD_HIT, namespace=namespace)
            elif self._s.max_error_rate is not None and self._rng.random() < self._s.audit_rate:
                kind = LookupOutcome.AUDIT.value
                self._stats.incr(Count.AUDITED, namespace=namespace)
            if kind:
                similarity = hit.similarity if hit.similarity is not None else 0.0
                self.judge.expect(
                    outcome.query_key,
                    Pending(
                        hit.namespace,
                        outcome.query,
                        hit.matched_prompt,
                        hit.response,
                        similarity,
                        kind,
                    ),
                )
                return None, kind
        elif hit is None and outcome.explore is not None:
            self._stats.incr(Count.EXPLORED, namespace=namespace)
            self.judge.expect(outcome.query_key, outcome.explore)
        return hit, label

    def judge_flow(self, query_key: str, response: Any) -> Flow[None]:
        """The model answered a query whose semantic candidate we kept: judge it."""
        pending = self.judge.take(query_key)
        if pending is None:
            return
        agree = yield from self.judge.agree_flow(pending, response, self._b.embedder)
        self._stats.judged(pending.namespace, pending.kind, pending.similarity, agree)
        if agree is not None:
            yield from io.call(
                self.bound.record, pending.namespace, pending.similarity, wrong=not agree
            )

    def feedback_flow(self, hit: CacheHit, correct: bool, namespace: str) -> Flow[None]:
        """Record a report on a served hit; a wrong one is evicted from every layer."""
        self._stats.incr(
            Count.FEEDBACK_CORRECT if correct else Count.FEEDBACK_WRONG, namespace=namespace
        )
        try:
            if hit.layer == "semantic" and hit.similarity is not None:
                yield from io.call(self.bound.record, namespace, hit.similarity, wrong=not correct)
            if not correct:
                yield from io.vector_delete(self._b.vectors, [hit.key])
                yield from io.kv_delete(self._b.kv, [hit.key])
                self._stats.incr(Count.EVICTED, namespace=namespace)
        except Exception as exc:  # a failing store is logged, never raised
            self._failed(exc, "feedback")
