"""What users put around and inside a question (issue 18, filler and abbreviations);
pairs written for this test, none from a suite:

* an apology for asking: "Sorry for the trouble, how do I cancel my order?" was refused
  as a qualifier ("trouble"), "Sorry to bother you - what's the process for returning
  an item?" kept "bother" over (a spaced dash was no phrase mark);
* "Where do I find my acct no.?" / "... my account number?" was refused as a negation
  ("no.");
* "What's the min age to open an acct?" / "What is the minimum age to open an
  account?" and "How do I open an acount?" / "... an account?" were refused: "open an
  account" was merged as one phrase on one side only.

An apology is one phrase that opens the text, with at most two content words, no
number, time, name or topic ("about X"), up to a question after a mark or "but"."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("Sorry for the trouble, how do I cancel my order?", "How do I cancel my order?"),
    (
        "Sorry to bother you - what's the process for returning an item?",
        "How do I return an item?",
    ),
    (
        "Sorry if this is a dumb question, but how do I unfreeze my card?",
        "How do I unfreeze my card?",
    ),
    (
        "Apologies if this is obvious, but how do I update my address?",
        "How do I update my address?",
    ),
    (
        "Forgive me if this was asked before, how do I reset the router?",
        "How do I reset the router?",
    ),
    ("Where do I find my acct no.?", "Where do I find my account number?"),
    ("What is my policy No. 12345 covering?", "What is my policy number 12345 covering?"),
    ("What's the min age to open an acct?", "What is the minimum age to open an account?"),
    ("How do I open an acount?", "How do I open an account?"),
]
# a second phrase after the apology says more: not read as an aside (these miss on
# their similarity, 0.78 and 0.84)
SAID_MORE = [
    ("Sorry, I'm abroad - how do I call customer service?", "How do I call customer service?"),
    ("Sorry, my card was stolen - how do I block it?", "How do I block my card?"),
]
DIFFERENT = [
    ("Sorry to ask again about the premium plan, but how do I cancel?", "How do I cancel?"),
    ("Sorry, I'm on Android, how do I reset my password?", "How do I reset my password?"),
    ("Sorry, 2 questions: how do I reset my password?", "How do I reset my password?"),
    ("Sorry to bother you, but how do I reset my password?", "How do I change my PIN?"),
    ("Apologies, but is the store open on Sunday?", "Is the store open on Saturday?"),
    ("Is the answer yes or no.?", "Is the answer yes or maybe?"),
    ("What's the min age to open an acct?", "What is the minimum age to close an account?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_asides_and_short_forms_say_nothing_more(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_what_the_aside_says_still_counts(query: str, stored: str) -> None:
    assert analyze(query, stored).refuses


def test_they_hit_and_the_others_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT + SAID_MORE)
