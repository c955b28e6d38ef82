"""The question said inside another frame (issue 18, question form and word order);
pairs written for this test, none from a suite:

* "I don't know how to export my data" / "How do I export my data?" (0.970), "I'm not
  sure how ...", "I have no idea how ...", "I can't find where to ..." were refused as a
  negation: the asker's not knowing is no negation of what is asked;
* "Is it safe to take ibuprofen with coffee?" / "Is taking ibuprofen with coffee
  safe?" (0.991), "Is it legal to record a phone call?" / "Is recording a phone call
  legal?", "How long does it take to ship to Canada?" / "How long does shipping to
  Canada take?" were refused as an order change: the subject after "it" as a "to"
  clause, or first as a gerund;
* "What are your Sunday hours?" / "What are your hours on Sunday?" (0.981), "Is the
  Monday meeting cancelled?" / "Is the meeting on Monday cancelled?" likewise: a day
  before a noun is the noun "on" that day;
* "Would it be possible to get a refund?" / "Can I get a refund?" was refused as a
  modality (a prediction): "would" there is politeness."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("I don't know how to export my data", "How do I export my data?"),
    ("I have no idea how to export my data", "How do I export my data?"),
    ("I'm not sure how to export my data", "How do I export my data?"),
    ("I can't find where to change my password", "Where do I change my password?"),
    ("Is it safe to take ibuprofen with coffee?", "Is taking ibuprofen with coffee safe?"),
    ("Is it legal to record a phone call?", "Is recording a phone call legal?"),
    ("How long does it take to ship to Canada?", "How long does shipping to Canada take?"),
    ("What are your Sunday hours?", "What are your hours on Sunday?"),
    ("Is the Monday meeting cancelled?", "Is the meeting on Monday cancelled?"),
]
NOT_REFUSED = [("Would it be possible to get a refund?", "Can I get a refund?")]
# misses on its similarity (0.711): "stop" is a detail the analysis leaves to it
LOW = [("I don't know how to stop exporting my data", "How do I export my data?")]
DIFFERENT = [
    ("I can't export my data", "How do I export my data?"),
    ("I don't want to export my data", "How do I export my data?"),
    ("I can't log in, how do I reset my password?", "How do I reset my password?"),
    ("I don't know how to cancel my order", "How do I track my order?"),
    ("Is it safe to take ibuprofen after drinking?", "Is drinking after taking ibuprofen safe?"),
    (
        "How long does it take to drive from Boston to New York?",
        "How long does driving from New York to Boston take?",
    ),
    ("Is it safe to take ibuprofen with coffee?", "Is taking ibuprofen without coffee safe?"),
    ("Is the Monday meeting moved to Friday?", "Is the meeting on Friday moved to Monday?"),
    (
        "Can I swap my Saturday shift for a Sunday shift?",
        "Can I swap my Sunday shift for a Saturday shift?",
    ),
    ("What are your Sunday hours?", "What are your hours on Monday?"),
    ("Would it be possible to get a refund?", "Will I get a refund?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME + NOT_REFUSED)
def test_the_frame_around_the_question_is_no_difference(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_what_the_frame_changes_still_refuses(query: str, stored: str) -> None:
    assert analyze(query, stored).refuses


def test_they_hit_and_the_others_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT + LOW)
