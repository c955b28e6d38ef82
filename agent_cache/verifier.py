"""Train a verifier that earns its place: ``agent-cache train-verifier FILE --out DIR``.

v0.1 fine-tuned a cross-encoder on random labeled pairs and used its raw score against a
fixed ``rerank_threshold`` of 0.5: trained on 20k QQP pairs it only matched the guarded
cosine, and a small run put 1 of 100 true pairs over 0.5 without a word. This trainer
fixes the three causes:

1. **Train on the decision the cache makes.** Besides the labeled pairs, each question is
   looked up among the stored ones with the embedder, and its top-k neighbours become
   training rows labeled by the duplicate clusters: the hard negatives the cosine
   confuses, which random pairs rarely contain.
2. **Counterfactual hard negatives** from the user's own questions, made by the
   perturbations the difference analysis knows (swap the arguments of a relation, an
   opposite word, another number, date or name, a negation), and typo'd positives.
3. **A calibrated combiner instead of a fixed cut.** On pairs held out of training
   (question-disjoint), the cosine, the verifier's logit and the difference features are
   combined in a small logistic model, and its cut is chosen from the lower 95 %
   confidence bound on precision (:mod:`agent_cache.calibrate`). The combiner is saved
   beside the model (``agent_cache_combiner.json``) and used by
   ``LayeredCache(reranker=DIR)``; the run says when the verifier does not beat the cosine.

A model trained on licensed evaluation data (such as the QQP development split) is for
local evaluation only: never commit or ship it.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence, Sized
from pathlib import Path
from typing import Any

import numpy as np

from agent_cache import lexicon as lx
from agent_cache import semantic
from agent_cache.calibrate import (
    Pair,
    ScoredQuery,
    curve,
    load_pairs,
    pick,
    question_split,
    score_queries,
)
from agent_cache.embedders import DEFAULT_EMBEDDER, embedder_from, resolve_model_path
from agent_cache.errors import ConfigurationError, MissingDependencyError
from agent_cache.keys import normalize
from agent_cache.protocols import Embedder

__all__ = [
    "fit_combiner",
    "mine_neighbours",
    "perturb",
    "prepare_examples",
    "sample_questions",
    "train_verifier",
]

Row = tuple[str, str, float]


def sample_questions(path: str | Path, n: int, *, seed: int = 0) -> set[str]:
    """The normalized ``a`` and ``b`` texts of the seeded ``n``-pair sample."""
    if n < 1:
        raise ConfigurationError("the excluded sample needs at least one pair")
    out: set[str] = set()
    for p in load_pairs(path, limit=n, seed=seed):
        out.add(normalize(p.a))
        out.add(normalize(p.b))
    return out


def prepare_examples(
    pairs: Iterable[Pair],
    *,
    limit: int | None = None,
    exclude: set[str] | None = None,
    seed: int = 0,
    both_orders: bool = False,
) -> list[Row]:
    """Training rows ``(first, second, label)`` from labeled pairs.

    Pairs with either question in ``exclude`` (normalized) are dropped; then a seeded
    sample of ``limit`` pairs is kept, each in a random order (or both orders).
    """
    if limit is not None and limit < 1:
        raise ConfigurationError("limit must be >= 1")
    excluded = {normalize(t) for t in exclude} if exclude else set()
    kept = [
        p
        for p in pairs
        if not excluded or (normalize(p.a) not in excluded and normalize(p.b) not in excluded)
    ]
    rng = random.Random(seed)
    if limit is not None and limit < len(kept):
        kept = rng.sample(kept, limit)
    rows: list[Row] = []
    for p in kept:
        label = float(p.label)
        if both_orders:
            rows.append((p.a, p.b, label))
            rows.append((p.b, p.a, label))
        elif rng.random() < 0.5:
            rows.append((p.b, p.a, label))
        else:
            rows.append((p.a, p.b, label))
    rng.shuffle(rows)
    if not rows:
        raise ConfigurationError("no training pairs left after the exclusion")
    return rows


# ------------------------------------------------------------------ mined neighbours
def mine_neighbours(
    pairs: Sequence[Pair],
    embedder: Embedder,
    *,
    judge_with: Sequence[Pair] | None = None,
    top_k: int = 5,
    limit: int | None = None,
    seed: int = 0,
) -> list[Row]:
    """The cache's own decisions as training rows: each ``b`` against its top-k stored
    ``a`` (by the embedder), labeled 1 when the clusters say duplicate, else 0."""
    queries = score_queries(
        pairs, embedder, top_k=top_k, judge_with=judge_with, min_similarity=2.0
    )  # no analysis needed here
    rows: list[Row] = []
    for q in queries:
        for c in q.candidates:
            if normalize(c.text) == normalize(q.query):
                continue
            rows.append((q.query, c.text, 1.0 if c.verdict == "correct" else 0.0))
    rng = random.Random(seed)
    rng.shuffle(rows)
    return rows[:limit] if limit is not None else rows


# ------------------------------------------------------------------ counterfactuals
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_NUM = re.compile(r"\b\d+(?:\.\d+)?\b")
_REL = re.compile(r"\b(\w+) (than|to|into|from|vs|over) (\w+)\b")
_AUX = re.compile(r"\b(is|are|can|do|does|did|should|will|was|were|could|would)\b", re.IGNORECASE)
_OPP: dict[str, list[str]] = {}
for _a, _b in lx.OPPOSITE_PAIRS:
    _OPP.setdefault(_a, []).append(_b)
    _OPP.setdefault(_b, []).append(_a)
_TEMPORAL_SWAPS = [
    ("today", "tomorrow"),
    ("tomorrow", "yesterday"),
    ("tonight", "tomorrow night"),
    ("this week", "next week"),
    ("next month", "last month"),
    ("morning", "evening"),
    ("monday", "friday"),
    ("tuesday", "sunday"),
    ("summer", "winter"),
    ("january", "june"),
]


def _swap_case(word: str, template: str) -> str:
    return word.capitalize() if template[:1].isupper() else word


def perturb(text: str, rng: random.Random, names: Sequence[str] = ()) -> tuple[str, str] | None:
    """A close variant of ``text`` that asks something else, and how it was made.

    Example:
        >>> perturb("Is Rome bigger than Madrid?", random.Random(0))
        ('Is not Rome bigger than Madrid?', 'negation')
    """
    ops = ["opposite", "order", "number", "temporal", "negation", "entity"]
    rng.shuffle(ops)
    for op in ops:
        out: str | None = None
        if op == "opposite":
            words = [m for m in _WORD.finditer(text) if m.group(0).lower() in _OPP]
            if words:
                m = rng.choice(words)
                new = _swap_case(rng.choice(_OPP[m.group(0).lower()]), m.group(0))
                out = text[: m.start()] + new + text[m.end() :]
        elif op == "order":
            rel = _REL.search(text)
            if rel and rel.group(1).lower() != rel.group(3).lower():
                m = rel
                swapped = f"{m.group(3)} {m.group(2)} {m.group(1)}"
                out = text[: m.start()] + swapped + text[m.end() :]
        elif op == "number":
            nums = list(_NUM.finditer(text))
            if nums:
                m = rng.choice(nums)
                value = m.group(0)
                new = (
                    str(int(float(value)) + rng.choice([1, 2, 10]))
                    if "." not in value
                    else (value[:-1] + str((int(value[-1]) + 1) % 10))
                )
                out = text[: m.start()] + new + text[m.end() :]
        elif op == "temporal":
            low = text.lower()
            for a, b in rng.sample(_TEMPORAL_SWAPS, len(_TEMPORAL_SWAPS)):
                i = low.find(a)
                if i >= 0:
                    out = text[:i] + _swap_case(b, text[i : i + len(a)]) + text[i + len(a) :]
                    break
        elif op == "negation":
            aux = _AUX.search(text)
            if aux and " not " not in text.lower() and "n't" not in text.lower():
                out = text[: aux.end()] + " not" + text[aux.end() :]
        elif op == "entity" and names:
            caps = [m for m in _WORD.finditer(text) if m.start() > 0 and m.group(0)[0].isupper()]
            if caps:
                m = rng.choice(caps)
                other = rng.choice(names)
                if other.lower() != m.group(0).lower():
                    out = text[: m.start()] + other + text[m.end() :]
        if out is not None and normalize(out) != normalize(text):
            return out, op
    return None


def _typo(text: str, rng: random.Random) -> str | None:
    words = [m for m in _WORD.finditer(text) if len(m.group(0)) >= 6]
    if not words:
        return None
    m = rng.choice(words)
    w = m.group(0)
    i = rng.randrange(1, len(w) - 2)
    typo = w[:i] + w[i + 1] + w[i] + w[i + 2 :]
    return text[: m.start()] + typo + text[m.end() :]


def counterfactuals(questions: Sequence[str], n: int, *, seed: int = 0) -> list[Row]:
    """``n`` rows: hard negatives made by :func:`perturb`, and 1 typo'd positive in 5."""
    rng = random.Random(seed)
    names = sorted(
        {
            m.group(0)
            for q in questions[:5000]
            for m in _WORD.finditer(q)
            if m.start() > 0 and m.group(0)[0].isupper()
        }
    )
    rows: list[Row] = []
    tries = 0
    while len(rows) < n and tries < 20 * n and questions:
        tries += 1
        q = rng.choice(questions)
        if rng.random() < 0.2:
            t = _typo(q, rng)
            if t is not None:
                rows.append((t, q, 1.0))
            continue
        made = perturb(q, rng, names)
        if made is not None:
            rows.append((made[0], q, 0.0) if rng.random() < 0.5 else (q, made[0], 0.0))
    return rows


