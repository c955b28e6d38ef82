"""A deadline is when one must (issue 18, nominalization and question form); pairs
written for this test:

* "When do I have to submit my tax return?" / "What is the deadline for submitting my
  tax return?" (0.853) and "When must I file my FAFSA?" / "What is the FAFSA filing
  deadline?" were refused as a modality (an obligation against none);
* "What is the due date for my car loan payment?" / "When is my car loan payment due?"
  (0.956) was refused as a word-order change.

"Deadline" and "due" (not "due to") read as an obligation, wherever they stand;
"When can I ...?" (the earliest) and "How do I ...?" still ask another thing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    (
        "When do I have to submit my tax return?",
        "What is the deadline for submitting my tax return?",
    ),
    ("When must I file my FAFSA?", "What is the FAFSA filing deadline?"),
    ("By when do I need to register for classes?", "What's the deadline to register for classes?"),
    ("What is the due date for my car loan payment?", "When is my car loan payment due?"),
    ("Is the store closed due to the holiday?", "Is the store closed because of the holiday?"),
]
DIFFERENT = [
    ("What is the deadline for submitting my tax return?", "When can I submit my tax return?"),
    ("What is the deadline for submitting my tax return?", "How do I submit my tax return?"),
    ("When do I have to submit my tax return?", "When should I submit my tax return?"),
    ("When is my rent due?", "When can I pay my rent?"),
    ("What's the deadline to register for classes?", "When do classes start?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_a_deadline_is_when_one_must(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_the_earliest_or_the_way_is_another_question(query: str, stored: str) -> None:
    assert analyze(query, stored).refuses


def test_deadlines_hit_and_other_questions_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT)
