""" "X vs Y" against the question in words (issue 18, question form); pairs written for
this test:

* "Roth IRA vs traditional IRA" / "What's the difference between a Roth IRA and a
  traditional IRA?" (0.914) missed: "difference" was an unexplained detail, so the pair
  needed the full threshold. "vs" / "versus" asks how two things differ or compare;
  another word left over ("faster", another product) is judged as before."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "Roth IRA vs traditional IRA",
            "What's the difference between a Roth IRA and a traditional IRA?",
        ),
        ("TCP versus UDP", "What is the difference between TCP and UDP?"),
        ("Python vs Java", "How does Python compare to Java?"),
    ],
)
def test_versus_asks_the_difference(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        analysis = analyze(x, y)
        assert not analysis.refuses and analysis.reworded, analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Roth IRA vs traditional IRA", "What's the difference between a Roth IRA and a 401k?"),
        ("TCP vs UDP", "What is the difference between TCP and HTTP?"),
    ],
)
def test_versus_other_things_refuses(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        assert analyze(x, y).refuses, (x, y)


def test_a_word_besides_the_comparison_is_no_frame() -> None:
    analysis = analyze("TCP vs UDP", "Is TCP faster than UDP?")
    assert not analysis.reworded, analysis
    assert not any(d.kind == "frame" for d in analysis.differences), analysis
