"""A request to be told the question (issue 18). Users wrap a question in a request:
"Can you tell me ...", "Do you know ...", "I want to know ...", "Could someone explain
...". Applied to the 246 hitting pairs of our suites that open with a question word, the
wrapper kept only 189 of them, and it served one wrong answer: "I want to know how do I
find out if I got into the honors program?" was served "When do I find out ...?"'s
answer, because the question word after the request was never read as the question's.
The modal of the request was read as the question's too: "Can you tell me when my refund
will be processed?" / "When will my refund be processed?" was refused as a change of
modality ("can" against "will"), and "Can you tell me which ...?" as a yes/no question.
Embedded, "if I need a visa" asks what "Do I need a visa?" asks (what is required).

The embedded question after the request is now the question (as after "I don't know
..."); the request's words are only the one asked, a modal, the asker's wish and one verb
of telling or knowing. Kept: 235 of 246, and no trap newly served of 402.

The pairs here are written for this test, none from a suite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    (
        "Can you tell me when the library closes on Saturday?",
        "When does the library close on Saturday?",
    ),
    ("Do you know where I can renew my passport?", "Where can I renew my passport?"),
    ("I'd like to know how I can export my contacts", "How do I export my contacts?"),
    (
        "Could someone explain why my battery drains so fast?",
        "Why does my battery drain so fast?",
    ),
    (
        "Do you happen to know which terminal Delta flights leave from?",
        "Which terminal do Delta flights leave from?",
    ),
    ("I want to know who signs off on travel expenses", "Who signs off on travel expenses?"),
    ("Can you tell me when my tax refund will arrive?", "When will my tax refund arrive?"),
    (
        "Do you know if I need a permit to fish in this lake?",
        "Do I need a permit to fish in this lake?",
    ),
]

DIFFERENT = [
    (
        "Can you tell me how I find out my exam results?",
        "When do I find out my exam results?",
    ),
    ("Do you know why my card was declined?", "When was my card declined?"),
    ("Can you tell me when the refund will be processed?", "Can the refund be processed?"),
    ("Could you explain how a landlord can sue a tenant?", "How can a tenant sue a landlord?"),
    ("Do you know if the museum is open on Mondays?", "Is the museum closed on Mondays?"),
    ("I want to know where my package is", "I want to know why my package is late"),
    ("I don't know how I find out my exam results", "When do I find out my exam results?"),
    ("Can you explain how to get a refund?", "Why do I get a refund?"),
    ("Can you tell me whether I must pay the parking fee?", "Can I pay the parking fee?"),
]


def test_a_request_to_be_told_hits_and_its_traps_miss(
    check_lookups: Callable[..., None],
) -> None:
    check_lookups(SAME, DIFFERENT)


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_request_is_read_past(query: str, stored: str) -> None:
    analysis = analyze(query, stored)
    assert not analysis.refuses, analysis
    asked = analysis.asked[0].lower()  # the question as asked, when a part was read past
    assert asked.split()[0] in ("when", "where", "how", "why", "which", "who", "if"), analysis.asked


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_the_question_after_the_request_is_compared(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses, (a, b)
