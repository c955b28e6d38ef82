"""Data preparation for the trained verifier (no model is loaded here)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agent_cache import ConfigurationError
from agent_cache.calibrate import Pair, load_pairs
from agent_cache.cli import build_parser
from agent_cache.keys import normalize
from agent_cache.verifier import prepare_examples, sample_questions


def _pairs(n: int = 40) -> list[Pair]:
    return [
        Pair(f"How do I care for a pet number {i}?", f"How do I look after pet {i}?", i % 2)
        for i in range(n)
    ]


def test_exclusion_drops_every_pair_touching_an_excluded_question() -> None:
    pairs = _pairs()
    # excluded texts are compared normalized: case and whitespace do not matter
    exclude = {"  HOW do I care for a pet number 3? ", normalize(pairs[7].b)}
    rows = prepare_examples(pairs, exclude=exclude, seed=1)
    texts = {normalize(t) for r in rows for t in r[:2]}
    assert normalize(pairs[3].a) not in texts and normalize(pairs[3].b) not in texts
    assert normalize(pairs[7].a) not in texts and normalize(pairs[7].b) not in texts
    assert len(rows) == len(pairs) - 2
    assert {r[2] for r in rows} == {0.0, 1.0}


def test_limit_orders_and_determinism() -> None:
    pairs = _pairs()
    rows = prepare_examples(pairs, limit=10, seed=5)
    assert len(rows) == 10
    assert rows == prepare_examples(pairs, limit=10, seed=5)
    both = prepare_examples(pairs, limit=10, seed=5, both_orders=True)
    assert len(both) == 20
    assert {(a, b) for a, b, _ in both} == {(b, a) for a, b, _ in both}
    labels = {(p.a, p.b): float(p.label) for p in pairs}
    for a, b, label in rows:  # each row keeps its pair's label, in either order
        assert labels.get((a, b), labels.get((b, a))) == label


def test_everything_excluded_or_bad_limit_is_an_error() -> None:
    pairs = _pairs(4)
    with pytest.raises(ConfigurationError):
        prepare_examples(pairs, exclude={normalize(p.a) for p in pairs})
    with pytest.raises(ConfigurationError):
        prepare_examples(pairs, limit=0)


def test_sample_questions_match_the_benchmark_sample(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        "\n".join(json.dumps({"a": p.a, "b": p.b, "label": p.label}) for p in _pairs()),
        encoding="utf-8",
    )
    sample = load_pairs(path, limit=8, seed=0)  # what `bench core --pairs 8` evaluates
    questions = sample_questions(path, 8)
    assert questions == {normalize(t) for p in sample for t in (p.a, p.b)}
    rows = prepare_examples(load_pairs(path), exclude=questions)
    assert len(rows) == 40 - 8
    assert not {normalize(t) for r in rows for t in r[:2]} & questions


def test_cli_parses_train_verifier() -> None:
    args = build_parser().parse_args(
        ["train-verifier", "f.jsonl", "--out", "d", "--exclude-sample", "5000", "--limit", "9"]
    )
    assert (args.file, args.out, args.exclude_sample, args.limit, args.epochs, args.seed) == (
        "f.jsonl",
        "d",
        5000,
        9,
        1,
        0,
    )


def test_cli_passes_the_excluded_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import agent_cache.verifier as verifier
    from agent_cache.cli import main

    path = tmp_path / "pairs.jsonl"
    path.write_text(
        "\n".join(json.dumps({"a": p.a, "b": p.b, "label": p.label}) for p in _pairs()),
        encoding="utf-8",
    )
    seen: dict[str, object] = {}

    def fake_train(pairs_path: object, out_dir: object, **kwargs: object) -> Path:
        seen.update(kwargs, pairs_path=pairs_path)
        return Path(str(out_dir))

    monkeypatch.setattr(verifier, "train_verifier", fake_train)
    assert (
        main(
            [
                "train-verifier",
                str(path),
                "--out",
                str(tmp_path / "m"),
                "--exclude-sample",
                "8",
                "--limit",
                "20",
                "--epochs",
                "2",
                "--base",
                "cross-encoder/ms-marco-MiniLM-L6-v2",
            ]
        )
        == 0
    )
    assert seen["exclude"] == sample_questions(path, 8)
    assert (seen["limit"], seen["epochs"], seen["seed"]) == (20, 2, 0)
    assert seen["base"] == "cross-encoder/ms-marco-MiniLM-L6-v2"  # a pretrained pair model


# ---------------------------------------------------------------- the new trainer's parts
def test_counterfactuals_are_close_variants_the_analysis_refuses() -> None:
    import random

    from agent_cache.differences import analyze
    from agent_cache.verifier import counterfactuals, perturb

    questions = [
        "Is Rome bigger than Madrid?",
        "How do I sort a list in ascending order?",
        "What is the weather in Paris today?",
        "Can I pay with a credit card?",
        "How much is 5 kg in pounds?",
        "Why is the sky blue over Denver?",
    ]
    rng = random.Random(0)
    made = [perturb(q, rng, ["Boston", "Lyon"]) for q in questions]
    assert all(m is not None for m in made)
    refused = [analyze(m[0], q).refused for m, q in zip(made, questions, strict=True) if m]
    assert sum(refused) >= 5  # the trainer's negatives are the analysis' own kinds
    rows = counterfactuals(questions * 10, 40, seed=1)
    assert len(rows) == 40 and {r[2] for r in rows} <= {0.0, 1.0}
    assert any(r[2] == 1.0 for r in rows)  # typo'd positives
    assert all(r[0] != r[1] for r in rows)


def test_mined_neighbours_are_labeled_by_clusters() -> None:
    from agent_cache.testing import HashEmbedder
    from agent_cache.verifier import mine_neighbours

    pairs = [
        Pair("how do I reset my password", "how can I reset my password", 1),
        Pair("how do I reset my router", "how do I reset my password please", 0),
        Pair("what is the capital of france", "which city is the capital of france", 1),
    ]
    rows = mine_neighbours(pairs, HashEmbedder(), top_k=2)
    assert rows
    labeled = {(a, b): y for a, b, y in rows}
    assert labeled.get(("how can I reset my password", "how do I reset my password")) == 1.0
    assert labeled.get(("how do I reset my password please", "how do I reset my router")) == 0.0


def test_fit_combiner_picks_a_cut_from_the_bound_and_says_when_it_is_useless() -> None:
    import random

    from agent_cache.calibrate import ScoredCandidate, ScoredQuery
    from agent_cache.verifier import fit_combiner

    rng = random.Random(0)
    queries = []
    for i in range(600):
        good = i % 2 == 0
        sim = rng.uniform(0.75, 0.95)
        v = rng.uniform(0.7, 0.99) if good else rng.uniform(0.01, 0.4)
        c = ScoredCandidate(
            f"s{i}",
            sim,
            "correct" if good else "wrong",
            verifier=v,
            features={"similarity": sim, "verifier_logit": math.log(v / (1 - v))},
        )
        queries.append(ScoredQuery(f"q{i}", int(good), "default", [c]))
    comb = fit_combiner(queries, target_precision=0.9)
    assert comb.weights["verifier_logit"] > 0 and comb.precision_bound is not None
    assert comb.precision_bound >= 0.9 and comb.measured["recommended"] is True
    for q in queries:  # a verifier that knows nothing: no cut is promised
        q.candidates[0].features["verifier_logit"] = 0.0
        q.candidates[0].verifier = 0.5
    useless = fit_combiner(queries, target_precision=0.9)
    assert useless.measured["recommended"] is False and "why" in useless.measured


def test_a_trained_verifier_directory_brings_its_combiner(tmp_path: Path) -> None:
    from agent_cache.rerankers import CrossEncoderReranker
    from agent_cache.semantic import Combiner

    Combiner({"bias": -5.0, "similarity": 6.0, "verifier_logit": 1.0}, 0.7, 0.6).save(tmp_path)
    reranker = CrossEncoderReranker(str(tmp_path))  # nothing is loaded yet
    assert reranker.combiner is not None and reranker.combiner.cut == 0.7
    assert CrossEncoderReranker("some/hub-model").combiner is None
