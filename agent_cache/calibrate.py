"""Calibration from labeled question pairs (``agent-cache calibrate FILE``), with a guarantee.

Protocol (see the evaluation data's README): store every distinct ``a``, look up every
``b``; the semantic layer's own decision (:mod:`agent_cache.semantic`: the difference
analysis, the equivalence floor, the threshold, the verifier) picks what would be served.
A served hit is judged by *clusters* (union of positive pairs and texts equal after
normalization): correct if query and matched entry share a cluster, wrong if a labeled
negative joins their clusters, unknown otherwise. Precision counts unknown as wrong (the
pessimistic figure); hit rate is over positive-labeled queries.

The operating point is picked from a **lower confidence bound** on precision (Wilson,
95 %), not from the point estimate: a threshold chosen from 71 hits whose precision
happens to read 0.90 promises nothing, and the bound says so. ``calibrate`` reports the
bound it promises; :func:`question_split` gives the question-disjoint halves to measure a
promise on questions the calibration never saw.

When no threshold's bound reaches the target, the config says so (``"target_met":
false``, with the best bound reached) and its threshold is never looser than the
cache's default (:data:`agent_cache.DEFAULT_THRESHOLD`): a missed target must not
loosen the cache. ``LayeredCache(config=...)`` refuses such a file unless it is passed as
``config=allow_unmet_target(path)``; ``agent-cache calibrate`` exits 1.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent_cache import semantic
from agent_cache._respell import respelled
from agent_cache._settings import allow_unmet_target
from agent_cache.cache import DEFAULT_THRESHOLD
from agent_cache.differences import analyze
from agent_cache.embedders import span_encoder
from agent_cache.errorbound import wilson_lower
from agent_cache.errors import ConfigurationError
from agent_cache.keys import normalize
from agent_cache.protocols import Embedder, Reranker

__all__ = [
    "Clusters",
    "CurvePoint",
    "Pair",
    "ScoredCandidate",
    "ScoredQuery",
    "allow_unmet_target",
    "calibrate",
    "curve",
    "load_pairs",
    "pick",
    "question_split",
    "score_queries",
    "served",
]

GRID = tuple(round(0.70 + 0.01 * i, 2) for i in range(30))


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    label: int
    namespace: str = "default"


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
    precision_lower: float = 0.0  # Wilson 95 % lower bound of ``precision``


def load_pairs(path: str | Path, *, limit: int | None = None, seed: int = 0) -> list[Pair]:
    """Read ``{"a", "b", "label"[, "namespace"]}`` JSON lines; a seeded sample of ``limit``."""
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
                ns = row.get("namespace", "default")
                if not isinstance(ns, str) or not ns:
                    raise ConfigurationError(f"{path}:{n}: 'namespace' must be a non-empty str")
                pairs.append(Pair(row["a"], row["b"], int(row["label"]), ns))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read labeled pairs from {path}: {exc}") from exc
    if limit is not None and limit < len(pairs):
        pairs = random.Random(seed).sample(pairs, limit)
    if not pairs:
        raise ConfigurationError(f"no labeled pairs in {path}")
    return pairs


class _Union:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


class Clusters:
    """Duplicate clusters of labeled pairs; :meth:`judge` a served hit."""

    def __init__(self, pairs: Iterable[Pair]) -> None:
        pairs = list(pairs)
        self._u = _Union()
        for p in pairs:
            if p.label == 1:
                self._u.union(normalize(p.a), normalize(p.b))
        self.negatives = {
            frozenset((self._u.find(normalize(p.a)), self._u.find(normalize(p.b))))
            for p in pairs
            if p.label == 0
        }

    def judge(self, query: str, matched: str) -> str:
        cq, cm = self._u.find(normalize(query)), self._u.find(normalize(matched))
        if cq == cm:
            return "correct"
        if frozenset((cq, cm)) in self.negatives:
            return "wrong"
        return "unknown"


def question_split(
    pairs: Sequence[Pair], *, seed: int = 0, fraction: float = 0.5
) -> tuple[list[Pair], list[Pair]]:
    """Split pairs so that no question (nor any of its duplicates) is on both sides.

    Questions are grouped by the connected components of the pair graph (every labeled
    pair links its two texts); a seeded hash of the component sends it to one side.
    """
    u = _Union()
    for p in pairs:
        u.union(normalize(p.a), normalize(p.b))

    def side(text: str) -> bool:
        root = u.find(normalize(text))
        h = int(hashlib.sha256(f"{seed}:{root}".encode()).hexdigest()[:8], 16)
        return h / 0xFFFFFFFF < fraction

    first = [p for p in pairs if side(p.a)]
    second = [p for p in pairs if not side(p.a)]
    return first, second


@dataclass
class ScoredCandidate:
    """One k-NN candidate of a query, with everything a decision needs."""

    text: str
    similarity: float
    verdict: str  # correct | wrong | unknown (judged by the clusters)
    refused: str = ""  # the difference analysis' reason, "" when not refused
    equivalent: bool = False
    verifier: float | None = None
    synonymous: bool = False
    reworded: bool = False  # every word matched in another form: served from a floor
    checked: bool = False  # explained by the model check: served below the threshold
    read: tuple[str, str] = ("", "")  # the pair as the analysis reads it (Analysis.read)
    read_similarity: float | None = None  # ... and its cosine
    features: dict[str, float] = field(default_factory=dict)


@dataclass
class ScoredQuery:
    query: str
    label: int
    namespace: str
    candidates: list[ScoredCandidate]


def _embed(embedder: Embedder, texts: Sequence[str], batch_size: int) -> np.ndarray:
    parts = [
        embedder.embed(list(texts[i : i + batch_size])) for i in range(0, len(texts), batch_size)
    ]
    return np.vstack(parts).astype(np.float32) if parts else np.zeros((0, 1), np.float32)


def _top_k(
    q_vecs: np.ndarray, s_vecs: np.ndarray, k: int, also: np.ndarray | None = None
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per query row, its ``k`` nearest stored rows and their similarities, best first
    (one matrix product per block of 1024 queries); with ``also`` (a second vector per
    query), the better of the two similarities."""
    tops: list[np.ndarray] = []
    sim_rows: list[np.ndarray] = []
    for start in range(0, len(q_vecs), 1024):
        block = q_vecs[start : start + 1024] @ s_vecs.T
        if also is not None:
            block = np.maximum(block, also[start : start + 1024] @ s_vecs.T)
        top = np.argpartition(-block, k - 1, axis=1)[:, :k]
        vals = np.take_along_axis(block, top, axis=1)
        order = np.argsort(-vals, axis=1, kind="stable")
        tops.extend(np.take_along_axis(top, order, axis=1))
        sim_rows.extend(np.take_along_axis(vals, order, axis=1))
    return tops, sim_rows


