"""Train a duplicate-question verifier: a cross-encoder fine-tuned on labeled pairs.

``agent-cache train-verifier FILE --out DIR`` fine-tunes a one-label sentence-transformers
``CrossEncoder`` initialised from the bundled all-MiniLM-L6-v2 weights on ``{"a", "b",
"label"}`` JSON lines (the :func:`agent_cache.calibrate.load_pairs` format). The saved
directory loads with ``CrossEncoderReranker(str(out_dir))`` and serves as
``LayeredCache(reranker=...)``.

A model trained on licensed evaluation data (such as the QQP development split) is for
local evaluation only: never commit or ship it. Pass ``exclude`` (or ``--exclude-sample
N`` on the command line) so that the questions a benchmark evaluates on stay unseen.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from agent_cache.calibrate import Pair, load_pairs
from agent_cache.embedders import DEFAULT_EMBEDDER, resolve_model_path
from agent_cache.errors import ConfigurationError, MissingDependencyError
from agent_cache.keys import normalize

__all__ = [
    "prepare_examples",
    "sample_questions",
    "train_verifier",
]


def sample_questions(path: str | Path, n: int, *, seed: int = 0) -> set[str]:
    """The normalized ``a`` and ``b`` texts of the seeded ``n``-pair sample.

    The same sample ``load_pairs(path, limit=n, seed=seed)`` that ``agent-cache bench core
    --pairs n`` and ``calibrate`` evaluate on.
    """
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
) -> list[tuple[str, str, float]]:
    """Training rows ``(first, second, label)`` from labeled pairs.

    Pairs with either question in ``exclude`` (normalized texts, compared after
    :func:`agent_cache.keys.normalize`) are dropped; then a seeded sample of ``limit``
    pairs is kept. Each pair appears in a seeded random order, or in both orders when
    ``both_orders`` (twice the rows, twice the training time).
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
    rows: list[tuple[str, str, float]] = []
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


def train_verifier(
    pairs_path: str | Path | Sequence[Pair],
    out_dir: str | Path,
    *,
    base: str | None = None,
    epochs: int = 1,
    limit: int | None = 30000,
    exclude: set[str] | None = None,
    max_length: int = 64,
    batch_size: int = 32,
    seed: int = 0,
    learning_rate: float = 5e-5,
    both_orders: bool = False,
    threads: int | None = 2,
    max_steps: int | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Fine-tune a one-label cross-encoder on labeled pairs and save it to ``out_dir``.

    Args:
        pairs_path: A JSON-lines file of ``{"a", "b", "label"}`` rows, or the pairs.
        out_dir: Where the model is saved (created).
        base: Initial weights; default: the bundled all-MiniLM-L6-v2 (a classification
            head on top is newly initialised).
        epochs: Passes over the training rows.
        limit: Pairs sampled (seeded) after the exclusion; ``None`` for all.
        exclude: Question texts (normalized) whose pairs are left out, e.g.
            :func:`sample_questions` of the benchmark's sample.
        max_length: Token limit of a (question, question) input.
        batch_size: Training batch size.
        seed: Sampling, orientation and training seed.
        learning_rate: AdamW peak learning rate (10% linear warm-up, linear decay).
        both_orders: Train on (a, b) and (b, a) instead of one random order per pair.
        threads: ``torch.set_num_threads`` (``None`` leaves it unchanged).
        max_steps: Stop after this many optimizer steps (tests).
        log: A ``print``-like callable for progress, or ``None``.

    Returns:
        ``out_dir`` as a :class:`~pathlib.Path`; it loads with
        ``CrossEncoderReranker(str(out_dir))``.
    """
    if epochs < 1:
        raise ConfigurationError("epochs must be >= 1")
    try:
        import torch
        from datasets import Dataset
        from sentence_transformers import CrossEncoder
        from sentence_transformers.cross_encoder import (
            CrossEncoderTrainer,
            CrossEncoderTrainingArguments,
        )
        from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    except ImportError as exc:
        raise MissingDependencyError(
            "sentence-transformers[train]", "rerank", feature="train_verifier"
        ) from exc

    say = log or (lambda _msg: None)
    if threads is not None:
        torch.set_num_threads(threads)
    all_pairs = load_pairs(pairs_path) if isinstance(pairs_path, (str, Path)) else list(pairs_path)
    rows = prepare_examples(
        all_pairs, limit=limit, exclude=exclude, seed=seed, both_orders=both_orders
    )
    say(f"training rows: {len(rows)} ({sum(r[2] == 1.0 for r in rows)} positive)")
    dataset = Dataset.from_dict(
        {
            "sentence1": [r[0] for r in rows],
            "sentence2": [r[1] for r in rows],
            "label": [r[2] for r in rows],
        }
    )
    model = CrossEncoder(
        resolve_model_path(base or DEFAULT_EMBEDDER),
        num_labels=1,
        max_length=max_length,
        device="cpu",
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agent-cache-verifier-") as tmp:
        args = CrossEncoderTrainingArguments(
            output_dir=tmp,
            num_train_epochs=epochs,
            max_steps=max_steps if max_steps is not None else -1,
            per_device_train_batch_size=batch_size,
            learning_rate=learning_rate,
            warmup_steps=0.1,  # a float: the warm-up ratio (Transformers v5)
            seed=seed,
            save_strategy="no",
            eval_strategy="no",
            logging_steps=50,
            report_to="none",
            use_cpu=True,
            dataloader_num_workers=0,
            disable_tqdm=log is None,
        )
        trainer = CrossEncoderTrainer(
            model=model,
            args=args,
            train_dataset=dataset,
            loss=BinaryCrossEntropyLoss(model),
        )
        started = time.perf_counter()
        trainer.train()
        say(f"trained in {time.perf_counter() - started:.0f} s")
    model.save_pretrained(str(out))
    return out
