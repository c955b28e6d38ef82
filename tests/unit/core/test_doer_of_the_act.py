"""Who does the act when it is named as a noun (issue 18, nominalization and the
agent/patient traps); pairs written for this test, none from a suite:

* "How do employees submit expenses?" / "What's the expense submission process for
  employees?" (0.882) and "How do tenants report maintenance issues?" / "... the
  maintenance issue reporting process for tenants?" (0.935) were refused as an order
  change: the doer moves behind "for", the object before the act's noun;
* "How do I request time off?" / "How do time off requests work?" likewise: "time
  off" (a word and its particle) was no compound;
* "How can a student appeal a grade?" read as no question of the way (only "I", "we",
  "you", "one" asked), so "When can a student appeal a grade?" was *served* its answer
  (0.930);
* "How do teachers pay parents?" was *served* the answer to "What's the teacher
  payment process for parents?" (0.888), "How do tenants evict landlords?" that to
  "... the tenant eviction process for landlords?": the noun before the act's noun is
  whom it is done to, so the roles are swapped."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    (
        "How do employees submit expenses?",
        "What's the expense submission process for employees?",
    ),
    (
        "How do tenants report maintenance issues?",
        "What's the maintenance issue reporting process for tenants?",
    ),
    ("How can a student appeal a grade?", "What's the grade appeal process for students?"),
    ("How do I request time off?", "How do time off requests work?"),
    ("How do I request time off?", "What's the process for time off requests?"),
    ("How do doctors refer patients?", "What's the patient referral process for doctors?"),
]
DIFFERENT = [
    ("How do teachers pay parents?", "What's the teacher payment process for parents?"),
    ("How can parents pay teachers?", "What's the parent payment process for teachers?"),
    ("How do tenants evict landlords?", "What's the tenant eviction process for landlords?"),
    ("How do landlords evict tenants?", "What's the landlord eviction process for tenants?"),
    ("How do patients refer doctors?", "What's the patient referral process for doctors?"),
    ("How can a student appeal a grade?", "When can a student appeal a grade?"),
    ("How can a student appeal a grade?", "Why would a student appeal a grade?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_doer_behind_for_is_the_same_act(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_swapped_roles_or_another_question(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses


def test_doers_hit_and_swaps_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT)