# ------------------------------------------------------------------ the combiner
_FEATURES = ("similarity", "verifier_logit", "equivalent", "detail", "synonym", "typo", "derived")


def _fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, steps: int = 50) -> np.ndarray:
    """Newton-IRLS logistic regression with a small ridge; ``x`` has a bias column."""
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        z = np.clip(x @ w, -40, 40)
        p = 1.0 / (1.0 + np.exp(-z))
        g = x.T @ (p - y) + l2 * w
        h = (x * (p * (1 - p))[:, None]).T @ x + l2 * np.eye(x.shape[1])
        step = np.linalg.solve(h, g)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w


def _auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return 0.5
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _combiner_data(
    queries: Sequence[ScoredQuery], min_similarity: float
) -> tuple[list[list[float]], list[float]]:
    """The combiner's features (a bias first) and labels: each verified, unrefused
    candidate at ``min_similarity`` or above."""
    xs, ys = [], []
    for q in queries:
        for c in q.candidates:
            if c.refused or c.verifier is None or c.similarity < min_similarity:
                continue
            xs.append([1.0] + [c.features.get(f, 0.0) for f in _FEATURES])
            ys.append(1.0 if c.verdict == "correct" else 0.0)
    return xs, ys


def _verifier_auc(queries: Sequence[ScoredQuery]) -> float:
    """The verifier's AUC over every scored, unrefused candidate."""
    verified = [
        c for q in queries for c in q.candidates if c.verifier is not None and not c.refused
    ]
    scores = [c.verifier for c in verified if c.verifier is not None]
    return _auc(scores, [int(c.verdict == "correct") for c in verified])


