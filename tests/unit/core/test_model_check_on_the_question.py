"""The model check judges the question, not the greeting around it (issue 18: a
synonym pair that hit lost its hit once a greeting or thanks came with it). "How can I
boost my savings rate?" / "How can I improve my savings rate?" hits through the model
check of the swapped word; "Hi there! How can I boost my savings rate?" missed (0.887):
the check measured the swap's move on the two messages, greeting included, and the
masked word moved a longer message less. The analysis now says what each side asks
(:attr:`Analysis.asked`, courtesy and greetings read past) and the check measures on
that. Traps with a greeting stay refused.

Pairs written for this test, none from a suite."""

from __future__ import annotations

from collections.abc import Callable

from agent_cache.differences import analyze

SAME = [
    ("Hi there! How can I boost my savings rate?", "How can I improve my savings rate?"),
    (
        "Hello team, how do I grant a contractor repo rights?",
        "How do I grant a contractor repo privileges?",
    ),
    ("ok so how can I cut my electricity bill", "How can I reduce my electricity bill?"),
]

DIFFERENT = [
    ("Hi team, how do I increase my storage quota?", "How do I decrease my storage quota?"),
    ("Hello! Can I import contacts from Gmail?", "Can I export contacts from Gmail?"),
    ("Quick question: is the museum open on Monday?", "Is the museum closed on Monday?"),
    ("Hey there, can I bring my dog to the office?", "Can I bring my cat to the office?"),
    ("Hi! How do I upgrade my plan? Thanks!", "How do I downgrade my plan?"),
]


def test_a_synonym_with_a_greeting_hits_and_traps_with_one_miss(
    check_lookups: Callable[..., None],
) -> None:
    check_lookups(SAME, DIFFERENT)


def test_the_analysis_says_what_each_side_asks() -> None:
    analysis = analyze("Hi there! How can I boost my savings rate?", "How can I improve it?")
    assert analysis.asked[0] == "How can I boost my savings rate"
    assert analysis.asked[1] == "How can I improve it"
    plain = analyze("How can I boost my savings rate?", "How can I improve my savings rate?")
    assert plain.asked == ("", "")  # nothing read past: the messages are the questions
