"""The model check of a substitution (issue 18): a candidate refused only for one swapped
word is served when the embedder says the swap moves the query far less than deleting
the word would; the decision logic here, with hand-made unit vectors."""

from __future__ import annotations

import numpy as np
import pytest

from agent_cache import semantic
from agent_cache.differences import analyze


def _refused(query: str, stored: str, cos: float) -> semantic.Verdict:
    analysis = analyze(query, stored)
    assert analysis.reason == "substitution", str(analysis)
    cand = semantic.Candidate("id", "key", stored, cos)
    return semantic.Verdict(cand, "refused", "substitution", cos, analysis)


def _pair(cos: float) -> list[np.ndarray]:
    """Two unit vectors whose dot product is ``cos``."""
    return [np.array([1.0, 0.0]), np.array([cos, float(np.sqrt(1 - cos * cos))])]


def test_a_swap_that_moves_little_is_served_and_named() -> None:
    v = _refused("What are the signs of gout?", "What are the symptoms of gout?", 0.97)
    probes = semantic.synonym_probes([v])
    assert [p.masked for p in probes] == ["What are the something of gout?"]
    # deleting "signs" moves the query 0.30; the swap moved it 0.03: explained
    out = semantic.model_checked([v], probes, _pair(0.70), verifier=False)
    assert out[0].outcome == "serve" and out[0].reason == ""
    assert out[0].analysis is not None and not out[0].analysis.refuses
    assert [d.kind for d in out[0].analysis.differences] == ["model"]
    verified = semantic.model_checked([v], probes, _pair(0.70), verifier=True)
    assert verified[0].outcome == "verify"


def test_a_swap_that_moves_as_much_as_a_deletion_stays_refused() -> None:
    v = _refused("How do I rename a file?", "How do I delete a file?", 0.85)
    probes = semantic.synonym_probes([v])
    out = semantic.model_checked([v], probes, _pair(0.80), verifier=False)  # 0.15 vs 0.20
    assert out[0] is v


def test_only_lone_substitutions_above_the_floor_are_probed() -> None:
    low = _refused("What are the signs of gout?", "What are the symptoms of gout?", 0.7)
    other = analyze("Sort in ascending order", "Sort in descending order")
    opposite = semantic.Verdict(
        semantic.Candidate("i", "k", "x", 0.97), "refused", other.reason, 0.97, other
    )
    assert semantic.synonym_probes([low, opposite]) == []


# ---------------------------------------------------------------- the check in context
def test_a_content_swap_carries_its_spans_for_the_check_in_context() -> None:
    q, c = "Does my plan pay for physical therapy?", "Does my plan cover physical therapy?"
    v = _refused(q, c, 0.89)
    (probe,) = semantic.synonym_probes([v])
    items = probe.context_items()
    assert [text[s:e] for text, s, e in items] == ["pay", "cover"]
    assert [text for text, _, _ in items] == [q, c]
    assert probe.bare_words() == ["pay", "cover"]


def test_a_quantifier_swap_is_a_scope_the_model_check_never_sees() -> None:
    # "all" / "any" is a scope (a frame), never one sense of two words: it was a
    # substitution, and the sentence-level check served "Do all my credits transfer?"
    # for "Do any of my credits transfer?" (the unseen suite, first contact)
    query, stored = "Can I delete all files in the folder?", "Can I delete any files in the folder?"
    analysis = analyze(query, stored)
    assert analysis.reason == "scope", str(analysis)
    cand = semantic.Candidate("id", "key", stored, 0.97)
    v = semantic.Verdict(cand, "refused", "scope", 0.97, analysis)
    assert semantic.synonym_probes([v]) == []


def test_one_sense_in_context_explains_a_swap_that_moves_up_to_a_deletion() -> None:
    # the swap moved the query 0.11 and deleting the word 0.15: too much for the
    # sentence-level check (0.40), enough when the model reads one sense in context
    v = _refused(
        "Does my plan pay for physical therapy?", "Does my plan cover physical therapy?", 0.89
    )
    probes = semantic.synonym_probes([v])
    assert semantic.model_checked([v], probes, _pair(0.85), verifier=False)[0] is v
    same_sense = [(0.70, 0.45)]
    out = semantic.model_checked([v], probes, _pair(0.85), verifier=False, context=same_sense)
    assert out[0].outcome == "serve"
    assert [d.kind for d in out[0].analysis.differences] == ["model"]  # type: ignore[union-attr]


def test_words_no_closer_in_context_than_bare_stay_refused() -> None:
    v = _refused("How do I loosen the lug nuts?", "How do I tighten the lug nuts?", 0.93)
    probes = semantic.synonym_probes([v])
    # close in context (0.63) but closer still as bare words (0.78): one kind, not one sense
    out = semantic.model_checked([v], probes, _pair(0.88), verifier=False, context=[(0.63, 0.78)])
    assert out[0] is v
    # close and pulled together, but below the floor
    low = [(semantic.CONTEXT_FLOOR - 0.01, 0.30)]
    assert semantic.model_checked([v], probes, _pair(0.88), verifier=False, context=low)[0] is v


def test_the_check_in_context_never_explains_more_than_a_deletion() -> None:
    v = _refused("How do I rename a file?", "How do I delete a file?", 0.85)
    probes = semantic.synonym_probes([v])
    # the swap moved the query 0.15, deleting the word 0.12: the swap says more
    out = semantic.model_checked([v], probes, _pair(0.88), verifier=False, context=[(0.9, 0.2)])
    assert out[0] is v


def test_in_context_needs_both_vectors() -> None:
    a, b = np.array([1.0, 0.0]), np.array([0.6, 0.8])
    assert semantic.in_context([a, b], [a, a]) == (0.6, 1.0)
    assert semantic.in_context([a, None], [a, b]) is None
    assert semantic.in_context([], []) is None


def test_a_stricter_threshold_raises_the_model_checks_floor() -> None:
    assert semantic.synonym_floor(0.92) == semantic.SYNONYM_FLOOR
    assert semantic.synonym_floor(0.97) == pytest.approx(0.97 - semantic.SYNONYM_MARGIN)
    v = _refused("What are the signs of gout?", "What are the symptoms of gout?", 0.83)
    assert semantic.synonym_probes([v], semantic.synonym_floor(0.92))
    assert semantic.synonym_probes([v], semantic.synonym_floor(0.97)) == []
