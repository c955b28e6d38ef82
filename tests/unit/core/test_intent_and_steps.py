"""What the asker means to do, and the steps to it (issue 18, question form): "I'd like
to cancel my order" / "How do I cancel my order?" (0.910), "trying to reset my password"
(0.910), "Can you help me change my email address?" (0.865), "Looking to upgrade my
plan" (0.814) missed while "I want to cancel my order" hit on its cosine alone (0.956);
"What steps should I follow to reset my password?" was refused as a modality (advice)
and "What action should I take to cancel my order?" left "take" as a detail. "Can you
explain how to reset my password?" (0.919), "What's the best way to reset my
password?" (0.917), "Is there a way I can reset my password?" (0.899) missed likewise.

A statement of intent ("I'd like to", "I'm trying to", "looking to", "help me") and the
steps to a goal ("What steps should I take to ...?") ask the way of the act that
"How do I ...?" asks, when the two acts are one word; so does a request to be told the
way ("Can you explain how to ...", "What's the best way to ...", "Is there a way I can
..."). The word of intent, the request and the frame's "steps ... take" say nothing more;
a way with a word of its own ("the *cheapest* way") is left to the cosine.

Found on the way: "someone else's password" against "my password" was no difference
(no content word differs), so "Can you explain how to reset someone else's password?"
would have been served the answer to "How do I reset my password?". "Someone else"
(anybody else, ...) on one side only is now a change of audience.

Pairs written for this test, none from a suite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("I'd like to cancel my order", "How do I cancel my order?"),
    ("trying to reset my password", "How do I reset my password?"),
    ("I'm trying to reset my password", "How can I reset my password?"),
    ("Can you help me change my email address?", "How do I change my email address?"),
    ("Looking to upgrade my plan", "How do I upgrade my plan?"),
    ("What steps should I follow to reset my password?", "How do I reset my password?"),
    ("What steps do I need to take to cancel my order?", "How do I cancel my order?"),
    ("What action should I take to cancel my order?", "How do I cancel my order?"),
    ("Can you explain how to reset my password?", "How do I reset my password?"),
    ("Could someone show me how to export my data to Excel?", "How do I export my data to Excel?"),
    ("What's the best way to reset my password?", "How do I reset my password?"),
    ("What's the best way to store insulin?", "How should I store insulin?"),
    ("Is there a way I can see who viewed my profile?", "How do I see who viewed my profile?"),
    # two frames without "how": the steps to a goal and whether there is a way to it
    ("What do I need to do to cancel my order?", "Is there a way to cancel my order?"),
    ("What steps do I take to cancel my order?", "Is there a way to cancel my order?"),
]
DIFFERENT = [
    ("I'd like to cancel my order", "How do I track my order?"),
    ("I don't want to cancel my order", "How do I cancel my order?"),
    ("I'd like to cancel my order by Friday", "How do I cancel my order?"),
    ("I want to cancel my friend's order", "How do I cancel my order?"),
    ("I need to cancel my order and get a refund", "How do I cancel my order?"),
    ("I'd like to know why my order was cancelled", "How do I cancel my order?"),
    ("Can you help me cancel my order?", "How do I cancel my subscription?"),
    ("I'm trying to cancel my order", "Why can't I cancel my order?"),
    ("What steps should I take to cancel my order?", "How do I track my order?"),
    ("What action should the bank take to cancel my order?", "How do I cancel my order?"),
    ("Can you explain why I can't reset my password?", "How do I reset my password?"),
    ("Can you explain how to reset someone else's password?", "How do I reset my password?"),
    ("How do I reset somebody else's password?", "How do I reset my password?"),
    ("Can anyone else see my files?", "Can anyone see my files?"),
    ("Is there a way to avoid resetting my password?", "How do I reset my password?"),
    ("What's the fastest way to get to the airport?", "How do I get to the airport?"),
    ("What is the cheapest way to ship a package?", "How do I ship a package?"),
    ("Do you know how long it takes to reset my password?", "How do I reset my password?"),
    ("Is there a way to reset my password?", "How do I change my password?"),
    ("What steps do I take to cancel my order?", "Is there a way to track my order?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_intent_and_steps_ask_the_way(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.reworded and not analysis.refuses, analysis


def test_steps_after_the_act_are_no_rewording() -> None:
    analysis = analyze(
        "What steps should I take after I cancel my order?", "How do I cancel my order?"
    )
    assert not analysis.reworded


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How do I reset somebody else's password?", "How do I reset my password?"),
        ("Can anyone else see my files?", "Can anyone see my files?"),
    ],
)
def test_someone_else_is_another_audience(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).reason == "audience", (a, b)


def test_they_hit_and_the_others_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT)
