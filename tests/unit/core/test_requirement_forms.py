"""What is required, and what a user says they need to do (issue 18, modality); pairs
written for this test:

* "What documents are required for a passport renewal?" / "What documents do I need to
  renew my passport?" (0.945) was refused as a modality: "need to" read as obligation,
  "required" (without "to") as nothing;
* "I need to reset my password" / "How do I reset my password?" (0.932) was refused as
  an obligation: a sentence-initial "I need to ..." says what the user is to do and asks
  how, as "How do I ...?" does; "Do I need to ...?" still asks whether they must;
* "Do I need a visa to enter Japan?" / "Is a visa required to enter Japan?": "need" as a
  main verb after "do I" asks what is required, as "required" does."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


def _modality(x: str, y: str) -> bool:
    return any(d.kind == "modality" for d in analyze(x, y).differences)


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "What documents are required for a passport renewal?",
            "What documents do I need to renew my passport?",
        ),
        ("Is a visa required to enter Japan?", "Do I need a visa to enter Japan?"),
        (
            "Is a prescription required for amoxicillin?",
            "Do I need a prescription for amoxicillin?",
        ),
        (
            "Is it necessary to get a flu shot every year?",
            "Do I need to get a flu shot every year?",
        ),
        ("I need to reset my password", "How do I reset my password?"),
        ("Hi, I need to cancel my order", "How can I cancel my order?"),
    ],
)
def test_one_requirement_or_request_in_two_forms(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        assert not _modality(x, y), analyze(x, y)


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Do I need a visa to enter Japan?", "Can I get a visa to enter Japan?"),
        ("Is a visa required to enter Japan?", "Can I enter Japan with a visa?"),
        ("I need to reset my password", "Do I need to reset my password?"),
        ("I need to cancel my order", "Should I cancel my order?"),
        (
            "Do I need to reset my password every 90 days?",
            "How do I reset my password every 90 days?",
        ),
    ],
)
def test_whether_one_must_is_not_whether_one_can(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        assert analyze(x, y).refuses, (x, y)
