"""A passive with its agent named and the active voice with that agent as the subject
ask one question (issue 18: "Why was my pod evicted by the kubelet?" / "Why did the
kubelet evict my pod?" at 0.857 was a miss: every word matched, nothing explained the
lower cosine). The pair is reworded (served from the reworded floor); a passive with no
agent, or the agent turned into the object, is not. Pairs written for this test."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

SAME = [
    ("Why was my pod evicted by the kubelet?", "Why did the kubelet evict my pod?"),
    ("Why was the request rejected by the server?", "Why did the server reject the request?"),
    ("Was the contract signed by both parties?", "Did both parties sign the contract?"),
]
NOT_REWORDED = [
    ("Was the package delivered?", "Did I deliver the package?"),  # who delivered: open
    ("Why was the pod evicted?", "Why did the kubelet evict my pod?"),
]
SWAPPED = [
    ("Can I be sued by my employer?", "Can I sue my employer?"),
    ("Why was the server rejected by the request?", "Why did the server reject the request?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_passive_with_agent_and_active_are_reworded(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses and analysis.reworded, analysis


@pytest.mark.parametrize(("query", "stored"), NOT_REWORDED)
def test_an_open_doer_is_no_rewording(query: str, stored: str) -> None:
    assert not analyze(query, stored).reworded


@pytest.mark.parametrize(("query", "stored"), SWAPPED)
def test_the_agent_as_the_object_refuses(query: str, stored: str) -> None:
    assert analyze(query, stored).reason == "order"
