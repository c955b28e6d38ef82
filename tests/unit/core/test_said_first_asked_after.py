"""Three ways users put a question that the order check read as words moved (issue 18,
reorder and question form); pairs written for this test:

* the thing named first, then asked about with a pronoun: "my printer won't connect to
  wifi how do i fix it" / "How do I fix my printer that won't connect to Wi-Fi?" was
  refused as order ("printer fix" / "fix printer");
* "X from last year" against "last year's X" (an of-like genitive, as "of" was);
* "What do I need to do to X?" asks the way "How do I X?" asks (0.913, nothing found,
  below the threshold).

Words that did move still refuse: a pronoun with two candidates before it, or no new
phrase between the noun and the verb."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

SAME = [
    (
        "my printer wont connect to wifi how do i fix it",
        "How do I fix my printer that won't connect to Wi-Fi?",
    ),
    (
        "My Docker container exits right after starting, how do I fix it?",
        "How do I fix a Docker container that exits right after starting?",
    ),
    ("Where do I find my tax return from last year?", "Where can I find last year's tax return?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_same_question_said_another_way(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(
    "query",
    [
        "What do I need to do to renew my passport?",
        "What should I do to renew my passport?",
    ],
)
def test_what_to_do_asks_how(query: str) -> None:
    for a, b in ((query, "How do I renew my passport?"), ("How do I renew my passport?", query)):
        analysis = analyze(a, b)
        assert not analysis.refuses and analysis.reworded, analysis


def test_what_to_do_is_not_what_happens() -> None:
    analysis = analyze("What happens if I renew my passport late?", "How do I renew my passport?")
    assert not analysis.reworded, analysis


DIFFERENT = [
    ("The dog bit the cat, should I punish it?", "Should I punish the cat that the dog bit?"),
    ("Can my landlord evict my roommate?", "Can my roommate evict my landlord?"),
    (
        "Can I transfer money from savings to checking?",
        "Can I transfer money from checking to savings?",
    ),
]


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_moved_words_still_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses, (a, b)
