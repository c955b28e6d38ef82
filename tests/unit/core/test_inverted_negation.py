"""A negated question asked with its subject after the auxiliary (issue 18, question
form); pairs written for this test:

* "Why won't my laptop turn on?" / "My laptop won't turn on, why?" (0.977) was refused:
  the negation was read as bearing on the first content word after it, "laptop" (the
  subject, moved after "won't" by the question), against "turn on" in the statement.
  In a question the negation bears on the verb after the subject."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Why won't my laptop turn on?", "My laptop won't turn on, why?"),
        ("Why doesn't my phone charge?", "My phone doesn't charge. Why?"),
        ("Why isn't my new card working?", "My new card isn't working, why?"),
        ("Why can't my printer connect to wifi?", "My printer can't connect to wifi, why?"),
    ],
)
def test_a_negated_question_bears_on_the_verb_after_its_subject(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        analysis = analyze(x, y)
        assert not any(d.kind == "negation" for d in analysis.differences), analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "Why does my car start but the lights don't come on?",
            "Why doesn't my car start but the lights come on?",
        ),
        ("Why won't my laptop turn on?", "My laptop turns on, why?"),
        ("Is it safe to not eat before surgery?", "Is it not safe to eat before surgery?"),
    ],
)
def test_a_negation_on_another_word_still_refuses(query: str, stored: str) -> None:
    for x, y in ((query, stored), (stored, query)):
        assert analyze(x, y).refuses, (x, y)
