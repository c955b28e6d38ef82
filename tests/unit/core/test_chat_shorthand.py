"""Shorthand as users type it (issue 18, abbreviations and contractions); pairs written
for this test:

* chat shorthand in lower case: "can u help me reset my password", "is ur store open on
  sundays" (0.978, refused: "ur" an unexplained qualifier), "refund b4 the item ships"
  (0.899, refused as a name), "open tmrw" (refused as a missing "tomorrow");
* "n't" typed without its apostrophe: "why dont my notifications work?" (0.993) and "my
  card doesnt work at the atm" (0.991) were refused as a dropped negation ("doesnt" was
  respelled "doesn" toward the stored question, "atm" respelled "tam");
* an acronym typed in lower case: "eta", "pto", "wfh", "atm" against the words they
  stand for (0.61-0.73, below the threshold or refused);
* a weekday or month written short without its full stop: "open on Sat" / "on
  Saturday" (0.722), "the deadline in Jan" / "in January" (0.944) refused as names.

Each is read as the word it stands for; any other difference is judged as before."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache._respell import respelled
from agent_cache.differences import analyze

SAME = [
    ("can u help me reset my password", "Can you help me reset my password?"),
    ("is ur store open on sundays", "Is your store open on Sundays?"),
    ("can i get a refund b4 the item ships", "Can I get a refund before the item ships?"),
    ("what time does the store open tmrw", "What time does the store open tomorrow?"),
    ("how do i cancel my order pls", "How do I cancel my order, please?"),
    ("why dont my notifications work?", "Why don't my notifications work?"),
    ("my card doesnt work at the atm", "My card doesn't work at the ATM"),
    ("isnt the office closed on monday?", "Isn't the office closed on Monday?"),
    ("what's the eta on my package", "What's the estimated time of arrival on my package?"),
    ("how many days of pto do new hires get", "How many days of paid time off do new hires get?"),
    ("can i wfh on fridays", "Can I work from home on Fridays?"),
    ("where is the nearest atm", "Where is the nearest automated teller machine?"),
    ("Is the store open on Sat?", "Is the store open on Saturday?"),
    ("When is the deadline in Jan?", "When is the deadline in January?"),
    ("Is the clinic open on Tues?", "Is the clinic open on Tuesday?"),
]

DIFFERENT = [
    ("can i get a refund b4 the item ships", "Can I get a refund after the item ships?"),
    ("why dont my notifications work?", "Why do my notifications work?"),
    ("my card doesnt work at the atm", "My card does work at the ATM"),
    ("what time does the store open tmrw", "What time does the store open today?"),
    ("what's the eta on my package", "What's the estimated cost of my package?"),
    ("Is the store open on Sat?", "Is the store open on Sunday?"),
    ("When is the deadline in Jan?", "When is the deadline in June?"),
]


# another thing asked, judged by the similarity as any added detail is ("pto" read as
# "paid time off" against "paid sick leave", "wfh" against "work from the office")
MISSED = [
    ("can i wfh on fridays", "Can I work from the office on Fridays?"),
    ("how many days of pto do new hires get", "How many days of paid sick leave do new hires get?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_shorthand_reads_as_the_word(query: str, stored: str) -> None:
    analysis = analyze(query, stored)
    assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_shorthand_for_another_word_refuses(query: str, stored: str) -> None:
    assert analyze(query, stored).refuses


def test_capitalized_shorthand_stays_a_name() -> None:
    """ "Ur" (the city) and "U" are not chat shorthand when capitalized."""
    analysis = analyze("How old is Ur?", "How old are you?")
    assert analysis.refuses, analysis


def test_shorthand_and_acronyms_are_not_respelled_toward_the_stored_question() -> None:
    assert (
        respelled("my card doesnt work at the atm", near="My card doesn't work at the ATM") is None
    )
    fixed = respelled("how many days of pto do new hires get", near="paid time off")
    assert fixed is None


def test_shorthand_hits_and_another_question_misses(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT + MISSED)


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How do I file a W-2?", "How do I file a W2?"),
        ("Is GPT4 free to use?", "Is GPT-4 free to use?"),
        ("What are the COVID19 symptoms?", "What are the COVID-19 symptoms?"),
    ],
)
def test_a_name_with_a_digit_is_one_name_with_or_without_its_hyphen(
    query: str, stored: str
) -> None:
    """ "W-2" / "W2" (0.92) was refused as two names."""
    analysis = analyze(query, stored)
    assert not analysis.refuses, analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [("How do I file a W-2?", "How do I file a W4?"), ("Is GPT4 free?", "Is GPT-3 free?")],
)
def test_another_name_with_a_digit_refuses(query: str, stored: str) -> None:
    assert analyze(query, stored).refuses
