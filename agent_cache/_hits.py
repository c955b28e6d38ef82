"""What a lookup returns: :class:`CacheHit`, :class:`Fetched`, :class:`Explanation`,
and inside the pipeline an :class:`Outcome`.

Also the one place a stored record becomes a hit (:func:`hit_from_record`), shared by
the exact, template and semantic paths and by the cross-process single-flight's peek.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_cache import _request as rq
from agent_cache import semantic
from agent_cache.judging import Pending
from agent_cache.savings import Usage

__all__ = ["CacheHit", "Explanation", "Fetched", "Outcome", "hit_from_record"]


@dataclass(frozen=True)
class CacheHit:
    """A served answer.

    Attributes:
        response: the stored JSON value.
        layer: ``"exact"``, ``"template"`` or ``"semantic"``.
        score: cosine similarity, or the reranker's score when one verified the hit;
            ``None`` for exact and template hits.
        matched_prompt: the stored prompt whose answer is served.
        key: the stored entry's key.
        namespace: the namespace it was served from (what :meth:`LayeredCache.feedback`
            evicts from and judges in).
        similarity: the cosine similarity of a semantic hit (``score`` may be the
            verifier's), ``None`` otherwise.
        expires_at: when the served entry expires (the cache's clock), ``None`` for
            never or unknown (entries written before this field existed).
        usage: the tokens the model call that produced the answer reported (what
            serving it saved), ``None`` when none were reported.
    """

    response: Any
    layer: str
    score: float | None
    matched_prompt: str
    key: str
    namespace: str = "default"
    similarity: float | None = None
    expires_at: float | None = None
    usage: Usage | None = None


@dataclass(frozen=True)
class Fetched:
    """What :meth:`LayeredCache.fetch` returns: the value and where it came from.

    Attributes:
        value: the served or computed value (what :meth:`LayeredCache.get_or_compute`
            returns).
        hit: the entry served (layer, score, usage it saved); ``None`` when the value
            was computed, by this caller or by a concurrent one.
        computed: this caller ran ``compute()`` (a miss it paid for). ``hit is None and
            not computed``: the value was coalesced from a concurrent identical miss (or
            a short-lived negative entry), which cost this caller nothing.
    """

    value: Any
    hit: CacheHit | None = None
    computed: bool = False


@dataclass(frozen=True)
class Explanation:
    """Why each candidate would be served or refused for a query (``print()`` it).

    Attributes:
        query: the question.
        namespace: where it was looked up.
        threshold: the similarity threshold in force there.
        verdicts: one :class:`~agent_cache.semantic.Verdict` per candidate, servable
            first; ``verdicts[0].outcome == "serve"`` means the cache would serve it.
        layer: ``"exact"`` or ``"template"`` when that layer answers the query before
            the semantic layer is asked (the verdicts then never matter), else ``None``.
    """

    query: str
    namespace: str
    threshold: float
    verdicts: tuple[semantic.Verdict, ...]
    layer: str | None = None

    @property
    def served(self) -> semantic.Verdict | None:
        return next((v for v in self.verdicts if v.outcome == "serve"), None)

    def __str__(self) -> str:
        lines = [f"{self.query!r} in {self.namespace!r} (threshold {self.threshold:.3f}):"]
        if self.layer is not None:
            lines.append(f"  the {self.layer} layer answers first (no semantic lookup)")
        if not self.verdicts:
            lines.append("  no candidate in scope")
        for v in self.verdicts:
            head = f"{v.outcome}{f' ({v.reason})' if v.reason else ''}"
            lines.append(
                f"  {head}: {v.candidate.text!r} similarity {v.candidate.similarity:.3f}"
                + (f", verifier {v.verifier:.3f}" if v.verifier is not None else "")
            )
            if v.analysis is not None:
                lines += [f"      {d}" for d in v.analysis.differences]
        return "\n".join(lines)


def hit_from_record(
    record: rq.Record,
    layer: str,
    score: float | None,
    key: str,
    namespace: str,
    *,
    similarity: float | None = None,
) -> CacheHit:
    """A stored record (:class:`agent_cache._request.Record`) as a hit: its response,
    prompt, expiry and the usage serving it saves."""
    return CacheHit(
        record.response,
        layer,
        score,
        record.prompt or "",
        key,
        namespace,
        similarity,
        expires_at=record.expires_at,
        usage=record.usage,
    )


@dataclass(frozen=True)
class Outcome:
    """What a lookup flow found: the hit (or none), the query's exact key, and for the
    judging machinery the query text and an explored candidate."""

    hit: CacheHit | None
    query_key: str
    query: str = ""
    explore: Pending | None = None
    refused: str | None = None  # "refused_<reason>" of the first refused candidate
    error: bool = False  # a store failed: served as a miss
