"""Small forms the analysis misread (issue 18): a clipping closed by consonants is an
abbreviation ("govt"), "one" said as an article is not another number, and "how many"
asks a number rather than quantifying. Each pair is ours, in both directions."""

from __future__ import annotations

import pytest

from agent_cache.differences import _abbreviates, analyze


@pytest.mark.parametrize(
    ("short", "long_"),
    [
        ("govt", "government"),
        ("dept", "department"),
        ("natl", "national"),
        ("intl", "international"),
    ],
)
def test_a_clipping_closed_by_consonants_abbreviates(short: str, long_: str) -> None:
    assert _abbreviates(short, long_)


@pytest.mark.parametrize(
    ("short", "long_"),
    [("mart", "market"), ("cart", "carrot"), ("govt", "gift"), ("dpt", "adept")],
)
def test_a_word_of_its_own_or_another_start_does_not(short: str, long_: str) -> None:
    assert not _abbreviates(short, long_)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("How do I contact the dept of revenue?", "How do I contact the department of revenue?"),
        ("How many calories are in one banana?", "How many calories are in a banana?"),
        ("How much does one gallon of paint cover?", "How much does a gallon of paint cover?"),
        ("Is 1 beer a day bad for you?", "Is a beer a day bad for you?"),
    ],
)
def test_the_same_question_is_not_refused(a: str, b: str) -> None:
    for q, c in ((a, b), (b, a)):
        analysis = analyze(q, c)
        assert not analysis.refuses, str(analysis)


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("Can I bring one bag on the plane?", "Can I bring two bags on the plane?", "numbers"),
        (
            "How many calories are in one banana?",
            "How many calories are in three bananas?",
            "numbers",
        ),
        ("Can I eat every banana?", "Can I eat one banana?", "scope"),
    ],
)
def test_other_counts_still_refuse(a: str, b: str, reason: str) -> None:
    for q, c in ((a, b), (b, a)):
        analysis = analyze(q, c)
        # "one banana" is also a count now (it counts its noun): the scope still refuses
        assert analysis.refuses and reason in {d.kind for d in analysis.refusals}
