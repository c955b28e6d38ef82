"""Nominalized questions that ask what the verbal one asks, and the near-misses they
must not let through (issue 18: nominalizations refused). Found by pairs written this
session; each failed before:

- "per day" is "daily": "How much can I withdraw from an ATM *per day*?" was refused as a
  time the other side lacks against "... the *daily* ATM withdrawal limit";
- a compound whose head is also a verb is that verb and its object: "How do I transfer
  my prescription?" / "the prescription transfer" was refused as words in another
  order; "does a girl *finger herself*" stays a verb (an object follows);
- "How often *should* I water a cactus?" asks the recommended frequency, as "the
  watering frequency for a cactus" does (refused as a missing advice modal), but not
  "How often do you ..." (a habit) nor "How often must I ..." (an obligation);
- "When should I ...?" against "What steps do I take to ...?" asks a time, not a way
  (served once the recommendation matched; now refused as another question).

Pairs written for this test."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

SAME = [
    ("How many calories should I eat a day?", "How many calories should I eat daily?"),
    ("How many emails can I send per hour?", "How many emails can I send hourly?"),
    ("Do I need to back up the server every week?", "Do I need to back up the server weekly?"),
    (
        "How do I transfer my prescription to another pharmacy?",
        "What's the process for a prescription transfer to another pharmacy?",
    ),
    ("How do I reset my password?", "What are the steps for a password reset?"),
    ("How often should I water a cactus?", "What is the watering frequency for a cactus?"),
]
DIFFERENT = [
    ("How many calories should I eat a day?", "How many calories should I eat a week?"),
    ("Can I finish the course in a day?", "Can I finish the course daily?"),
    ("Can I leave cooked rice out for half an hour?", "Can I leave cooked rice out hourly?"),
    ("How do I report a dog bite?", "How do I report a bite dog?"),
    ("How often should I water a cactus?", "How often must I water a cactus?"),
    ("How often should you drink coffee?", "How often do you drink coffee?"),
    ("Should I wear a helmet?", "Do I wear a helmet?"),
    ("When should I renew my passport?", "What steps do I take to renew my passport?"),
    ("When can I renew my passport?", "What's the process for renewing my passport?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_nominal_and_the_verbal_question_are_one(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_near_misses_still_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses, analyze(a, b)


def test_a_verb_followed_by_its_object_is_no_compound() -> None:
    analysis = analyze("How does a girl finger herself?", "How do you finger a girl?")
    assert "order" in {d.kind for d in analysis.refusals}, analysis
