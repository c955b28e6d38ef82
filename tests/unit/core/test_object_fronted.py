"""The object of a "to" clause said first (issue 18, word order): "Is ibuprofen ok to
take w/ coffee?" / "Is it safe to take ibuprofen with coffee?" (0.960), "Is tap water
safe to drink in Mexico?" / "Is it safe to drink tap water in Mexico?" (0.989), "Is a
used car worth buying?" / "Is it worth buying a used car?" were refused as an order
change: English says the same thing with the object first ("X is hard to learn") or
after "it" and the verb ("it is hard to learn X").

The crossing is explained when the object on the "it" side (the content words right
after the verb) stands, all of it, before the predicate and the verb on the other;
a doer after "for" ("Is it hard *for the boss* to reach?": the boss reaches) said first
on the other side ("Is *the boss* hard to reach?": the boss is reached) swaps roles,
and refuses, though no words crossed.

Pairs written for this test, none from a suite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

SAME = [
    ("Is ibuprofen ok to take w/ coffee?", "Is it safe to take ibuprofen with coffee?"),
    ("Is Python hard to learn?", "Is it hard to learn Python?"),
    ("Is this mushroom safe to eat?", "Is it safe to eat this mushroom?"),
    ("Is tap water safe to drink in Mexico?", "Is it safe to drink tap water in Mexico?"),
    ("Is the Chase app easy to use?", "Is it easy to use the Chase app?"),
    ("Is a used car worth buying?", "Is it worth buying a used car?"),
    ("Is Spanish easy to pick up?", "Is it easy to pick up Spanish?"),
    ("Is Rust difficult to learn for beginners?", "Is it difficult for beginners to learn Rust?"),
]
DIFFERENT = [
    ("Is the dog safe to leave with the cat?", "Is it safe to leave the cat with the dog?"),
    ("Is Python hard to learn after Java?", "Is it hard to learn Java after Python?"),
    ("Is ibuprofen safe to take with aspirin?", "Is it safe to take aspirin with ibuprofen?"),
    ("Is the baby safe to feed?", "Is it safe to feed the baby formula?"),
    ("Is the meat safe to eat raw?", "Is it safe to eat raw meat?"),
    ("Is the boss hard to reach?", "Is it hard for the boss to reach?"),
    ("Is the manager easy to convince?", "Is it easy for the manager to convince?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_the_object_said_first_is_the_same_question(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_other_words_moved_or_roles_swapped_still_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses, (a, b)


def test_they_hit_and_the_others_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(SAME, DIFFERENT)