def score_queries(
    pairs: Sequence[Pair],
    embedder: Embedder,
    *,
    top_k: int = 5,
    verifier: Reranker | None = None,
    judge_with: Sequence[Pair] | None = None,
    batch_size: int = 256,
    min_similarity: float = semantic.EQUIVALENT_FLOOR,
    progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None,
) -> list[ScoredQuery]:
    """Store every distinct ``a`` (per namespace), look up every ``b``: the top-k
    candidates with their similarity, difference analysis and (with a ``verifier``) its
    score for the candidates the analysis did not refuse.

    ``judge_with`` are the labeled pairs the clusters are built from (default: ``pairs``);
    pass the whole file when ``pairs`` is a sample.
    """
    clusters = Clusters(judge_with if judge_with is not None else pairs)
    out: list[ScoredQuery] = []
    probes: list[tuple[ScoredCandidate, semantic.Verdict, semantic.SynonymProbe]] = []
    rereads: list[ScoredCandidate] = []
    by_ns: dict[str, list[Pair]] = {}
    for p in pairs:
        by_ns.setdefault(p.namespace, []).append(p)
    for ns, ns_pairs in by_ns.items():
        stored = list(dict.fromkeys(p.a for p in ns_pairs))
        s_vecs = _embed(embedder, stored, batch_size)
        q_vecs = _embed(embedder, [p.b for p in ns_pairs], batch_size)
        # searched as the lookup searches: also with misspelled words respelled (_respell)
        fixed = {i: t for i, p in enumerate(ns_pairs) if (t := respelled(p.b)) is not None}
        also = None
        if fixed:
            also = q_vecs.copy()
            also[list(fixed)] = _embed(embedder, list(fixed.values()), batch_size)
        tops, sim_rows = _top_k(q_vecs, s_vecs, min(top_k, len(stored)), also)
        rows: Iterable[int] = range(len(ns_pairs))
        if progress is not None:
            rows = progress(rows)
        for i in rows:
            p = ns_pairs[i]
            cands = []
            refused: list[tuple[ScoredCandidate, semantic.Verdict]] = []
            for j, raw in zip(tops[i], sim_rows[i], strict=True):
                sim = float(np.clip(raw, 0.0, 1.0))
                text = stored[int(j)]
                cand = ScoredCandidate(text, sim, clusters.judge(p.b, text))
                if sim >= min_similarity:
                    refused.extend(_analyzed(cand, p.b))
                else:
                    cand.refused = "below"
                cands.append(cand)
            out.append(ScoredQuery(p.b, p.label, ns, cands))
            probes.extend(_probe(refused))
            rereads.extend(_reread(cands))
    _model_check(probes, embedder, batch_size)
    _read_check(rereads, embedder, batch_size)
    if verifier is not None:
        _verify(out, verifier, min_similarity, progress)
    return out


