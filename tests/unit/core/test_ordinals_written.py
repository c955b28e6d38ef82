"""An ordinal in digits or in words (issue 18, abbreviations); pairs written for this
test, none from a suite:

* "Can I upgrade to 1st-class?" / "... first-class?", "Is the 2nd-floor office
  accessible?" / "... second-floor ...", "Do you allow 3rd-party sellers?" / "...
  third-party ..." (0.99 each) were refused: "3rd-party" stayed one unknown word;
* "What is the 1st step?" / "What is the first step?" (0.983) was refused as a number
  against none: "first" and "second" (also an adverb and a unit of time) are read as
  ordinals only where the other side writes that ordinal in digits."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("Do you allow 3rd-party sellers?", "Do you allow third-party sellers?"),
    ("Can I upgrade to 1st-class?", "Can I upgrade to first-class?"),
    ("Is the 2nd-floor office accessible?", "Is the second-floor office accessible?"),
    ("What is the 1st step?", "What is the first step?"),
    ("Is there a 2nd-hand market for phones?", "Is there a second-hand market for phones?"),
    ("Who pays for 1st-time buyer fees?", "Who pays for first-time buyer fees?"),
]
DIFFERENT = [
    ("How do I file a 3rd-party claim?", "How do I file a second-party claim?"),
    ("Can I upgrade to 1st-class?", "Can I upgrade to second-class?"),
    ("Is the 1st floor accessible?", "Is the second floor accessible?"),
    ("What is the 2nd step?", "What is the first step?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_one_ordinal_in_digits_or_words(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.equivalent, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_another_ordinal_differs(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses


def test_ordinals_hit_and_others_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT)
