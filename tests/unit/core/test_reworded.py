"""A question asked about its noun is the question asked with its verb (issue 18:
nominalizations were 2 of 16 hits in the domain suite): "How do I renew my lease?" /
"What is the lease renewal process?" is *reworded*, served from REWORDED_FLOOR, while
other rewordings of the frame stay at the threshold."""

from __future__ import annotations

import pytest

from agent_cache import semantic
from agent_cache.differences import analyze

NOMINALIZED = [
    ("How do I renew my passport?", "What is the passport renewal process?"),
    ("How do I activate my new card?", "What's the activation process for my new card?"),
    ("How is the late fee calculated?", "What is the calculation of the late fee?"),
    ("How do I register my bike?", "What's the registration procedure for my bike?"),
    # a verb in -y takes -ication: the stemmer splits apply / application
    ("How do I apply for a visa?", "What is the visa application process?"),
    ("How do I notify my landlord?", "What is the landlord notification process?"),
]
NOT_NOMINALIZED = [
    ("What is trolling?", "What is a troll?"),  # a derived word, no how/what frame
    ("How do I renew my passport?", "Why is passport renewal slow?"),
    ("Do you have a plan for your life?", "What is your plan for your life?"),
    ("How do I apply for a visa?", "What is the visa application deadline?"),  # more asked
]


@pytest.mark.parametrize(("query", "stored"), NOMINALIZED)
def test_a_verb_asked_as_its_noun_is_reworded(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.reworded and not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), NOT_NOMINALIZED)
def test_other_frames_are_not_reworded(query: str, stored: str) -> None:
    assert not analyze(query, stored).reworded


def test_a_reworded_candidate_is_served_from_its_floor() -> None:
    query, stored = NOMINALIZED[0]
    policy = semantic.SemanticPolicy(threshold=0.92, floor=semantic.EQUIVALENT_FLOOR)
    below = semantic.REWORDED_FLOOR - 0.01
    for similarity, outcome in ((0.85, "serve"), (below, "below_threshold")):
        cand = semantic.Candidate("id", "key", stored, similarity)
        (verdict,) = semantic.screen(query, [cand], policy, verifier=False)
        assert verdict.outcome == outcome
