""" "Once" as users write it (issue 18, temporal relations); pairs written for this test:

* "Can I cancel my order after it ships?" / "Can I cancel my order once it has shipped?"
  (0.962) was refused as numbers: "once" was read as a count (1) even as a conjunction;
* "Can I edit a message once it is sent?" / "Can I edit a message before it is sent?"
  (0.966) was served: "once" placed nothing in time, so "before" on one side was a detail.

Before a subject ("once *it*", "once *the* item", "once *I*") "once" means after; before
anything else ("once a day", "use it once") it stays a count."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Can I cancel my order after it ships?", "Can I cancel my order once it has shipped?"),
        (
            "Can I change my plan once I've subscribed?",
            "Can I change my plan after I've subscribed?",
        ),
        ("What happens once my trial ends?", "What happens when my trial ends?"),
    ],
)
def test_once_before_a_subject_is_after(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        analysis = analyze(x, y)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Can I edit a message once it is sent?", "Can I edit a message before it is sent?"),
        (
            "Can I get a refund once the item is opened?",
            "Can I get a refund before the item is opened?",
        ),
        ("Should I take this pill once a day?", "Should I take this pill twice a day?"),
        ("Can I use the coupon once?", "Can I use the coupon twice?"),
    ],
)
def test_once_against_before_or_twice_refuses(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        assert analyze(x, y).refuses, (x, y)
