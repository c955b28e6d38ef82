""" "please" as the verb (issue 18, a wrong hit left open last round): "Is the teacher
hard to please?" was served "Is it hard for the teacher to please?"'s answer at 0.965.
"please" was only ever read as courtesy and left out, so the rule that refuses a doer
said first ("Is the boss hard to reach?" / "Is it hard for the boss to reach?") saw no
verb. After "to", and before no verb, "please" is the verb; before a verb ("to please
cancel my order") it is still courtesy, read past.

Pairs written for this test, none from a suite."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Is the teacher hard to please?", "Is it hard for the teacher to please?"),
        ("Is my cat easy to please?", "Is it easy for my cat to please?"),
    ],
)
def test_the_doer_said_first_refuses_with_please_as_the_verb(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.refuses and analysis.reason == "order", analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Is it possible to please cancel my order?", "Is it possible to cancel my order?"),
        ("How do I reset my password, please?", "How do I reset my password?"),
    ],
)
def test_please_before_a_verb_or_aside_is_still_courtesy(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.equivalent and not analysis.refuses, analysis
