"""Whether a place has a thing, in two frames (issue 18, reorder and question form);
pairs written for this test:

* "Does the hotel have parking?" / "Is there parking at the hotel?" (0.950) was refused
  as a word-order change: the owner comes first in one frame and last in the other;
* "Does the gym have a pool?" was *served* the answer to "Is there a gym at the pool?"
  (the words in one order, their roles swapped).

The owner and the thing are read in each frame ("does X have / offer / provide Y", "is
there Y at / in / on X", "is Y available at X") and compared by role; "near" is no
possession."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("Does the hotel have parking?", "Is there parking at the hotel?"),
    ("Does the gym have a pool?", "Is there a pool at the gym?"),
    ("Does the airport have free wifi?", "Is there free wifi at the airport?"),
    ("Does your hotel offer airport shuttles?", "Is there an airport shuttle at your hotel?"),
    ("Does the library have study rooms?", "Are there study rooms in the library?"),
    ("Does the office have a printer?", "Is a printer available in the office?"),
    ("Does this laptop have a webcam?", "Is there a webcam on this laptop?"),
    ("Quick question - does the hotel have parking?", "Is there parking at the hotel?"),
]
SWAPPED = [
    ("Does the gym have a pool?", "Is there a gym at the pool?"),
    ("Does the car have a spare tire?", "Is there a car in the spare tire?"),
    ("Does the office have a printer?", "Is the office available in the printer?"),
]
ELSEWHERE = [
    ("Does the hotel have parking?", "Is there parking near the hotel?"),
    ("Does the museum have a cafe?", "Is there a cafe near the museum?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_owner_and_the_thing_in_two_frames(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), SWAPPED + ELSEWHERE)
def test_swapped_roles_or_another_place_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses, (a, b)


def test_possession_hits_and_swapped_roles_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, SWAPPED + ELSEWHERE)