def _probe(
    refused: Sequence[tuple[ScoredCandidate, semantic.Verdict]],
) -> list[tuple[ScoredCandidate, semantic.Verdict, semantic.SynonymProbe]]:
    """The model check's probe of one query's refused (or WordNet-synonymous) candidates,
    as the lookup makes it when nothing is servable (:func:`semantic.synonym_probes`:
    the best for one swapped word or two)."""
    found = semantic.synonym_probes([v for _, v in refused])
    return [(refused[p.index][0], refused[p.index][1], p) for p in found]


def _analyzed(cand: ScoredCandidate, query: str) -> list[tuple[ScoredCandidate, semantic.Verdict]]:
    """Fill ``cand`` in from the difference analysis; the verdict for the model check when
    it is refused, or below a threshold and WordNet-synonymous (the check may serve it)."""
    text, sim = cand.text, cand.similarity
    a = analyze(query, text)
    cand.refused, cand.equivalent = a.reason, a.equivalent
    cand.synonymous, cand.reworded, cand.read = a.synonymous, a.reworded, a.read
    cand.features = semantic.features(sim, None, a)
    found = semantic.Candidate(text, text, text, sim)
    if a.reason:
        return [(cand, semantic.Verdict(found, "refused", a.reason, sim, a))]
    if a.synonymous:
        return [(cand, semantic.Verdict(found, "below_threshold", "", sim, a))]
    return []


def _reread(cands: Sequence[ScoredCandidate]) -> list[ScoredCandidate]:
    """The candidate the lookup embeds again as the analysis reads it
    (:func:`semantic.reread`): the most similar one with a reading, not served from a
    floor."""
    for cand in cands:
        if cand.read[0] and not (cand.equivalent or cand.reworded or cand.synonymous):
            return [cand]
    return []


def _read_check(rereads: Sequence[ScoredCandidate], embedder: Embedder, batch_size: int) -> None:
    """Each reread candidate's cosine as read (``read_similarity``)."""
    if not rereads:
        return
    vecs = _embed(embedder, [t for cand in rereads for t in cand.read], batch_size)
    for k, cand in enumerate(rereads):
        cand.read_similarity = float(np.dot(vecs[2 * k], vecs[2 * k + 1]))


