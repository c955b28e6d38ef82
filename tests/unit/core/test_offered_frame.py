"""Whether a thing is to be had, asked in two frames (issue 18, question form); pairs
written for this test:

* "Do you offer student discounts?" / "Is there a student discount?" (0.913): "offer"
  was an unexplained detail, so the pair needed the full threshold and missed;
* "Do you have gluten-free options?" / "Are there gluten-free options?" (0.918) and
  "Is there a mobile app?" / "Do you have a mobile app?" (0.844): nothing differed but
  the frames' function words, judged by similarity alone.

"Is there X?", "Do you have / offer / provide / carry / sell X?" and "Is X available?"
ask one thing; any other word that differs is judged as before."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Do you offer student discounts?", "Is there a student discount?"),
        ("Do you have gluten-free options?", "Are there gluten-free options?"),
        ("Is there a mobile app?", "Do you have a mobile app?"),
        ("Do you offer a free trial?", "Is there a free trial available?"),
        ("Is a free trial available?", "Do you offer a free trial?"),
        ("Are gift cards available?", "Do you sell gift cards?"),
    ],
)
def test_one_thing_offered_in_two_frames_is_reworded(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        analysis = analyze(x, y)
        assert not analysis.refuses and analysis.reworded, analysis
        assert any(d.kind == "frame" for d in analysis.differences), analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Do you have a student discount?", "Is there a student loan?"),
        ("Is there a mobile app?", "Do you have a desktop app?"),
        ("Do you have vegan options?", "Are there vegetarian options?"),
        ("Do you have a dress code?", "Is there a dress code for employees?"),
        ("Do you have any openings this week?", "Are there any openings next week?"),
        ("Do you offer free shipping?", "Are free returns available?"),
    ],
)
def test_another_thing_in_another_frame_still_refuses(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        assert analyze(x, y).refuses, (x, y)


def test_a_verb_other_than_offering_is_no_frame() -> None:
    analysis = analyze("Do you repair bikes?", "Are there bikes?")
    assert not analysis.reworded, analysis
    assert not any(d.kind == "frame" for d in analysis.differences), analysis
