"""The model check of a substitution (issue 18): a candidate refused only for one swapped
word is served when the embedder says the swap moves the query far less than deleting
the word would; the decision logic here, with hand-made unit vectors."""

from __future__ import annotations

import numpy as np

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
