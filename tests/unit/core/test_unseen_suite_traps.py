"""The three traps the unseen suite (``tests/data/trap_pairs_unseen.jsonl``, written by a
helper that read none of our code) served on first contact, as kinds (issue 18):

- "all" against "any" ("Do *all* my credits transfer?" / "Do *any* of my credits
  transfer?") was a substitution, and the model check of a substitution served it:
  "any" is a quantifier of its own (at least one), in the scope frame, which the model
  check never overrides;
- "one of my classes" was no quantifier at all, so "Can I drop *all* my classes
  online?" / "Can I drop *one of* my classes online?" left only "all" as a detail;
- a modifier before a compound whose first word reads only as a verb ("an *accessible*
  parking permit": "parking") narrowed no noun, so it was an allowed detail.

Pairs written for this test (not the suite's)."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


@pytest.mark.parametrize(
    ("query", "stored", "reason"),
    [
        ("Do all my packages ship together?", "Do any of my packages ship together?", "scope"),
        ("Can I return all the items online?", "Can I return any items online?", "scope"),
        (
            "Can I cancel all my bookings at once?",
            "Can I cancel one of my bookings at once?",
            "scope",
        ),
        ("Is every flight refundable?", "Is one of the flights refundable?", "scope"),
        (
            "How do I renew a fishing license?",
            "How do I renew a senior fishing license?",
            "qualifier",
        ),
        (
            "How do I get a parking permit?",
            "How do I get a residential parking permit?",
            "qualifier",
        ),
    ],
)
def test_the_kinds_the_unseen_suite_found_refuse(query: str, stored: str, reason: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.refuses and analysis.reason == reason, analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Are there any fees for early withdrawal?", "Are there fees for early withdrawal?"),
        ("Is one of my friends allowed to visit?", "Is a friend of mine allowed to visit?"),
    ],
)
def test_the_same_scope_said_two_ways_does_not_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert not analyze(a, b).refuses
