"""Two forms users write a question in (issue 18, question form); pairs written for
this test:

* "best way *to* remove a red wine stain *from* carpet" / "How do I get a red wine
  stain *out of* carpet?" was refused as opposite directions: the "to" marks a verb;
  "to" against "from" before a place still refuses.
* "Could you tell me the store hours on Sunday?" / "What are your store hours on
  Sunday?" (0.881, nothing found, below the threshold): a request to be told a thing
  asks what "What is / are ...?" asks; "tell me how ..." is not this frame."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


def test_an_infinitive_to_is_no_direction() -> None:
    for a, b in (
        (
            "best way to remove red wine stain from carpet",
            "How do I get a red wine stain out of carpet?",
        ),
        ("how to get gum off my shoe", "How do I get gum off my shoe?"),
    ):
        for x, y in ((a, b), (b, a)):
            analysis = analyze(x, y)
            assert not any(d.kind == "direction" for d in analysis.differences), analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "How do I transfer money to my savings account?",
            "How do I transfer money from my savings account?",
        ),
        ("How do I move files to an external drive?", "How do I move files off an external drive?"),
        ("Can I fly to Paris from London?", "Can I fly from Paris to London?"),
    ],
)
def test_directions_still_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses, (a, b)


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "I was wondering if you could tell me the store hours on Sunday",
            "What are your store hours on Sunday?",
        ),
        (
            "Please let me know your return policy for sale items",
            "What is your return policy for sale items?",
        ),
    ],
)
def test_tell_me_asks_what(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses and analysis.reworded, analysis


def test_tell_me_how_is_not_what() -> None:
    analysis = analyze("Tell me how to reset my password", "What is my password?")
    assert not analysis.reworded, analysis