def _model_check(
    probes: Sequence[tuple[ScoredCandidate, semantic.Verdict, semantic.SynonymProbe]],
    embedder: Embedder,
    batch_size: int,
) -> None:
    """Fold the lookup's model check into the scored candidates: a swap the embedder
    explains is no longer a refusal and, as in the lookup, is served below the threshold
    (``checked``; :func:`semantic.model_checked`)."""
    if not probes:
        return
    texts = list(
        dict.fromkeys(
            t
            for _, _, p in probes
            for t in (p.text, p.masked, *p.bare_words(), *([p.against] if p.against else []))
        )
    )
    vecs = _embed(embedder, texts, batch_size)
    row = {t: i for i, t in enumerate(texts)}
    encode = span_encoder(embedder)
    for cand, verdict, p in probes:
        pair = [vecs[row[p.text]], vecs[row[p.masked]]]
        context = None
        if encode is not None and p.spans is not None:
            bare = [vecs[row[w]] for w in p.bare_words()]
            context = [semantic.in_context(encode(p.context_items()), bare)]
        asked = [float(np.dot(vecs[row[p.text]], vecs[row[p.against]]))] if p.against else None
        checked = semantic.model_checked(
            [verdict],
            [dataclasses.replace(p, index=0)],
            pair,
            verifier=False,
            context=context,
            asked=asked,
        )[0]
        if checked.outcome == "serve":
            cand.refused, cand.checked = "", True
            if checked.analysis is not None:
                cand.features = semantic.features(cand.similarity, None, checked.analysis)


def _verify(
    queries: Sequence[ScoredQuery],
    verifier: Reranker,
    min_similarity: float,
    progress: Callable[[Iterable[Any]], Iterable[Any]] | None,
) -> None:
    rows: Iterable[ScoredQuery] = queries
    if progress is not None:
        rows = progress(rows)
    for q in rows:
        todo = [c for c in q.candidates if not c.refused and c.similarity >= min_similarity]
        if not todo:
            continue
        scores = verifier.score(q.query, [c.text for c in todo])
        for c, s in zip(todo, scores, strict=True):
            c.verifier = float(s)
            v = min(1 - 1e-6, max(1e-6, float(s)))
            c.features["verifier_logit"] = float(np.log(v / (1 - v)))


def served(
    q: ScoredQuery,
    point: float,
    mode: str = "engine",
    *,
    floor: float = semantic.EQUIVALENT_FLOOR,
    combiner: semantic.Combiner | None = None,
    rerank_threshold: float = 0.5,
) -> ScoredCandidate | None:
    """The candidate the cache would serve at operating point ``point``.

    Modes: ``"static"`` (nearest stored question, cosine ≥ point: the design GPTCache,
    RedisVL and langchain-redis ship), ``"engine"`` (our default: difference analysis,
    equivalence floor, threshold = point), ``"veto"`` (engine + a verifier that must score
    ≥ ``rerank_threshold``), ``"combiner"`` (a trained combiner; point = its cut).
    """
    if mode == "static":
        c = q.candidates[0] if q.candidates else None
        return c if c is not None and c.similarity >= point else None
    if mode == "combiner":
        if combiner is None:
            raise ConfigurationError("mode 'combiner' needs a combiner")
        best: tuple[float, ScoredCandidate] | None = None
        for c in q.candidates:
            if c.refused or c.verifier is None or c.similarity < combiner.min_similarity:
                continue
            p = combiner.probability(c.features)
            if p >= point and (best is None or p > best[0]):
                best = (p, c)
        return best[1] if best else None
    for c in q.candidates:
        if c.refused:
            continue
        reworded = c.reworded and c.similarity >= semantic.REWORDED_FLOOR
        if (
            c.similarity >= point
            or (c.checked and c.similarity >= semantic.synonym_floor(point))
            or (c.read_similarity is not None and c.read_similarity >= point)
            or reworded
            or (c.equivalent and c.similarity >= floor)
        ):
            if mode == "veto" and (c.verifier is None or c.verifier < rerank_threshold):
                continue
            return c
    return None


def curve(
    queries: Sequence[ScoredQuery],
    points: Iterable[float] = GRID,
    mode: str = "engine",
    **kw: Any,
) -> list[CurvePoint]:
    """Hits, precision (and its lower bound), judged precision, hit rate per point."""
    positives = max(1, sum(q.label for q in queries))
    out = []
    for t in points:
        correct = wrong = unknown = pos_correct = 0
        for q in queries:
            c = served(q, t, mode, **kw)
            if c is None:
                continue
            if c.verdict == "correct":
                correct += 1
                pos_correct += q.label
            elif c.verdict == "wrong":
                wrong += 1
            else:
                unknown += 1
        hits = correct + wrong + unknown
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
                precision_lower=wilson_lower(correct, hits),
            )
        )
    return out


