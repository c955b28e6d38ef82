"""Plain paraphrases hit (issue 18): synonyms, abbreviations, casing, fillers, reorders,
typos and question forms, with the real bundled MiniLM and the default config.

``tests/data/paraphrase_heldout.jsonl`` was written before the mechanisms were measured
on it (other words of the kinds the issue named, plus near-miss traps of the same
shapes); the issue's own pairs are checked separately. No pair here is in any lexicon.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent_cache import LayeredCache

pytestmark = pytest.mark.integration

HELD_OUT = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "data" / "paraphrase_heldout.jsonl")
    .read_text()
    .splitlines()
    if line.strip()
]
ISSUE = [  # what the issue reported refused
    ("What are the signs of diabetes?", "What are the symptoms of diabetes?"),
    ("What are the benefits of solar panels?", "What are the advantages of solar panels?"),
    ("How do I set a timeout in requests?", "How do I configure a timeout in requests?"),
    ("How do I terminate my contract?", "How do I cancel my contract?"),
    ("Why is my computer sluggish?", "Why is my computer slow?"),
    ("How do I renew my driving licence?", "How do I renew my driving license?"),
    ("How do I deploy to k8s?", "How do I deploy to Kubernetes?"),
    ("How do I back up the DB?", "How do I back up the database?"),
    ("How do I set an env var in Linux?", "How do I set an environment variable in Linux?"),
    ("How do I clone a repo?", "How do I clone a repository?"),
    ("HOW DO I RESET MY PASSWORD", "How do I reset my password?"),
    ("OK so how do I reset my password?", "How do I reset my password?"),
    ("Am I allowed to park here overnight?", "Am I allowed to park here at night?"),
]


def _decide(cache: LayeredCache, pairs: list[tuple[str, str]]) -> list[bool]:
    out = []
    for i, (query, stored) in enumerate(pairs):
        cache.store(stored, f"answer {i}", context=f"pair {i}")
        hit = cache.lookup(query, context=f"pair {i}")
        assert hit is None or hit.response == f"answer {i}"
        out.append(hit is not None)
    return out


def test_the_issues_paraphrases_hit(minilm: Any) -> None:
    with LayeredCache(path=None, embedder=minilm) as cache:
        hits = _decide(cache, ISSUE)
    missed = [q for (q, _), hit in zip(ISSUE, hits, strict=True) if not hit]
    assert not missed, missed


def test_held_out_paraphrases_hit_and_its_traps_are_refused(minilm: Any) -> None:
    with LayeredCache(path=None, embedder=minilm) as cache:
        hits = _decide(cache, [(r["query"], r["stored"]) for r in HELD_OUT])
        refused = cache.stats().refused
        explained = [cache.explain(r["query"], context=f"pair {i}") for i, r in enumerate(HELD_OUT)]
    served = [r for r, hit in zip(HELD_OUT, hits, strict=True) if hit and r["label"] == "refuse"]
    assert not served, served
    by_kind: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for r, hit in zip(HELD_OUT, hits, strict=True):
        if r["label"] == "serve":
            total[r["kind"]] += 1
            by_kind[r["kind"]] += hit
    rates = {k: by_kind[k] / total[k] for k in total}
    # measured at 9/16 synonyms and >= 90 % for every other kind; the bar leaves noise room
    assert rates["synonym"] >= 0.5, rates
    assert all(rate >= 0.85 for kind, rate in rates.items() if kind != "synonym"), rates
    assert sum(by_kind.values()) / sum(total.values()) >= 0.8, rates
    outcomes = [e.verdicts[0].outcome if e.verdicts else "none" for e in explained]
    # stats count every refused lookup, paraphrases included
    assert sum(refused.values()) == outcomes.count("refused"), refused
    # each trap is refused by the analysis, or its cosine leaves it below the threshold
    # (26 of 35 refused: 8 sit under 0.5, "What does a dentist earn?" / "... do?" leaves
    # one word, a detail)
    trap_outcomes = Counter(
        o for r, o in zip(HELD_OUT, outcomes, strict=True) if r["label"] == "refuse"
    )
    assert set(trap_outcomes) <= {"refused", "below_threshold"}, trap_outcomes
    assert trap_outcomes["refused"] >= 24, trap_outcomes
