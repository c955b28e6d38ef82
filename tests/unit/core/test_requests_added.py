"""A second request one side adds (found on reading the "detail" rule): "How do I cancel
my subscription? Also, how do I delete my account?" was served the answer to "How do I
cancel my subscription?" (0.943, "detail (allowed)"), which leaves half the request
unanswered. A clause that asks about something new is a ``request`` difference; an
elaboration of the same subject, a request for help made to the reader, or a question
with nothing new to ask about is not. Pairs written for this test."""

from __future__ import annotations

import pytest

from agent_cache.differences import REASONS, analyze

BASE = "How do I cancel my subscription?"
ADDED = [
    "How do I cancel my subscription? Also, how do I delete my account?",
    "How do I cancel my subscription and get a refund?",
    "How do I cancel my subscription and delete my account?",
    "How do I cancel my subscription? And can I get a refund?",
    "What are the fees? How do I cancel my subscription?",
]
NOT_A_REQUEST = [
    "How do I cancel my subscription? Thanks in advance!",
    "How do I cancel my subscription? Can anyone advise?",
    "How do I cancel my subscription? Would appreciate any pointers.",
    "Could you assist? How do I cancel my subscription?",
    "How do I cancel my subscription? What do you think?",
    "How do I cancel my subscription? Where do I start?",
    "How do I cancel my subscription? What should I do?",
]


def test_request_is_a_reason() -> None:
    assert "request" in REASONS


@pytest.mark.parametrize("longer", ADDED)
def test_an_added_request_refuses_on_either_side(longer: str) -> None:
    for a, b in ((longer, BASE), (BASE, longer)):
        analysis = analyze(a, b)
        assert analysis.reason == "request", analysis


@pytest.mark.parametrize("longer", NOT_A_REQUEST)
def test_a_request_for_help_or_with_nothing_new_is_not(longer: str) -> None:
    analysis = analyze(longer, BASE)
    assert "request" not in {d.kind for d in analysis.differences}, analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("What is a web app and how does it work?", "What is a web app?"),  # "it": the same
        ("What are the pros and cons of remote work?", "What are the cons of remote work?"),
        ("Why did the U.S. attack Iraq?", "Why did the US attack Iraq?"),  # not two sentences
    ],
)
def test_an_elaboration_a_noun_pair_or_an_abbreviation_is_not_a_request(
    query: str, stored: str
) -> None:
    analysis = analyze(query, stored)
    assert "request" not in {d.kind for d in analysis.differences}, analysis


def test_the_difference_names_the_added_clause() -> None:
    analysis = analyze("How do I cancel my subscription and get a refund?", BASE)
    added = next(d for d in analysis.refusals if d.kind == "request")
    assert added.query == "and get a refund" and added.candidate == ""
