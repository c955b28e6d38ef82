"""The semantic layer's decision: which stored question, if any, may answer the query.

Pure logic, shared by :class:`~agent_cache.cache.LayeredCache`, ``agent-cache calibrate``
and the benchmarks, so that what is measured is exactly what is served:

1. every candidate from the k-NN search is compared with the query by the difference
   analysis (:func:`agent_cache.differences.analyze`); a meaningful difference refuses it
   (counted by reason);
2. a candidate that is *equivalent* to the query (the same words up to typos, inflection,
   synonyms and acronyms) may be served from :data:`EQUIVALENT_FLOOR`; any other one needs
   the namespace's similarity threshold;
3. with a verifier (a cross-encoder), the candidates still standing are scored. A verifier
   trained by ``agent-cache train-verifier`` carries a calibrated combiner (cosine,
   verifier score and the difference features in one logistic model) and its cut; a
   verifier without one (a hub reranker) can only veto, at ``rerank_threshold``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent_cache.differences import Analysis, analyze
from agent_cache.errors import ConfigurationError

__all__ = [
    "COMBINER_FILE",
    "EQUIVALENT_FLOOR",
    "Candidate",
    "Combiner",
    "SemanticPolicy",
    "Verdict",
    "finish",
    "screen",
]

#: Cosine similarity from which a candidate *equivalent* to the query (same words up to
#: typos, inflection, synonyms, acronyms) is served. Typos move MiniLM vectors a lot
#: ("whats the weahter in london" vs "what's the weather in london": 0.53).
EQUIVALENT_FLOOR = 0.5
#: The file a trained verifier's combiner is saved in, beside the model.
COMBINER_FILE = "agent_cache_combiner.json"


@dataclass(frozen=True)
class Candidate:
    """A k-NN result: the stored question, its entry key and its cosine similarity."""

    id: str
    key: str
    text: str
    similarity: float


@dataclass(frozen=True)
class Verdict:
    """What the semantic layer decided about one candidate.

    Attributes:
        outcome: ``"serve"``, ``"refused"`` (a meaningful difference, or the verifier),
            ``"below_threshold"`` or ``"verify"`` (waiting for the verifier's score).
        reason: the refusal reason (``"opposites"``, ``"verifier"``, ...) or ``""``.
        score: what the decision compared with its cut: the cosine, or the combiner's
            probability when a trained verifier decided.
        verifier: the verifier's score, when one ran.
    """

    candidate: Candidate
    outcome: str
    reason: str = ""
    score: float = 0.0
    analysis: Analysis | None = None
    verifier: float | None = None


@dataclass(frozen=True)
class Combiner:
    """Logistic model over (cosine, verifier logit, difference features) with its cut.

    Written by ``agent-cache train-verifier`` from labeled pairs held out of training;
    ``cut`` is the probability from which the lower 95 % confidence bound on precision
    met ``target_precision`` on those pairs.
    """

    weights: dict[str, float]
    cut: float
    min_similarity: float
    target_precision: float | None = None
    precision_bound: float | None = None
    measured: dict[str, Any] = field(default_factory=dict)

    def probability(self, features: dict[str, float]) -> float:
        z = self.weights.get("bias", 0.0) + sum(
            w * features.get(name, 0.0) for name, w in self.weights.items() if name != "bias"
        )
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / COMBINER_FILE
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, directory: str | Path) -> Combiner | None:
        """The combiner saved beside a verifier model, or ``None`` if there is none."""
        path = Path(directory) / COMBINER_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(**data)
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigurationError(f"cannot read verifier combiner {path}: {exc}") from exc


def features(similarity: float, verifier: float | None, analysis: Analysis) -> dict[str, float]:
    """The combiner's inputs for one candidate."""
    v = min(1 - 1e-6, max(1e-6, verifier if verifier is not None else 0.5))
    kinds = {d.kind for d in analysis.differences}
    return {
        "similarity": similarity,
        "verifier_logit": math.log(v / (1 - v)),
        "equivalent": float(analysis.equivalent),
        "detail": float("detail" in kinds),
        "synonym": float("synonym" in kinds or "acronym" in kinds),
        "typo": float("typo" in kinds),
        "derived": float("derived" in kinds),
    }


@dataclass(frozen=True)
class SemanticPolicy:
    """The operating point of one namespace.

    Attributes:
        threshold: cosine similarity a non-equivalent candidate needs.
        floor: cosine similarity an equivalent candidate needs.
        rerank_threshold: minimum verifier score (a verifier without a combiner).
        combiner: the trained combiner, when the verifier has one.
        case_sensitive: letter case matters (code).
    """

    threshold: float
    floor: float = EQUIVALENT_FLOOR
    rerank_threshold: float = 0.5
    combiner: Combiner | None = None
    case_sensitive: bool = False

    @property
    def lowest(self) -> float:
        """No candidate below this similarity can be served."""
        low = min(self.threshold, self.floor)
        if self.combiner is not None:
            low = min(low, self.combiner.min_similarity)
        return low


def screen(
    query: str, candidates: Sequence[Candidate], policy: SemanticPolicy, *, verifier: bool
) -> list[Verdict]:
    """Step 1-2 for every candidate, best similarity first; with ``verifier``, the
    candidates that the verifier must score come back as ``"verify"``."""
    out: list[Verdict] = []
    for cand in sorted(candidates, key=lambda c: -c.similarity):
        if cand.similarity < policy.lowest:
            out.append(Verdict(cand, "below_threshold", score=cand.similarity))
            continue
        analysis = analyze(query, cand.text, case_sensitive=policy.case_sensitive)
        if analysis.refused:
            out.append(Verdict(cand, "refused", analysis.reason, cand.similarity, analysis))
            continue
        by_similarity = cand.similarity >= policy.threshold or (
            analysis.equivalent and cand.similarity >= policy.floor
        )
        if verifier and (by_similarity or policy.combiner is not None):
            out.append(Verdict(cand, "verify", score=cand.similarity, analysis=analysis))
        elif by_similarity:
            out.append(Verdict(cand, "serve", score=cand.similarity, analysis=analysis))
        else:
            out.append(Verdict(cand, "below_threshold", score=cand.similarity, analysis=analysis))
    return out


def finish(
    verdicts: Sequence[Verdict], scores: Sequence[float], policy: SemanticPolicy
) -> list[Verdict]:
    """Step 3: fold the verifier's ``scores`` (one per ``"verify"`` verdict, in order) in.

    Returns every verdict; the servable ones (``"serve"``) are ordered best first.
    """
    pending = [v for v in verdicts if v.outcome == "verify"]
    if len(scores) != len(pending):
        raise ConfigurationError(
            f"the verifier returned {len(scores)} scores for {len(pending)} candidates"
        )
    scored = iter(scores)
    out: list[Verdict] = []
    for v in verdicts:
        if v.outcome != "verify":
            out.append(v)
            continue
        s = float(next(scored))
        assert v.analysis is not None
        if policy.combiner is not None:
            p = policy.combiner.probability(features(v.candidate.similarity, s, v.analysis))
            ok = p >= policy.combiner.cut
            out.append(
                Verdict(
                    v.candidate,
                    "serve" if ok else "refused",
                    "" if ok else "verifier",
                    p,
                    v.analysis,
                    s,
                )
            )
        else:
            ok = s >= policy.rerank_threshold
            out.append(
                Verdict(
                    v.candidate,
                    "serve" if ok else "refused",
                    "" if ok else "verifier",
                    s,
                    v.analysis,
                    s,
                )
            )
    served = sorted((v for v in out if v.outcome == "serve"), key=lambda v: -v.score)
    return served + [v for v in out if v.outcome != "serve"]


def decide(
    query: str,
    candidates: Sequence[Candidate],
    policy: SemanticPolicy,
    verifier: Any = None,
) -> list[Verdict]:
    """:func:`screen` then the verifier then :func:`finish`, in one call (no I/O besides
    the verifier's ``score``): for calibration and benchmarks."""
    verdicts = screen(query, candidates, policy, verifier=verifier is not None)
    pending = [v.candidate.text for v in verdicts if v.outcome == "verify"]
    scores = list(verifier.score(query, pending)) if pending else []
    return finish(verdicts, scores, policy)
