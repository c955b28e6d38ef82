"""Trap kinds a suite written by a newcomer found (six domains, twelve trap families:
tests/data/trap_pairs_domains.jsonl): 13 of 240 traps were served on first contact.
Each test pins one mechanism with pairs that are not in that file."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze


# ------------------------------------------------------------ temporal relations
def test_within_is_a_relation() -> None:
    a = analyze("Can I return shoes within 30 days?", "Can I return shoes after 30 days?")
    assert a.reason == "relation"


def test_the_same_relations_around_other_words_refuse() -> None:
    a = analyze(
        "Should I stretch after running before lifting?",
        "Should I stretch before running after lifting?",
    )
    assert a.reason == "relation"


def test_coordinated_relations_are_one_relation() -> None:
    a = analyze(
        "What should I drink before and after a race?",
        "What should I drink after and before a race?",
    )
    assert not a.refuses, str(a)


# ------------------------------------------------------------ prefixes
@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("How do I deactivate my listing?", "How do I reactivate my listing?"),  # re-/de-
        ("How do I unpublish a page?", "How do I publish a page?"),  # unknown word, 2 edits
        ("Can I predate a check?", "Can I postdate a check?"),
    ],
)
def test_one_stem_under_other_prefixes_is_an_opposite(query: str, stored: str) -> None:
    assert analyze(query, stored).reason == "opposites"


def test_a_one_letter_typo_is_still_a_typo() -> None:
    a = analyze("Sort a list in decending order", "Sort a list in descending order")
    assert a.equivalent and not a.refuses


# ------------------------------------------------------------ roles
@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "Can my landlord evict me for a late payment?",
            "Can I evict my landlord for a late payment?",
        ),
        (
            "Do I pay tax if my sister lends me $20,000?",
            "Do I pay tax if I lend my sister $20,000?",
        ),
    ],
)
def test_a_person_moved_between_subject_and_object_refuses(query: str, stored: str) -> None:
    a = analyze(query, stored)
    assert a.reason == "order", str(a)


def test_tell_me_is_the_requester_not_a_role() -> None:
    a = analyze("Can you tell me how to export my contacts?", "How do I export my contacts?")
    assert not a.refuses, str(a)


# ------------------------------------------------------------ qualifiers
@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "Is there a fee for a low-balance checking account?",
            "Is there a fee for a checking account?",
        ),
        ("Can a part-time employee get health benefits?", "Can an employee get health benefits?"),
    ],
)
def test_a_hyphenated_modifier_one_side_adds_is_a_qualifier(query: str, stored: str) -> None:
    assert analyze(query, stored).reason == "qualifier"


def test_a_spelled_out_acronym_is_not_a_qualifier() -> None:
    a = analyze(
        "Is OTC ibuprofen safe in pregnancy?", "Is over-the-counter ibuprofen safe in pregnancy?"
    )
    assert not a.refuses, str(a)


# ------------------------------------------------------------ paraphrases it found refused
def test_a_spelled_out_acronym_is_not_a_date() -> None:
    # "annual" in "annual percentage rate" is the acronym's, not a yearly period
    a = analyze("What is the annual percentage rate on this card?", "What is the APR on this card?")
    assert not a.refuses and a.equivalent, str(a)


def test_a_contraction_typed_without_its_apostrophe() -> None:
    a = analyze("Whats the swift code for my bank?", "What's the swift code for my bank?")
    assert a.equivalent, str(a)


def test_phrases_that_moved_whole_are_a_reordering() -> None:
    a = analyze(
        "If my bag is lost, can I claim a refund in Canada?",
        "In Canada, can I claim a refund if my bag is lost?",
    )
    assert not a.refuses, str(a)
    assert analyze("Did Spain beat Italy?", "Did Italy beat Spain?").reason == "order"


def test_what_do_i_need_to_do_to_is_a_question_of_means() -> None:
    a = analyze("What do I need to do to close my account?", "How do I close my account?")
    assert "modality" not in {d.kind for d in a.differences}, str(a)
    assert analyze("What do I need to bring?", "What do I bring?").reason == "modality"
