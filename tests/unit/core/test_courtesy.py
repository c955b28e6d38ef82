"""Courtesy around the question says nothing of it (issue 18, filler): "Hello, I hope
you're doing well. What GPA do I need to keep my scholarship?" / "What GPA do I need to
keep my scholarship?" (0.876), "Dear support, I hope this message finds you well. How do
I change my email address?" (0.774) missed: the good wishes hold content words
("hope", "doing", "message"), so they were neither a greeting that says nothing nor a
difference that refuses, and the cosine alone fell under the threshold. "Thanks so much
for your help earlier." was refused as a time ("earlier").

A phrase made only of courtesy words (greetings, good wishes, thanks, an apology for
asking, the announcing of a question: a closed class) and function words, before or
after the question, is read past. A phrase that says anything of the question (a
product, a day, a place, a name that is not the one greeted) is kept.

Pairs written for this test, none from a suite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    (
        "Hello, I hope you're doing well. What GPA do I need to keep my scholarship?",
        "What GPA do I need to keep my scholarship?",
    ),
    (
        "Hi there, hope you are having a great day! How do I reset my password?",
        "How do I reset my password?",
    ),
    (
        "Good morning! I hope all is well. How do I cancel my subscription?",
        "How do I cancel my subscription?",
    ),
    (
        "Thanks so much for your help earlier. How do I update my billing address?",
        "How do I update my billing address?",
    ),
    (
        "Dear support, I hope this message finds you well. How do I change my email address?",
        "How do I change my email address?",
    ),
    (
        "Hello team, hope your week is going well. Where can I download my invoices?",
        "Where can I download my invoices?",
    ),
    (
        "Thanks for getting back to me so quickly! One more question: do you ship to Mexico?",
        "Do you ship to Mexico?",
    ),
    (
        "Hi Sam, hope you had a nice weekend. Can I bring my dog to the office?",
        "Can I bring my dog to the office?",
    ),
    (
        "Hi, sorry to bother you again, I really appreciate all your help today! One more "
        "thing I was curious about: is renter's insurance required by law?",
        "Is renter's insurance required by law?",
    ),
    (
        "How do I cancel my subscription? Any help would be greatly appreciated.",
        "How do I cancel my subscription?",
    ),
]
# each says something the other side does not: a day, an amount, a place, a topic
DIFFERENT = [
    ("I hope my package arrives before Friday. Where is my package?", "Where is my package?"),
    ("I was charged twice this month. How do I get a refund?", "How do I get a refund?"),
    (
        "I am doing well in my classes. What GPA do I need to keep my scholarship?",
        "What GPA do I need to keep my scholarship?",
    ),
    ("I lost my phone yesterday. How do I reset my password?", "How do I reset my password?"),
    ("Thanks, but I already tried restarting. How do I fix the wifi?", "How do I fix the wifi?"),
    (
        "Hi, I'm moving to Texas. Is renter's insurance required by law?",
        "Is renter's insurance required by law?",
    ),
    ("I hope the refund includes shipping. How do I get a refund?", "How do I get a refund?"),
    ("Good morning! Is the store open?", "Is the store open in the evening?"),
    ("Hi, thanks for the refund. Can I cancel my order?", "Can I cancel my order?"),
    ("I hope it's not too late. Can I cancel my order?", "Can I cancel my order?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_courtesy_around_the_question_says_nothing(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.equivalent and not analysis.refuses, analysis


def test_courtesy_alone_is_kept() -> None:
    """With nothing else to read, the courtesy is the text: "Thanks!" is not "Hi!"."""
    assert not analyze("Thanks so much!", "Hi there!").equivalent


def test_they_hit_and_the_others_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT)
