"""A unit after a word that names a span of time (issue 18, generated suite's misses):
"How do I log my overtime hours in the HR portal?" / "What is the overtime logging
process in the HR portal?" missed at 0.848: "hours" was a word one side adds, so the
nominalization frame could not serve the pair from its floor. "Overtime", "vacation",
"probation" name a span of time (WordNet: the noun's first sense is in ``noun.time``, no
point of the calendar or the clock); a unit right after one ("overtime *hours*",
"vacation *days*", "probation *period*"), matched with no unit on the other side, counts
that span and adds nothing, and "how *many* vacation days" asks "how *much* vacation".
Not after a calendar word ("holiday *hours*", "weekend *hours*": opening hours), not
when the other side has another head there ("overtime *pay*"), not a different unit
("vacation *weeks*").

Found from the token shapes of two generated-suite misses (content words masked); the
pairs here are written for this test, none from a suite."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

READ_PAST = [
    ("How do I report downtime hours?", "How do I report downtime?"),
    ("How long is the probation period for new hires?", "How long is the probation for new hires?"),
    ("How do I check my leave days balance?", "How do I check my leave balance?"),
    ("Can I carry over unused vacation days?", "Can I carry over unused vacation?"),
    ("How many vacation days do I get?", "How much vacation do I get?"),
    ("How many overtime hours can I work per week?", "How much overtime can I work per week?"),
]


@pytest.mark.parametrize(("query", "stored"), READ_PAST)
def test_a_unit_after_a_span_adds_nothing(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis
        assert [d.kind for d in analysis.differences] == ["unit"], analysis
        assert not analysis.equivalent  # said, not nothing: the similarity still judges
        assert analysis.read[0] == analysis.read[1]


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "How do I log my overtime hours in the HR portal?",
            "What is the overtime logging process in the HR portal?",
        ),
        (
            "How do I request my vacation time in Workday?",
            "What is the vacation request process in Workday?",
        ),
    ],
)
def test_a_reworded_pair_with_a_unit_is_served_from_its_floor(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.reworded and not analysis.refuses, analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("What are your holiday hours?", "What are your holidays?"),
        ("What are the weekend hours?", "What is the weekend?"),
        ("What are your summer hours?", "What is your summer schedule?"),
        ("What are your Christmas hours?", "When is Christmas?"),
        ("What are the school hours?", "What is the school?"),
        ("What is the delivery time for my order?", "What is the delivery for my order?"),
        ("How many vacation days do I get?", "How many vacation weeks do I get?"),
    ],
)
def test_no_unit_is_read_past_where_it_says_something(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert all(d.kind != "unit" for d in analyze(a, b).differences)


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How do I log my overtime hours?", "How do I log my overtime pay?"),
        ("How do I check my overtime hours?", "How do I check my overtime rate?"),
        ("How many vacation days do I get?", "How much vacation pay do I get?"),
        ("How do I request 3 vacation days?", "How do I request vacation?"),
    ],
)
def test_another_head_or_a_count_still_refuses(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses
