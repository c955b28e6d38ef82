"""The way of an act asked in the passive (issue 18, question form): "How do I renew my
passport?" / "How can a passport be renewed?" (0.879), "How do you cook rice?" / "How is
rice cooked?" (0.911), "How do I reset my router?" / "How is a router reset?" (0.824)
missed: nothing refused, but the passive's "can ... be" and the moved object left the
pair neither equivalent nor reworded, judged by the cosine against the threshold.

A "how" question asked by its doer ("I", "you", "we", "one") and the same act in the
passive with no doer named ask the same way, and read as reworded. A passive that names
who does it ("by the seller") or whom it is done to ("to me"), another question word, or
an active verb with the object as its subject ("How can a router reset?") is no such
rewording.

Pairs written for this test, none from a suite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("How do I reset my router?", "How can a router be reset?"),
    ("How do I reset my router?", "How is a router reset?"),
    ("How do I calculate my tax refund?", "How is a tax refund calculated?"),
    ("How do I renew my passport?", "How can a passport be renewed?"),
    ("How do I cancel an order?", "How can an order be cancelled?"),
    ("How do I remove a virus from my laptop?", "How can a virus be removed from a laptop?"),
    ("How do you cook rice?", "How is rice cooked?"),
]
DIFFERENT = [
    ("How do I reset my router?", "How can a router be hacked?"),
    ("How do I cancel an order?", "How can an order be cancelled by the seller?"),
    ("How do I calculate my tax refund?", "How is a tax refund taxed?"),
    ("How do I report a scam?", "How is a scam reported to me?"),
    ("Who can reset my router?", "How can a router be reset?"),
]
# not the way of an act: left to the cosine (this one is served at 0.934, as before)
OTHER_QUESTION = [("When do I pay my rent?", "When is my rent paid?")]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_passive_asks_the_same_way(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.reworded and not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT + OTHER_QUESTION)
def test_a_passive_that_says_more_is_no_rewording(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert not analyze(a, b).reworded, (a, b)


def test_an_active_verb_on_the_object_still_refuses() -> None:
    assert analyze("How do I reset my router?", "How can a router reset?").refuses


def test_they_hit_and_the_others_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT)
