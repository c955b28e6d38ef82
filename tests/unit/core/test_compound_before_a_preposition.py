"""A noun compound before a phrase of its own (issue 18, generated suite's misses):
"What is the photo upload process through the web portal?" / "How do I upload my
photos through the web portal?" was refused as an order change ("photo upload" /
"upload photos"): "through" is read as a content word, so the compound seemed to run on
into "through the web portal" (no noun at its end) and "upload" seemed to take
"through" as its object. A preposition opens a phrase of its own: it ends the compound
and is no verb's object.

The same pairs showed that "What is the password *reset* process ...?" was read as a
passive ("is ... reset"), and a passive explained every crossing: "What is the email
reset process through my phone?" was served "How do I reset my phone through email?"'s
answer. A participle that a noun follows modifies it ("the password reset *process*");
the compound it ends is a noun compound.

Found from the token shape of a generated-suite miss (content words masked); the pairs
here are written for this test, none from a suite."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "What is the photo upload process through the web portal?",
            "How do I upload my photos through the web portal?",
        ),
        (
            "What's the invoice upload process through QuickBooks Online?",
            "How can I upload my invoices through QuickBooks Online?",
        ),
        (
            "What is the data transfer process through the web portal?",
            "How do I transfer my data through the web portal?",
        ),
        (
            "What is the password reset process via the mobile app?",
            "How do I reset my password via the mobile app?",
        ),
    ],
)
def test_a_compound_before_a_preposition_is_the_verb_and_its_object(
    query: str, stored: str
) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.reworded and not analysis.refuses, analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "What is the email reset process through my phone?",
            "How do I reset my phone through email?",
        ),
        (
            "What is the password reset process through email?",
            "How do I reset my email through password?",
        ),
        (
            "What is the photo upload process through the web portal?",
            "How do I upload the web portal through my photos?",
        ),
    ],
)
def test_the_compound_and_the_phrase_swapped_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.refuses and analysis.reason == "order", analysis


def test_a_passive_with_its_agent_is_still_read() -> None:
    analysis = analyze(
        "Is the password reset email sent by the server?",
        "Does the server send the password reset email?",
    )
    assert analysis.reworded and not analysis.refuses, analysis