def _combiner_measured(
    queries: Sequence[ScoredQuery],
    candidates: int,
    points: Sequence[Any],
    engine: Any,
) -> dict[str, Any]:
    """What a fitted combiner records of its held-out run (before its verdict)."""
    return {
        "held_out_queries": len(queries),
        "candidates": candidates,
        "verifier_auc": round(_verifier_auc(queries), 4),
        "curve": [
            {
                "cut": p.threshold,
                "hits": p.hits,
                "precision": round(p.precision, 4),
                "precision_lower": round(p.precision_lower, 4),
                "hit_rate": round(p.hit_rate, 4),
            }
            for p in points
        ],
        "engine_at_target": None
        if engine is None
        else {
            "threshold": engine.threshold,
            "hit_rate": round(engine.hit_rate, 4),
            "precision_lower": round(engine.precision_lower, 4),
        },
    }


def _combiner_cut(
    chosen: Any, engine: Any, weights: dict[str, float], measured: dict[str, Any]
) -> tuple[float, float | None]:
    """The cut and its precision bound; records in ``measured`` whether it is recommended."""
    if chosen is None:
        measured["recommended"] = False
        measured["why"] = "no cut reached the target precision's lower bound on held-out pairs"
        return 0.99, None
    beats = engine is None or chosen.hit_rate > engine.hit_rate
    measured["recommended"] = bool(beats and weights["verifier_logit"] > 0)
    measured["hit_rate_at_target"] = round(chosen.hit_rate, 4)
    if not measured["recommended"]:
        measured["why"] = (
            "at the target, the verifier does not raise the hit rate over "
            "the difference analysis + cosine on held-out pairs"
        )
    return chosen.threshold, round(chosen.precision_lower, 4)


def fit_combiner(
    queries: Sequence[ScoredQuery],
    *,
    target_precision: float = 0.9,
    min_similarity: float = 0.6,
) -> semantic.Combiner:
    """Fit the combiner on scored held-out queries and pick its cut from the bound."""
    xs, ys = _combiner_data(queries, min_similarity)
    if len(xs) < 20 or len(set(ys)) < 2:
        raise ConfigurationError(
            f"too few held-out candidates to fit the combiner ({len(xs)}); give more pairs"
        )
    w = _fit_logistic(np.asarray(xs), np.asarray(ys))
    weights = {"bias": float(w[0])} | {f: float(v) for f, v in zip(_FEATURES, w[1:], strict=True)}
    draft = semantic.Combiner(weights, 0.5, min_similarity)
    cuts = [round(0.05 * i, 2) for i in range(1, 16)] + [
        round(0.8 + 0.01 * i, 2) for i in range(20)
    ]
    points = curve(queries, cuts, "combiner", combiner=draft)
    chosen = pick(points, target_precision)
    engine = pick(curve(queries, mode="engine"), target_precision)
    measured = _combiner_measured(queries, len(xs), points, engine)
    cut, bound = _combiner_cut(chosen, engine, weights, measured)
    return semantic.Combiner(weights, cut, min_similarity, target_precision, bound, measured)


# ------------------------------------------------------------------ training
@dataclasses.dataclass
class _Training:
    """:func:`train_verifier`'s arguments, as one value its steps share."""

    pairs_path: str | Path | Sequence[Pair]
    out_dir: str | Path
    base: str | None
    embedder: Embedder | str | None
    epochs: int
    limit: int | None
    exclude: set[str] | None
    max_length: int
    batch_size: int
    seed: int
    learning_rate: float
    both_orders: bool
    mined_share: float
    counterfactual_share: float
    holdout: float
    holdout_limit: int | None
    target_precision: float
    threads: int | None
    max_steps: int | None
    log: Callable[[str], None] | None

    def say(self, message: str) -> None:
        if self.log is not None:
            self.log(message)


