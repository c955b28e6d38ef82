""" "Is there a way to X?" asks what "How do I X?" asks (issue 18, question form: "Is
there a way to change the email on my account?" / "How do I change the email on my
account?" at 0.910 was a miss, nothing explaining the lower cosine). Reworded, served
from the reworded floor; "Is it possible to X?" may ask whether X can happen at all,
and another question word still refuses. Pairs written for this test."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

SAME = [
    (
        "Is there a way to change the email on my account?",
        "How do I change the email on my account?",
    ),
    ("is there a way to recover deleted photos", "How can I recover deleted photos?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_is_there_a_way_asks_how(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses and analysis.reworded, analysis


def test_is_it_possible_is_not_this_frame() -> None:
    analysis = analyze(
        "Is it possible to get pregnant on my period?", "How do I get pregnant on my period?"
    )
    assert not analysis.reworded


def test_another_question_word_still_refuses() -> None:
    assert analyze("Is there a way to cancel my order?", "When can I cancel my order?").refuses
