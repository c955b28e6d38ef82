"""What a fresh suite (written without our code) found served after the crossing check
(issue 18, item 1): a qualifier one side adds to a shared noun, a question of manner
against one of time, a negation that moved to another verb. Each is a mechanism, tested
here on sentences of our own, with the paraphrases that must stay served."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

REFUSED = [
    # a modifier narrows the shared noun
    (
        "How long do I roast skinless chicken breasts?",
        "How long do I roast chicken breasts?",
        "qualifier",
    ),
    ("Can a landlord refuse a guide dog?", "Can a landlord refuse a dog?", "qualifier"),
    ("How do I empty an encrypted EBS volume?", "How do I empty an EBS volume?", "qualifier"),
    (
        "Can I claim a leased car as a business expense?",
        "Can I claim a car as a business expense?",
        "qualifier",
    ),
    # a prepositional phrase added inside the question
    ("How do I open a bank account for a minor?", "How do I open a bank account?", "qualifier"),
    # manner against time, reason or person
    (
        "How do I hear back about my application?",
        "When do I hear back about my application?",
        "question",
    ),
    ("How can we appeal the decision?", "Why can we appeal the decision?", "question"),
    # a negation that moved to another verb
    (
        "the fan spins but the light doesn't turn on",
        "the fan doesn't spin but the light turns on",
        "negation",
    ),
]

SERVED = [  # the same question: no qualifier, no other question, no moved negation
    ("How do I quickly reset my router?", "How do I reset my router?"),
    ("How can I earn money with my blog?", "How can I make money with my blog?"),
    (
        "How do I view logs for a crashed pod? Thanks in advance",
        "How do I view logs for a crashed pod?",
    ),
    ("Can I get some money back if I cancel?", "Can I get money back if I cancel?"),
    ("How does salt make ice melt?", "Why does salt make ice melt?"),  # an explanation
]


def test_a_greeting_is_not_a_time() -> None:
    greeted = analyze(
        "Good evening! How do I add a card to my wallet?", "How do I add a card to my wallet?"
    )
    assert not greeted.refuses, greeted
    assert analyze("Is the gym open in the evening?", "Is the gym open in the morning?").refuses


@pytest.mark.parametrize(("query", "stored", "reason"), REFUSED)
def test_a_narrowed_or_changed_question_refuses(query: str, stored: str, reason: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.refuses and any(d.kind == reason for d in analysis.refusals), analysis


@pytest.mark.parametrize(("query", "stored"), SERVED)
def test_what_does_not_narrow_is_no_refusal(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not any(
            d.kind in ("qualifier", "question", "negation") for d in analysis.refusals
        ), analysis