def train_verifier(
    pairs_path: str | Path | Sequence[Pair],
    out_dir: str | Path,
    *,
    base: str | None = None,
    embedder: Embedder | str | None = None,
    epochs: int = 1,
    limit: int | None = 30000,
    exclude: set[str] | None = None,
    max_length: int = 64,
    batch_size: int = 32,
    seed: int = 0,
    learning_rate: float = 5e-5,
    both_orders: bool = False,
    mined_share: float = 0.35,
    counterfactual_share: float = 0.15,
    holdout: float = 0.2,
    holdout_limit: int | None = 3000,
    target_precision: float = 0.9,
    threads: int | None = 2,
    max_steps: int | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Fine-tune a one-label cross-encoder and fit its combiner; save both to ``out_dir``.

    Args:
        pairs_path: ``{"a", "b", "label"}`` JSON lines, or the pairs.
        out_dir: where the model and ``agent_cache_combiner.json`` are saved.
        base: initial weights (default: the bundled all-MiniLM-L6-v2; a new head).
        embedder: the embedder that mines neighbours and scores the held-out pairs (the
            cache's: default all-MiniLM-L6-v2).
        limit: training rows in all (labeled pairs + mined + counterfactual).
        mined_share / counterfactual_share: their shares of ``limit``.
        holdout: the question-disjoint share of pairs kept out of training to fit and
            calibrate the combiner (``0`` skips the combiner: a veto-only verifier).
        target_precision: the combiner's cut is the lowest whose lower 95 % bound on
            held-out precision meets this.
        exclude: normalized question texts whose pairs are left out entirely.
        max_steps: stop after this many optimizer steps (tests).
        log: a ``print``-like callable for progress, or ``None``; progress bars show when
            it is given.
    """
    return _train(_Training(**locals()))  # every argument above, by name


def _train(o: _Training) -> Path:
    if o.epochs < 1:
        raise ConfigurationError("epochs must be >= 1")
    if not 0.0 <= o.holdout < 1.0:
        raise ConfigurationError("holdout must be in [0, 1)")
    torch = _require_trainer()
    if o.threads is not None:
        torch.set_num_threads(o.threads)
    every, held, train = _training_split(o)
    emb: Embedder = (
        o.embedder
        if o.embedder is not None and not isinstance(o.embedder, str)
        else embedder_from(o.embedder or DEFAULT_EMBEDDER)
    )
    rows = _training_rows(o, train, every, emb)
    model = _fit_cross_encoder(o, rows)
    out = Path(o.out_dir)
    model.save_pretrained(str(out))
    if held:
        combiner = _held_out_combiner(o, held, every, emb, model)
        if combiner is not None:
            _save_combiner(o, combiner, out)
    positives = sum(r[2] == 1.0 for r in rows)
    (out / "agent_cache_training.json").write_text(
        json.dumps(
            {
                "rows": len(rows),
                "positives": positives,
                "pairs": len(train),
                "held_out_pairs": len(held),
                "seed": o.seed,
                "epochs": o.epochs,
                "mined_share": o.mined_share,
                "counterfactual_share": o.counterfactual_share,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return out


def _require_trainer() -> Any:
    """``torch``, once the training extras are known to import."""
    try:
        import torch
        from datasets import Dataset  # noqa: F401
        from sentence_transformers import CrossEncoder  # noqa: F401
        from sentence_transformers.cross_encoder import (  # noqa: F401
            CrossEncoderTrainer,
            CrossEncoderTrainingArguments,
        )
        from sentence_transformers.cross_encoder.losses import (  # noqa: F401
            BinaryCrossEntropyLoss,
        )
    except ImportError as exc:
        raise MissingDependencyError(
            "sentence-transformers[train]", "rerank", feature="train_verifier"
        ) from exc
    return torch


def _training_split(o: _Training) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """Every pair, the held-out ones and the training ones (the exclusion applied)."""
    every = (
        load_pairs(o.pairs_path) if isinstance(o.pairs_path, (str, Path)) else list(o.pairs_path)
    )
    excluded = {normalize(t) for t in o.exclude} if o.exclude else set()
    usable = [p for p in every if normalize(p.a) not in excluded and normalize(p.b) not in excluded]
    if not usable:
        raise ConfigurationError("no training pairs left after the exclusion")
    if o.holdout:
        held, train = question_split(usable, seed=o.seed + 1, fraction=o.holdout)
    else:
        held, train = [], usable
    if not train:
        raise ConfigurationError("no training pairs left after the hold-out")
    return every, held, train


def _training_rows(o: _Training, train: list[Pair], every: list[Pair], emb: Embedder) -> list[Row]:
    """Labeled pairs, mined neighbours and counterfactuals, shuffled, in their shares."""
    total = o.limit if o.limit is not None else len(train) * 2
    n_mined = int(total * o.mined_share)
    n_cf = int(total * o.counterfactual_share)
    n_pairs = max(1, total - n_mined - n_cf)
    rows = prepare_examples(
        train, limit=min(n_pairs, len(train)), seed=o.seed, both_orders=o.both_orders
    )
    started = time.perf_counter()
    if n_mined:
        o.say(f"mining the embedder's nearest neighbours for {len(train)} training pairs ...")
        rows += mine_neighbours(train, emb, judge_with=every, limit=n_mined, seed=o.seed)
    if n_cf:
        questions = list(dict.fromkeys(t for p in train for t in (p.a, p.b)))
        rows += counterfactuals(questions, n_cf, seed=o.seed)
    random.Random(o.seed).shuffle(rows)
    positives = sum(r[2] == 1.0 for r in rows)
    o.say(
        f"training rows: {len(rows)} ({positives} positive; pairs, mined neighbours and "
        f"counterfactuals) prepared in {time.perf_counter() - started:.0f} s"
    )
    return rows


def _fit_cross_encoder(o: _Training, rows: list[Row]) -> Any:
    """The cross-encoder trained on ``rows`` (``out_dir`` made ready for it)."""
    from datasets import Dataset
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder import CrossEncoderTrainer
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    dataset = Dataset.from_dict(
        {
            "sentence1": [r[0] for r in rows],
            "sentence2": [r[1] for r in rows],
            "label": [r[2] for r in rows],
        }
    )
    model = CrossEncoder(
        resolve_model_path(o.base or DEFAULT_EMBEDDER),
        num_labels=1,
        max_length=o.max_length,
        device="cpu",
    )
    Path(o.out_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agent-cache-verifier-") as tmp:
        trainer = CrossEncoderTrainer(
            model=model,
            args=_training_arguments(o, tmp),
            train_dataset=dataset,
            loss=BinaryCrossEntropyLoss(model),
        )
        started = time.perf_counter()
        trainer.train()
        o.say(f"trained in {time.perf_counter() - started:.0f} s")
    return model


def _training_arguments(o: _Training, tmp: str) -> Any:
    from sentence_transformers.cross_encoder import CrossEncoderTrainingArguments

    return CrossEncoderTrainingArguments(
        output_dir=tmp,
        num_train_epochs=o.epochs,
        max_steps=o.max_steps if o.max_steps is not None else -1,
        per_device_train_batch_size=o.batch_size,
        learning_rate=o.learning_rate,
        warmup_steps=0.1,  # a float: the warm-up ratio (Transformers v5)
        seed=o.seed,
        save_strategy="no",
        eval_strategy="no",
        logging_steps=50,
        report_to="none",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=o.log is None,
    )


def _held_out_combiner(
    o: _Training, held: list[Pair], every: list[Pair], emb: Embedder, model: Any
) -> semantic.Combiner | None:
    """The combiner fitted on (a sample of) the held-out pairs; ``None`` when too few."""
    from agent_cache.rerankers import CrossEncoderReranker

    sample = held
    if o.holdout_limit is not None and len(held) > o.holdout_limit:
        sample = random.Random(o.seed).sample(held, o.holdout_limit)
    o.say(f"scoring {len(sample)} held-out pairs to fit the combiner ...")
    queries = score_queries(
        sample,
        emb,
        verifier=CrossEncoderReranker(model),
        judge_with=every,
        progress=_progress(o.log),
    )
    try:
        return fit_combiner(queries, target_precision=o.target_precision)
    except ConfigurationError as exc:  # too little held-out data: a veto-only verifier
        o.say(
            f"WARNING: no combiner: {exc}; the verifier can only veto "
            "(LayeredCache(rerank_threshold=...))."
        )
        return None


def _save_combiner(o: _Training, combiner: semantic.Combiner, out: Path) -> None:
    combiner.save(out)
    m = combiner.measured
    o.say(
        f"combiner: cut {combiner.cut:.2f}, precision lower bound "
        f"{combiner.precision_bound} at target {o.target_precision} on held-out questions; "
        f"verifier AUC {m.get('verifier_auc')}"
    )
    if not m.get("recommended"):
        o.say(
            f"WARNING: {m.get('why', 'the verifier is not recommended')}: keep the "
            "default (no verifier) or train on more pairs."
        )


def _progress(log: Callable[[str], None] | None) -> Callable[[Iterable[Any]], Iterable[Any]] | None:
    if log is None:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with transformers
        return None

    def wrap(items: Iterable[Any]) -> Iterable[Any]:
        total = len(items) if isinstance(items, Sized) else None
        bar: Iterable[Any] = tqdm(items, total=total, leave=False)
        return bar

    return wrap
