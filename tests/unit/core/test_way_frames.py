"""The way of an act asked in other frames (issue 18, nominalization and question form);
pairs written for this test, none from a suite:

* "How can I reset my password?" / "How does a password reset work?" (0.713), "How do I
  track my package?" / "How does package tracking work?" (0.797) and every "How does
  <the act> work?" were below the threshold with "work" left over, not read as a frame;
* "What does passport renewal involve?", "What's involved in cancelling my
  subscription?", "Router reset instructions?", "Walk me through a router reset", "Can
  you explain the subscription cancellation process?" likewise;
* "What is the protocol / workflow / recommended approach / best practice for <doing
  it>?" against "How do I <do it>?" (0.85-0.91) missed: only "process", "procedure"
  and "steps" were read as the way.

The frame holds when every word left over is the frame's and, against "How do I V
...?", V is the act the other side names (as its noun or as itself): "How do I get a
VPN?" / "How does a VPN work?" names no act; "How do I use the API?" / "How does the
API work?" leaves "use" over."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("How can I reset my password?", "How does a password reset work?"),
    ("How do I register for the conference?", "How does conference registration work?"),
    ("How do I schedule a meeting in Outlook?", "How does meeting scheduling work in Outlook?"),
    ("How do I redeem a gift card?", "How does gift card redemption work?"),
    ("How do I track my package?", "How does package tracking work?"),
    ("How do I apply for a mortgage?", "How do mortgage applications work?"),
    ("How do I cancel my subscription?", "Subscription cancellation: how does it work?"),
    ("How do I renew my passport?", "What does passport renewal involve?"),
    ("How do I cancel my subscription?", "What's involved in cancelling my subscription?"),
    ("How do I reset my router?", "Router reset instructions?"),
    ("How do I reset my router?", "Walk me through a router reset"),
    (
        "How do I cancel my subscription?",
        "Can you explain the subscription cancellation process?",
    ),
    ("What is the protocol for reporting a data breach?", "How do I report a data breach?"),
    (
        "What is the workflow for approving an expense report?",
        "How do I approve an expense report?",
    ),
    ("What's the recommended approach to renewing a passport?", "How do I renew a passport?"),
    ("What is the best practice for backing up a laptop?", "How do I back up a laptop?"),
]
DIFFERENT = [
    ("How do I get a VPN?", "How does a VPN work?"),
    ("How do I use the API?", "How does the API work?"),
    ("How do I print a document?", "How does a printer work?"),
    ("How do I cancel my subscription?", "How does subscription renewal work?"),
    ("How do I reset my password?", "How does password encryption work?"),
    ("How do I return an item?", "How does the return policy work?"),
    ("How do I cancel my flight?", "How does flight cancellation compensation work?"),
    ("How does Kubernetes autoscaling work?", "How do I disable Kubernetes autoscaling?"),
    ("Can I cancel my subscription?", "How does subscription cancellation work?"),
    ("Why do I need to reset my password?", "How does a password reset work?"),
    ("How do I file my taxes?", "What does a tax audit involve?"),
    ("How do I appeal a parking ticket?", "What does a parking ticket appeal cost?"),
    ("Router reset instructions?", "Router setup instructions?"),
    ("How do I reset my router?", "Is a router reset free?"),
    ("What is the best practice for password length?", "How long should a password be?"),
    ("What are the best practices for storing passwords?", "How do I reset passwords?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_way_asked_in_another_frame_is_reworded(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert analysis.reworded, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_another_act_or_another_question_is_not(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert not analyze(a, b).reworded


def test_ways_hit_and_other_questions_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT)
