"""A verb and its particle written as one word (issue 18, spelling): "How do I back up
my iPhone?" / "How do I backup my iPhone?" was refused as a substitution ("back" /
"backup"): a word written in pieces was one word only when hyphenated or a name in
capitals. A verb with its particle, joined into a dictionary word ("backup", "checkout",
"setup"), is that word; two words that are no verb and particle stay two ("paid over
time" is not "paid overtime").

Pairs written for this test, none from a suite."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How do I back up my iPhone?", "How do I backup my iPhone?"),
        ("Where do I pick up my order?", "Where do I pickup my order?"),
        ("How do I check out as a guest?", "How do I checkout as a guest?"),
    ],
)
def test_a_verb_and_particle_joined_is_one_word(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.equivalent and not analysis.refuses, analysis


def test_two_words_that_are_no_verb_and_particle_stay_two() -> None:
    assert analyze("Can I get paid over time?", "Can I get paid overtime?").refuses
