"""The doer asked in the passive (issue 18: a new suite's voice kind hit 4 of 14).
"By whom is my timesheet approved?" / "Who approves my timesheet?" was refused as a
change of question word ("whom" against "who"), and "Who is the refund issued by?" /
"Who issues the refund?" missed below the threshold: the passive's agent was looked for
only after "by", and here it is the question word. Two wrong answers were served on the
way: "Who did the landlord sue?" got the answer to "Who was the landlord sued by?"
(0.968: "who" is the active verb's object there, not its subject), and "Who sent the
letter?" that of "Who was the letter sent to?" (0.957: a preposition left at the end
takes the question word; no doer is asked).

Pairs written for this test, none from a suite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("Who approves my timesheet?", "By whom is my timesheet approved?"),
    ("Who reviews the loan application?", "By whom is the loan application reviewed?"),
    ("Who issues the refund?", "Who is the refund issued by?"),
    ("Who will approve my leave?", "By whom will my leave be approved?"),
    ("Who invented the telephone?", "By whom was the telephone invented?"),
    ("Who sued the landlord?", "Who was the landlord sued by?"),
]

DIFFERENT = [
    ("Who did the landlord sue?", "Who was the landlord sued by?"),
    ("Who did the landlord sue?", "By whom was the landlord sued?"),
    ("Who can I sue for this?", "By whom can I be sued for this?"),
    ("Who does the manager report to?", "Who is the manager reported by?"),
    ("Who sent the letter?", "Who was the letter sent to?"),
    ("Who gave the award?", "Who was the award given to?"),
    ("Who wrote the report?", "Who is the report written for?"),
    ("Who trained the model?", "Who was the model trained on?"),
]


def test_the_doer_asked_in_either_voice_hits_and_its_traps_miss(
    check_lookups: Callable[..., None],
) -> None:
    check_lookups(SAME, DIFFERENT)


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_passive_with_the_doer_asked_is_a_rewording(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.reworded and not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_who_as_an_object_is_no_doer(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.refuses and analysis.reason == "order", analysis


def test_whom_after_a_preposition_other_than_by_is_still_another_question() -> None:
    analysis = analyze("To whom should I send the invoice?", "Who should send the invoice?")
    assert analysis.refuses
