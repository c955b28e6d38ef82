"""A label before the question and a closing after it (issue 18). Applied to the 452
hitting pairs of our suites, a label kept only 282 of them ("Q: ...", "FAQ: ...",
"Quick question - What's ...") and a closing 404 ("... Please advise.", "... Any help
appreciated." after a question typed with no mark); one wrong answer was served: "Q: Do
I owe gift tax if I give my parents $50,000?" got the answer to "... if my parents give
me $50,000?", the label hiding the roles swapped.

- "q", "faq", "help", "advise" and "urgent" announce or close a question as "question"
  and "thanks" do: a phrase of them says nothing of it (courtesy);
- a question word or auxiliary capitalized after a comma, colon or dash starts the
  question ("Hi, What's ...", "Quick question - How ..."): no name;
- courtesy of two words or more that opens with a capital after a word in lower case is
  a sentence of its own, though no mark ends the question before it.

Kept now: 446 of 452 with a label, 438 with a closing; no trap newly served of 752.
The pairs here are written for this test, none from a suite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("Q: How do I renew my library card?", "How do I renew my library card?"),
    ("FAQ: How many ounces are in a liter?", "How many ounces are in a liter?"),
    (
        "Quick question - What's the process for changing my last name?",
        "How do I change my last name?",
    ),
    ("Hi, What time does the pool open on Sundays?", "What time does the pool open on Sundays?"),
    ("Urgent: how do I unlock my SIM card?", "How do I unlock my SIM card?"),
    ("How do I reset my smart thermostat? Please advise.", "How do I reset my smart thermostat?"),
    (
        "how do i clear the cache in firefox Any help appreciated.",
        "How do I clear the cache in Firefox?",
    ),
]

DIFFERENT = [
    (
        "Q: Can my employer sue me for breaking a contract?",
        "Can I sue my employer for breaking a contract?",
    ),
    ("FAQ: How do I renew my library card?", "FAQ: How do I cancel my library card?"),
    ("Hi, When does the pool open on Sundays?", "Why does the pool open on Sundays?"),
    ("Python: how do I read a file?", "How do I read a file?"),
    ("how do I get Help", "how do I get there"),
]


def test_labels_and_closings_hit_and_their_traps_miss(
    check_lookups: Callable[..., None],
) -> None:
    check_lookups(SAME, DIFFERENT)


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_label_or_closing_is_no_difference(query: str, stored: str) -> None:
    analysis = analyze(query, stored)
    assert not analysis.refuses, analysis
    assert not any(d.kind == "entities" for d in analysis.differences), analysis


def test_a_capitalized_question_word_after_a_mark_is_no_name() -> None:
    analysis = analyze("Hi, Where can I park my bike?", "Where can I park my bike?")
    assert not analysis.refuses, analysis
    # a name after a mark is still one
    assert analyze(
        "Hi, Tokyo or Osaka for a first trip?", "Kyoto or Osaka for a first trip?"
    ).refuses


def test_one_capitalized_word_after_the_question_is_no_closing() -> None:
    # "Help" alone may be the object: only two words or more read as a closing
    assert analyze("how do I get Help", "how do I get there").refuses
