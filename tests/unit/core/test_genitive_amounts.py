"""Two nominalized question forms (issue 18, nominalization); pairs written for this
test:

* "the *cost of* shipping to Canada" against "*shipping* to Canada ... *cost*": a head
  noun with its "of" phrase turned into a compound or a subject was refused as order;
  a phrase whose two people swap roles still refuses.
* "How *much* ibuprofen *should* an adult take?" / "How many hours of sleep should a
  teenager get?" ask a recommended amount, as "How much should I ...?" does, so an
  impersonal "recommended amount" matches them (was refused as advice against no
  modal); a personal unmarked question still refuses."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

SAME = [
    ("What is the cost of shipping to Canada?", "How much does shipping to Canada cost?"),
    ("Is the price of a flight to Paris lower in May?", "Is a flight to Paris price lower in May?"),
]

AMOUNTS = [
    (
        "What's the recommended amount of sleep for teenagers?",
        "How many hours of sleep should a teenager get?",
    ),
    (
        "What is the recommended dose of ibuprofen for adults?",
        "How much ibuprofen should an adult take?",
    ),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_nominalized_form_is_the_same_question(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), AMOUNTS)
def test_how_much_should_asks_a_recommended_amount(query: str, stored: str) -> None:
    """No modality against the impersonal side (the other words are the model check's)."""
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not any(d.kind == "modality" for d in analysis.differences), analysis


DIFFERENT = [
    (
        "Can my landlord keep the deposit of my roommate?",
        "Can my roommate keep the deposit of my landlord?",
    ),
    ("How many hours should I work?", "How many hours do I work?"),
    ("How much should I tip?", "How much did I tip?"),
]


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_other_questions_still_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses, (a, b)
