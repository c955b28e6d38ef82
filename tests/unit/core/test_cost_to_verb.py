""" "The cost to replace a car battery" / "the car battery replacement cost" (issue 18,
nominalization; pairs written for this test): "What's the cost to replace a car
battery?" (0.949) was refused as a word-order change. A "to" before a verb links a cost,
a fee or a time to its act as "of" does; the order of the act's own words, and a
direction, still count."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

SAME = [
    ("What's the cost to replace a car battery?", "What's the car battery replacement cost?"),
    ("What's the fee to renew a fishing license?", "What's the fishing license renewal fee?"),
    (
        "How much does it cost to deliver a package overnight?",
        "What is the overnight package delivery cost?",
    ),
]
DIFFERENT = [
    ("What's the cost to ship a car to Hawaii?", "What's the cost to ship Hawaii to a car?"),
    (
        "How much does it cost to fly from Boston to Denver?",
        "How much does it cost to fly from Denver to Boston?",
    ),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_cost_to_do_it_is_its_cost(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_the_acts_own_words_still_keep_their_order(query: str, stored: str) -> None:
    assert analyze(query, stored).refuses
