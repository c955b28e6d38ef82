"""Numbers said another way are the same number (issue 18: the held-out generated
suite's synonym pairs were refused for "numbers" when one side wrote "6-year-old"):

- a number hyphenated to the words it counts reads as written apart ("a 6-year-old" /
  "a 6 year old", "2-factor" / "two-factor"), while "GPT-4" or "COVID-19" stay names;
- an amount in convertible units is one amount ("half an hour" / "30 minutes",
  "48 hours" / "2 days"), unless the question asks for the conversion itself;
- "one" counts the noun after it ("one entry" / "a single entry");
- a fraction is one number ("1/4 cup" / "a quarter cup", "1/2 tablet" / "half a tablet").

Pairs written for this test, not taken from a suite."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

SAME = [
    ("Can my 6-year-old ride in the front seat?", "Can my 6 year old ride in the front seat?"),
    ("Can my six-year-old ride in the front seat?", "Can my 6-year-old ride in the front seat?"),
    ("How do I set up 2-factor authentication?", "How do I set up two-factor authentication?"),
    (
        "Can I leave cooked rice out for half an hour?",
        "Can I leave cooked rice out for 30 minutes?",
    ),
    (
        "Is 90 minutes enough for a layover in Denver?",
        "Is 1.5 hours enough for a layover in Denver?",
    ),
    ("Can I store breast milk for 48 hours?", "Can I store breast milk for 2 days?"),
    ("Can I check a bag of 23 kg?", "Can I check a bag of 23000 g?"),
    ("Do I need a visa for a single entry?", "Do I need a visa for one entry?"),
    ("How many tablespoons are in a quarter cup?", "How many tablespoons are in 1/4 cup?"),
    ("Can I take 1/2 tablet of ibuprofen?", "Can I take half a tablet of ibuprofen?"),
]
DIFFERENT = [
    ("Can my 6-year-old ride in the front seat?", "Can my 8-year-old ride in the front seat?"),
    ("How do I set up 2-factor authentication?", "How do I set up 3-factor authentication?"),
    (
        "Can I leave cooked rice out for half an hour?",
        "Can I leave cooked rice out for 40 minutes?",
    ),
    ("Can I store breast milk for 48 hours?", "Can I store breast milk for 3 days?"),
    ("Is 5 minutes enough to boil an egg?", "Is 5 hours enough to boil an egg?"),
    ("Can I bring one suitcase?", "Can I bring two suitcases?"),
    ("Can I take 1/2 tablet of ibuprofen?", "Can I take 1/4 tablet of ibuprofen?"),
    ("Is the store open on 12/25?", "Is the store open on 12/26?"),  # a date, not 0.48
    # the conversion is the question: its amounts are not interchangeable
    ("How do I convert 2 cups to tablespoons?", "How do I convert 32 tbsp to tablespoons?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_one_amount_written_two_ways_is_not_a_difference(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_another_amount_is_refused(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.refuses and analysis.reason == "numbers", analysis


def test_names_with_numbers_stay_names() -> None:
    a = analyze("Is GPT-4 better than GPT-3?", "Is GPT-4 better than GPT-3.5?")
    assert a.refuses and a.reason == "entities"
    assert not analyze("Is COVID-19 airborne?", "Is COVID-19 airborne?").refuses
