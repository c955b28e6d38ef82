"""Time units as users write them (issue 18, abbreviations and traps); pairs written for
this test:

* "How many vacation days do I get per yr?" / "... per year?" (0.898) was refused as a
  time ("yearly" against nothing): "yr", "wk", "hr", "mo" were read as units after a
  number ("4 hrs") but not in a rate ("per yr") or after "next" / "last".
* "How many days of PTO do I get?" / "How many hours of PTO do I get?" was served: both
  "how many" phrases stood in one synonym group with "how long", so any unit matched any
  other. Each unit is now "how long" in its own way, never another unit.
* "How long should I boil an egg?" / "How many minutes should I boil an egg?" was refused
  as advice against a recommended amount: "how long" is one word to the frames, and the
  "long" after it was not read as the measure asked."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How many vacation days do I get per yr?", "How many vacation days do I get per year?"),
        ("How much does the plan cost per mo?", "How much does the plan cost per month?"),
        ("How many hours a wk can an intern work?", "How many hours a week can an intern work?"),
        ("How many calories should I burn per hr?", "How many calories should I burn per hour?"),
        ("How many hrs of PTO do I get per yr?", "How many hours of PTO do I get per year?"),
        ("What was our revenue last mo?", "What was our revenue last month?"),
    ],
)
def test_a_short_time_unit_is_the_unit(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        analysis = analyze(x, y)
        assert analysis.equivalent, analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How many hrs of PTO do I get per yr?", "How many hours of PTO do I get per month?"),
        ("How much does the plan cost per mo?", "How much does the plan cost per year?"),
        ("How many hours a wk can an intern work?", "How many hours a day can an intern work?"),
        ("What was our revenue last mo?", "What was our revenue last year?"),
    ],
)
def test_another_time_unit_still_refuses(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        assert analyze(x, y).refuses, (x, y)


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How many days of PTO do I get?", "How many hours of PTO do I get?"),
        ("How many hrs of PTO do I get?", "How many days of PTO do I get?"),
        (
            "How many weeks of maternity leave do I get?",
            "How many months of maternity leave do I get?",
        ),
        ("How many minutes should I boil an egg?", "How many seconds should I boil an egg?"),
    ],
)
def test_how_many_of_one_unit_is_not_another(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        assert analyze(x, y).refuses, (x, y)


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How many days does shipping take?", "How long does shipping take?"),
        ("How much time does shipping take?", "How many days does shipping take?"),
        ("How many yrs do I keep tax records?", "How many years do I keep tax records?"),
    ],
)
def test_how_many_units_is_how_long(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        assert not analyze(x, y).refuses, analyze(x, y)


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How long should I boil an egg?", "How many minutes should I boil an egg?"),
        ("How long should a toddler nap?", "How many hours should a toddler nap?"),
        ("How long should I keep tax records?", "How many years should I keep tax records?"),
    ],
)
def test_how_long_should_asks_the_recommended_time(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        analysis = analyze(x, y)
        assert not any(d.kind == "modality" for d in analysis.differences), analysis


def test_whether_to_wait_is_not_how_long_to_wait() -> None:
    analysis = analyze(
        "How long should I wait to swim after eating?", "Should I wait to swim after eating?"
    )
    assert analysis.refuses, analysis
