"""Written shorthands and acronyms that leave out small words (issue 18: abbreviation
pairs refused as a negation, "w/o" against "without", or left a word over, "PSI"
matched to "per square inch" without "pounds"; "my Rx" read as a name). Pairs written
for this test."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

SAME = [
    (
        "Can my landlord keep my deposit w/o an itemized list?",
        "Can my landlord keep my deposit without an itemized list?",
    ),
    ("Can I come w/ my dog?", "Can I come with my dog?"),
    ("Is the flight late b/c of the weather?", "Is the flight late because of the weather?"),
    ("how do i port my # to another carrier", "how do i port my number to another carrier"),
    (
        "What's the recommended tire PSI for my car?",
        "What's the recommended tire pounds per square inch for my car?",
    ),
    # a short word its writer closed with a full stop (issue 18: refused as a name)
    (
        "How far is it to Main St. from the station?",
        "How far is it to Main Street from the station?",
    ),
    ("When is Dr. Smith available?", "When is Doctor Smith available?"),
    ("Is the Mt. Rainier trail open in winter?", "Is the Mount Rainier trail open in winter?"),
    # the clinical "-x" shorthands (issue 18: "my Rx" was read as a name)
    ("Can I refill my Rx online?", "Can I refill my prescription online?"),
    ("What was my Dx at the last visit?", "What was my diagnosis at the last visit?"),
    ("Is there a Tx for seasonal allergies?", "Is there a treatment for seasonal allergies?"),
]
DIFFERENT = [
    ("Is C# faster than Java?", "Is C faster than Java?"),  # a name, not "number"
    ("When is Dr. Smith available?", "When is Drake Smith available?"),  # not a contraction
    ("How far is it to Main St. from here?", "How far is it to Main Avenue from here?"),
    (
        "Can my landlord keep my deposit w/o an itemized list?",
        "Can my landlord keep my deposit with an itemized list?",
    ),
    ("Does the RX 580 support ray tracing?", "Does the prescription 580 support ray tracing?"),
    ("What was my Dx at the last visit?", "What was my Rx at the last visit?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_a_shorthand_reads_as_its_words(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.equivalent and not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_what_a_shorthand_is_not_stays_a_difference(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses
