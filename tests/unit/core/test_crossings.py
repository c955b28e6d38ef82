"""Words that crossed (issue 18, item 1): the same words in another order refuse unless a
moved clause, a detachable phrase, a passive voice or a symmetric connector explains it.

Before the crossing check, a fresh suite (written without our code) had 12 of 196 traps
served, 7 of them words that traded places: roles ("my wife's plan"), arguments
("from the annual plan to the monthly plan", "87 octane ... requires 91").
"""

from __future__ import annotations

import pytest

from agent_cache import _moves
from agent_cache.differences import analyze

TRADED = [  # different questions: the words traded places
    (
        "Can I move my savings from the fixed rate to the variable rate?",
        "Can I move my savings from the variable rate to the fixed rate?",
    ),
    (
        "Is it safe to run 5W-30 in an engine that calls for 10W-40?",
        "Is it safe to run 10W-40 in an engine that calls for 5W-30?",
    ),
    ("Am I listed on my husband's lease?", "Is my husband listed on my lease?"),
    ("Can my tenant sublet to my cousin?", "Can my cousin sublet to my tenant?"),
    ("How do I let my manager edit my calendar?", "How do I edit my manager's calendar?"),
    (
        "Can I refund a ticket that someone booked for me?",
        "Can someone refund a ticket that I booked for them?",
    ),
    ("Can I be fined by my landlord?", "Can I fine my landlord?"),
    (
        "If I live in Ohio, can I register a car in Texas?",
        "If I live in Texas, can I register a car in Ohio?",
    ),
    ("Can I wash it after I dry it?", "Can I dry it after I wash it?"),
]

MOVED = [  # one question: a clause or a detachable phrase moved, or the voice changed
    (
        "Can I claim the expense on my return if I work from home?",
        "If I work from home, can I claim the expense on my return?",
    ),
    (
        "Using the command line, how do I list open ports?",
        "How do I list open ports using the command line?",
    ),
    ("How do I, on a Mac, force quit an app?", "How do I force quit an app on a Mac?"),
    ("Before my exam, should I review the slides?", "Should I review the slides before my exam?"),
    ("Why was my message flagged by the filter?", "Why did the filter flag my message?"),
    ("Can the invoice be paid by card?", "Can I pay the invoice by card?"),
    ("Is Tokyo or Osaka warmer in April?", "Is Osaka or Tokyo warmer in April?"),
    ("What is the population of Peru?", "What's Peru's population?"),
    ("How can I quickly reset my router?", "How do I reset my router quickly?"),
    ("Where do I change my account email?", "Where do I change the email for my account?"),
]


@pytest.mark.parametrize(("query", "stored"), TRADED)
def test_words_that_traded_places_refuse(query: str, stored: str) -> None:
    analysis = analyze(query, stored)
    assert analysis.refuses and analysis.reason == "order", analysis
    assert analyze(stored, query).reason == "order"  # either way round


@pytest.mark.parametrize(("query", "stored"), MOVED)
def test_a_moved_clause_or_phrase_is_no_crossing(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not any(d.kind == "order" for d in analysis.differences), analysis


def test_a_phrase_that_moved_needs_an_opener_and_a_boundary() -> None:
    def side(words: str, marks: set[int], opens: set[str]) -> _moves.Side:
        keys = words.split()
        n = len(keys)
        return _moves.Side(
            keys,
            [i in marks for i in range(n)],
            [k in opens for k in keys],
            [False] * n,
            ["main"] * n,
            [0] * n,
        )

    q = side("if live ohio can register car texas", {0, 3}, {"if"})
    c = side("if live texas can register car ohio", {0, 3}, {"if"})
    assert _moves.detached(q, c) == set()  # a noun before a comma is no phrase
    q = side("in eu am entitled if late", {0, 2}, {"in", "if"})
    c = side("am entitled if late in eu", {0}, {"in", "if"})
    assert _moves.detached(q, c) == {"in", "eu"}


def test_clause_labels() -> None:
    labels, numbers = _moves.clauses([True, False, True, False], [None, None, None, None])
    assert labels == ["fronted", "fronted", "main", "main"] and numbers == [0, 0, 1, 1]
    labels, _ = _moves.clauses([True, False, False, False], ["if", None, None, "when"])
    assert labels == ["if", "if", "if", "when"]
