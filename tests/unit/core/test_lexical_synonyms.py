"""Synonyms from WordNet (issue 18: "a maintained lexical resource for synonyms"), second
mentions and one-sided relations: what the analysis explains instead of refusing.

A WordNet synonym holds for *some* sense of each word ("green" / "park", "mean" /
"average"), so it never makes a pair equivalent: the pair is ``synonymous``, served at
the threshold, or below it only when the embedder's model check agrees. The pairs here
are not in the suites the bench measures."""

from __future__ import annotations

import numpy as np
import pytest

from agent_cache import lexicon as lx
from agent_cache import semantic
from agent_cache.calibrate import ScoredCandidate, ScoredQuery, served
from agent_cache.differences import _senses, _wordnet, analyze


@pytest.mark.parametrize(
    ("query", "stored", "pair"),
    [
        ("How do I halt a running container?", "How do I stop a running container?", "halt"),
        ("What is the purpose of a firewall?", "What is the function of a firewall?", "purpose"),
        ("How do I mend a torn jacket?", "How do I repair a torn jacket?", "mend"),
        ("Is diabetes genetic?", "Is diabetes hereditary?", "genetic"),
    ],
)
def test_a_wordnet_synonym_is_explained_not_refused(query: str, stored: str, pair: str) -> None:
    a = analyze(query, stored)
    assert not a.refuses, str(a)
    assert a.synonymous and not a.equivalent  # one sense agrees: never the 0.5 floor
    assert [(d.kind, d.query) for d in a.differences] == [("lexical", pair)]


def test_the_table_ships_in_the_package_and_holds_only_linked_words() -> None:
    table = _wordnet()
    assert len(table) > 40_000
    assert _senses("halt") is not None and _senses("qwertyuiop") is None
    ids, _ = _senses("halt")  # type: ignore[misc]
    assert ids & _senses("stop")[0]  # type: ignore[index]


def test_an_opposite_in_one_wordnet_synset_still_refuses() -> None:
    # "father" and "mother" share a verb sense (to beget): the opposite wins
    assert ("father", "mother") in lx.OPPOSITE_PAIRS or ("mother", "father") in lx.OPPOSITE_PAIRS
    a = analyze("How do I talk to my father?", "How do I talk to my mother?")
    assert a.reason == "opposites" and not a.synonymous


def test_quantifiers_are_scope_not_synonyms() -> None:
    a = analyze("Do all rooms allow pets?", "Do some rooms allow pets?")
    assert a.reason == "scope"
    b = analyze("How do I list every open port?", "How do I list all open ports?")
    assert not any(d.kind == "lexical" for d in b.differences)


def test_spellings_and_abbreviations_match_before_wordnet() -> None:
    a = analyze("What colour is it?", "What color is it?")
    assert a.equivalent and [d.kind for d in a.differences] == ["typo"]


def _below(query: str, stored: str, cos: float) -> semantic.Verdict:
    analysis = analyze(query, stored)
    assert analysis.synonymous, str(analysis)
    cand = semantic.Candidate("id", "key", stored, cos)
    return semantic.Verdict(cand, "below_threshold", "", cos, analysis)


def _pair(cos: float) -> list[np.ndarray]:
    return [np.array([1.0, 0.0]), np.array([cos, float(np.sqrt(1 - cos * cos))])]


def test_below_the_threshold_the_model_check_must_agree() -> None:
    v = _below("How do I halt a running container?", "How do I stop a running container?", 0.89)
    (probe,) = semantic.synonym_probes([v])
    assert probe.lexical and probe.masked == "How do I something a running container?"
    # the swap moved the query 0.11; deleting the word moves it 0.25: 0.44 <= 0.80
    out = semantic.model_checked([v], [probe], _pair(0.75), verifier=False)
    assert out[0].outcome == "serve" and out[0].analysis is not None
    assert [d.kind for d in out[0].analysis.differences] == ["lexical", "model"]
    # the same swap when deleting the word moves the query only 0.12: 0.92 > 0.80
    kept = semantic.model_checked([v], [probe], _pair(0.88), verifier=False)
    assert kept[0] is v


def test_a_synonymous_pair_under_the_floor_is_not_probed() -> None:
    v = _below("How do I halt a running container?", "How do I stop a running container?", 0.7)
    assert semantic.synonym_probes([v]) == []


def test_the_bench_serves_what_the_model_check_served_below_the_threshold() -> None:
    checked = ScoredCandidate("stored", 0.85, "correct", checked=True)
    plain = ScoredCandidate("stored", 0.85, "correct")
    assert served(ScoredQuery("q", 1, "", [checked]), 0.92) is checked
    assert served(ScoredQuery("q", 1, "", [plain]), 0.92) is None


# ----------------------------------------------------------------- second mentions
def test_a_second_mention_of_a_shared_word_is_not_a_new_word() -> None:
    a = analyze(
        "Why is India so bad at the Olympics?",
        "Why is India so bad at the Olympics? Is it because India is poor?",
    )
    assert not a.refuses and "repeat" in {d.kind for d in a.differences}
    assert not a.equivalent  # a rewording: the similarity decides


def test_a_repeat_that_stands_in_for_another_word_still_refuses() -> None:
    a = analyze("Is the cat bigger than the dog?", "Is the cat bigger than the cat?")
    assert a.refuses
    b = analyze("Is Python faster than Java?", "Is Python faster than Python?")
    assert b.reason == "entities"


def test_an_acronym_and_its_plural_are_one_name() -> None:
    a = analyze("How can I get admission in the IIT?", "How can I get admission in the IITs?")
    assert not a.refuses, str(a)
    assert analyze("Is IBM bigger than HP?", "Is IBM bigger than HPE?").refuses


# ----------------------------------------------------------------- relations
def test_a_relation_on_one_side_is_a_detail() -> None:
    a = analyze("How do I travel on a low budget?", "How do I travel while on a low budget?")
    assert not a.refuses, str(a)


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        (
            "Is savings earned before the marriage shared?",
            "Is savings earned during the marriage shared?",
        ),
        ("Can I eat before the surgery?", "Can I eat after the surgery?"),
    ],
)
def test_opposed_relations_still_refuse(query: str, stored: str) -> None:
    assert analyze(query, stored).reason == "relation"