def pick(points: Sequence[CurvePoint], target_precision: float) -> CurvePoint | None:
    """The lowest operating point whose lower 95 % bound on precision meets the target
    (``None`` when none does)."""
    ok = [p for p in points if p.hits and p.precision_lower >= target_precision]
    return min(ok, key=lambda p: p.threshold) if ok else None


def pick_threshold(points: Sequence[CurvePoint], target_precision: float) -> CurvePoint:
    """:func:`pick`, or the point with the best bound when none meets the target."""
    chosen = pick(points, target_precision)
    if chosen is not None:
        return chosen
    return max(points, key=lambda p: (p.precision_lower, p.threshold))


def calibrate(
    path: str | Path,
    embedder: Embedder,
    *,
    target_precision: float = 0.9,
    limit: int | None = 5000,
    seed: int = 0,
    reranker: Reranker | None = None,
    min_namespace_pairs: int = 200,
    progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None,
) -> dict[str, Any]:
    """Measure the curve and pick the threshold for ``target_precision`` from its bound.

    Pairs carrying a ``namespace`` get a threshold per namespace when a namespace has at
    least ``min_namespace_pairs`` of them (only where the target is met there). Returns
    the JSON-ready config that ``LayeredCache(config=...)`` reads.

    When no threshold meets the target, ``"target_met"`` is ``False``,
    ``"best_precision_bound"`` / ``"best_threshold"`` give the best bound reached, and
    ``"threshold"`` is the stricter of that point and :data:`DEFAULT_THRESHOLD`
    (``"chosen"`` and ``"precision_bound"`` describe the threshold written).
    """
    if not 0.0 < target_precision < 1.0:
        raise ConfigurationError("target_precision must be in (0, 1)")
    pairs = load_pairs(path, limit=limit, seed=seed)
    judge = load_pairs(path)  # clusters from the whole file, not only the sample's rows
    mode = "veto" if reranker is not None else "engine"
    queries = score_queries(pairs, embedder, verifier=reranker, judge_with=judge, progress=progress)
    points = curve(queries, GRID, mode)
    chosen = pick(points, target_precision)
    met = chosen is not None
    best = pick_threshold(points, target_precision)
    if chosen is None:  # never looser than the default: a missed target loosens nothing
        chosen = _not_looser_than_default(best, points)
    result: dict[str, Any] = {
        "threshold": chosen.threshold,
        "target_precision": target_precision,
        "precision_bound": round(chosen.precision_lower, 4),
        "target_met": met,
        "best_precision_bound": round(best.precision_lower, 4),
        "best_threshold": best.threshold,
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "pairs": len(pairs),
        "mode": mode,
        "chosen": asdict(chosen),
        "curve": [asdict(p) for p in points],
        "thresholds": {},
    }
    result["thresholds"] = _namespace_thresholds(
        queries, mode, target_precision, min_namespace_pairs
    )
    return result


def _not_looser_than_default(best: CurvePoint, points: Sequence[CurvePoint]) -> CurvePoint:
    """The point written when no threshold meets the target: ``best``, or the loosest
    point at :data:`DEFAULT_THRESHOLD` or above when ``best`` is looser than that."""
    if best.threshold >= DEFAULT_THRESHOLD:
        return best
    stricter = [p for p in points if p.threshold >= DEFAULT_THRESHOLD]
    if stricter:
        return min(stricter, key=lambda p: p.threshold)
    return CurvePoint(DEFAULT_THRESHOLD, 0, 0, 0, 0, 0.0, 1.0, 1.0, 0.0)


def _namespace_thresholds(
    queries: Sequence[ScoredQuery], mode: str, target_precision: float, min_pairs: int
) -> dict[str, float]:
    """A threshold per namespace with ``min_pairs`` queries that meets the target there
    (none when the queries hold one namespace only)."""
    thresholds: dict[str, float] = {}
    namespaces = {q.namespace for q in queries}
    if len(namespaces) > 1:
        for ns in sorted(namespaces):
            ns_queries = [q for q in queries if q.namespace == ns]
            if len(ns_queries) < min_pairs:
                continue
            p = pick(curve(ns_queries, GRID, mode), target_precision)
            if p is not None:
                thresholds[ns] = p.threshold
    return thresholds
