"""Threshold calibration from labeled question pairs (``agent-cache calibrate FILE``).

Protocol (see the evaluation data's README): store every distinct ``a``, look up every
``b``; judge a served hit by *clusters* (union of positive pairs and texts equal after
case/whitespace folding): correct if query and matched entry share a cluster, wrong if a
labeled negative joins their clusters, unknown otherwise. Precision counts unknown as
wrong (the pessimistic figure); hit rate is over positive-labeled queries.

The curve is computed once: for each query, the engine would serve the highest-scoring
candidate among the top-k that passes the guards, if its similarity reaches the
threshold; so one pass gives every threshold's outcome.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent_cache.errors import ConfigurationError
from agent_cache.guards import check_guards
from agent_cache.keys import normalize
from agent_cache.protocols import Embedder

__all__ = [
    "CurvePoint",
    "Pair",
    "calibrate",
    "evaluate_pairs",
    "load_pairs",
    "pick_threshold",
]


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    label: int


@dataclass(frozen=True)
class CurvePoint:
    threshold: float
    hits: int
    correct: int
    wrong: int
    unknown: int
    hit_rate: float  # correct hits / positive-labeled queries
    precision: float  # correct / hits (unknown counted as wrong)
    judged_precision: float  # correct / (correct + wrong)


def load_pairs(path: str | Path, *, limit: int | None = None, seed: int = 0) -> list[Pair]:
    """Read ``{"a", "b", "label"}`` JSON lines; a seeded sample of ``limit`` rows."""
    pairs: list[Pair] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if not isinstance(row.get("a"), str) or not isinstance(row.get("b"), str):
                    raise ConfigurationError(f"{path}:{n}: 'a' and 'b' must be strings")
                if row.get("label") not in (0, 1):
                    raise ConfigurationError(f"{path}:{n}: 'label' must be 0 or 1")
                pairs.append(Pair(row["a"], row["b"], int(row["label"])))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read labeled pairs from {path}: {exc}") from exc
    if limit is not None and limit < len(pairs):
        pairs = random.Random(seed).sample(pairs, limit)
    if not pairs:
        raise ConfigurationError(f"no labeled pairs in {path}")
    return pairs


class _Clusters:
    def __init__(self, pairs: Sequence[Pair]) -> None:
        self.parent: dict[str, str] = {}
        for p in pairs:
            if p.label == 1:
                self._union(self._k(p.a), self._k(p.b))
        self.negatives = {
            frozenset((self.find(self._k(p.a)), self.find(self._k(p.b))))
            for p in pairs
            if p.label == 0
        }

    @staticmethod
    def _k(text: str) -> str:
        return normalize(text)

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def _union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb

    def judge(self, query: str, matched: str) -> str:
        cq, cm = self.find(self._k(query)), self.find(self._k(matched))
        if cq == cm:
            return "correct"
        if frozenset((cq, cm)) in self.negatives:
            return "wrong"
        return "unknown"


def evaluate_pairs(
    pairs: Sequence[Pair],
    embedder: Embedder,
    *,
    guards: bool = True,
    top_k: int = 5,
    batch_size: int = 256,
    judge_with: Sequence[Pair] | None = None,
) -> tuple[np.ndarray, list[str], int]:
    """Score every query once.

    ``judge_with`` are the labeled pairs the duplicate clusters are built from (default:
    ``pairs``). Passing the whole file while storing and querying a sample judges far more
    hits than the sample's own pairs can: two phrasings of one question are often linked
    only through rows outside the sample.

    Returns ``(scores, verdicts, positives)``: for each query the similarity of the
    candidate the engine would serve (``-1`` when none passes the guards) and that
    candidate's verdict, plus the number of positive-labeled queries.
    """
    clusters = _Clusters(judge_with if judge_with is not None else pairs)
    stored = list(dict.fromkeys(p.a for p in pairs))

    def embed(texts: list[str]) -> np.ndarray:
        step = batch_size
        parts = [embedder.embed(texts[i : i + step]) for i in range(0, len(texts), step)]
        return np.vstack(parts).astype(np.float32)

    store_vecs = embed(stored)
    query_vecs = embed([p.b for p in pairs])
    scores = np.full(len(pairs), -1.0, dtype=np.float32)
    verdicts = ["none"] * len(pairs)
    for start in range(0, len(pairs), 1024):
        sims = query_vecs[start : start + 1024] @ store_vecs.T
        k = min(top_k, sims.shape[1])
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        for row, cand in enumerate(top):
            i = start + row
            order = cand[np.argsort(-sims[row, cand])]
            q = pairs[i].b
            for j in order:
                matched = stored[j]
                if guards and check_guards(q, matched):
                    continue
                scores[i] = float(np.clip(sims[row, j], 0.0, 1.0))
                verdicts[i] = clusters.judge(q, matched)
                break
    positives = sum(1 for p in pairs if p.label == 1)
    return scores, verdicts, positives


def curve(
    scores: np.ndarray,
    verdicts: Sequence[str],
    labels: Sequence[int],
    thresholds: Iterable[float],
) -> list[CurvePoint]:
    positives = max(1, sum(labels))
    verdict_arr = np.array(verdicts)
    label_arr = np.array(labels)
    out = []
    for t in thresholds:
        served = scores >= t
        correct = int(np.sum(served & (verdict_arr == "correct")))
        wrong = int(np.sum(served & (verdict_arr == "wrong")))
        unknown = int(np.sum(served & (verdict_arr == "unknown")))
        hits = correct + wrong + unknown
        pos_correct = int(np.sum(served & (verdict_arr == "correct") & (label_arr == 1)))
        out.append(
            CurvePoint(
                threshold=round(float(t), 4),
                hits=hits,
                correct=correct,
                wrong=wrong,
                unknown=unknown,
                hit_rate=pos_correct / positives,
                precision=correct / hits if hits else 1.0,
                judged_precision=correct / (correct + wrong) if correct + wrong else 1.0,
            )
        )
    return out


def pick_threshold(points: Sequence[CurvePoint], target_precision: float) -> CurvePoint:
    """The lowest threshold whose precision, and every stricter one's, meets the target."""
    ordered = sorted(points, key=lambda p: p.threshold)
    for i, p in enumerate(ordered):
        if all(q.precision >= target_precision for q in ordered[i:] if q.hits >= 20):
            return p
    return ordered[-1]


def calibrate(
    path: str | Path,
    embedder: Embedder,
    *,
    target_precision: float = 0.9,
    limit: int | None = 5000,
    seed: int = 0,
    guards: bool = True,
) -> dict[str, Any]:
    """Measure the threshold curve and pick the threshold for ``target_precision``.

    Returns the JSON-ready config that ``LayeredCache(config=...)`` reads.
    """
    if not 0.0 < target_precision < 1.0:
        raise ConfigurationError("target_precision must be in (0, 1)")
    pairs = load_pairs(path, limit=limit, seed=seed)
    judge = load_pairs(path)  # clusters from the whole file, not only the sample's rows
    scores, verdicts, _ = evaluate_pairs(pairs, embedder, guards=guards, judge_with=judge)
    grid = [round(0.70 + 0.01 * i, 2) for i in range(30)]
    points = curve(scores, verdicts, [p.label for p in pairs], grid)
    chosen = pick_threshold(points, target_precision)
    return {
        "threshold": chosen.threshold,
        "target_precision": target_precision,
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "pairs": len(pairs),
        "guards": guards,
        "chosen": asdict(chosen),
        "curve": [asdict(p) for p in points],
    }
