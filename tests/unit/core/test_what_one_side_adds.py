"""What one side adds that the other does not ask (issue 18, qualifier, number, agent):
three shapes where the added words were an allowed detail and the pair was served on a
cosine of 0.93-0.98, though the longer question asks more:

* a phrase of three content words or more on one side only ("How do I share a folder
  with the finance team members?" / "How do I share a folder?"): a qualifier;
* an ordinal counting a noun on one side only ("How much is the second checked bag?" /
  "How much is the checked bag?", 0.921 and served): "first" / "second" after a
  determiner and before the noun are numbers, as "third" already was ("wait a second",
  "first, ..." are not);
* a clause's act done by the asker on one side and by someone named on the other ("Can
  I get a refund if I damaged it?" / "... if the courier damaged it?"): another
  audience. A doer anyone may be ("if a customer cancels") is left to the rest.

Pairs written for this test, none from a suite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

ADDED = [
    ("How do I share a folder with the finance team members?", "How do I share a folder?"),
    (
        "How can I update my billing email from the old company account?",
        "How can I update my billing email?",
    ),
]
COUNTED = [
    ("How much is the second checked bag?", "How much is the checked bag?"),
    (
        "How do I add a second admin to my team account?",
        "How do I add an admin to my team account?",
    ),
    ("What happens if I miss my first payment?", "What happens if I miss my payment?"),
]
DOER = [
    ("Can I get a refund if I damaged it?", "Can I get a refund if the courier damaged it?"),
    ("What happens if I cancel the order?", "What happens if the seller cancels the order?"),
    ("What if I lose the package?", "What if the carrier loses the package?"),
    ("What happens if my son cancels the order?", "What happens if I cancel the order?"),
]
SAME = [
    ("How much is the 2nd checked bag?", "How much is the second checked bag?"),
    ("What's the first step to file taxes?", "What is the first step to file taxes?"),
    ("What if we miss the deadline?", "What if I miss the deadline?"),
    ("If I cancel my order, what happens?", "What happens if I cancel my order?"),
]


@pytest.mark.parametrize(("query", "stored"), ADDED + COUNTED + DOER)
def test_what_one_side_adds_refuses(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses, (a, b)


@pytest.mark.parametrize(("query", "stored"), COUNTED)
def test_an_ordinal_that_counts_is_a_number(query: str, stored: str) -> None:
    assert analyze(query, stored).reason == "numbers"


@pytest.mark.parametrize(("query", "stored"), DOER)
def test_another_doer_is_another_audience(query: str, stored: str) -> None:
    assert analyze(query, stored).reason == "audience"


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_same_count_and_doer_do_not(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert not analyze(a, b).refuses, (a, b)


def test_wait_a_second_counts_nothing() -> None:
    analysis = analyze(
        "Can you wait a second, how do I reset my password?", "How do I reset my password?"
    )
    assert not any(d.kind == "numbers" for d in analysis.differences), analysis


def test_they_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME[:1], ADDED + COUNTED + DOER)
