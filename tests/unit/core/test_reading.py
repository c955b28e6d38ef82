"""The pair as the analysis reads it (issue 18: paraphrases with typos, acronyms or a
greeting fell under the threshold because the embedder reads the spelling: "How do I
cahnge the timezone in my calender app settings?" 0.907), a misspelled modal read as a
missing one ("How long *shoud* I marinate ..." refused as modality), and an acronym
spelled by function words ("What *is the* best school" explained "IT"). Pairs written
for this test."""

from __future__ import annotations

import numpy as np

from agent_cache import semantic
from agent_cache.calibrate import ScoredCandidate, ScoredQuery, served
from agent_cache.differences import analyze


def test_typos_and_a_greeting_are_read_in_the_candidates_words() -> None:
    a = analyze(
        "hey there quick question how do i resett my pasword", "How do I reset my password?"
    )
    assert a.read == ("how do i reset my password", "How do I reset my password")


def test_an_acronym_on_either_side_is_spelled_out() -> None:
    a = analyze("How do I deploy to k8s?", "How do I deploy to Kubernetes?")
    assert a.read[0] == "How do I deploy to Kubernetes"
    b = analyze("What is my date of birth on file?", "What is my DOB on file?")
    assert b.read == ("What is my date of birth on file", "What is my date of birth on file")


def test_nothing_to_read_otherwise_or_a_refusal_reads_nothing() -> None:
    assert analyze("How do I reset my password?", "how do i reset my password").read == ("", "")
    assert analyze("How do I resett my password?", "How do I reset my email?").read == ("", "")


def test_a_misspelled_modal_is_that_modal() -> None:
    a = analyze("How long shoud I marinate chicken?", "How long should I marinate chicken?")
    assert not a.refuses, a
    b = analyze("How long shoud I marinate chicken?", "How long can I marinate chicken?")
    assert b.reason == "modality"


def test_function_words_do_not_spell_an_acronym() -> None:
    a = analyze(
        "Which is the best school in Australia?", "What are the best IT schools in Australia?"
    )
    assert a.refuses and "acronym" not in {d.kind for d in a.differences}, a
    dob = analyze("What is my DOB on file?", "What is my date of birth on file?")
    assert dob.equivalent and "acronym" in {d.kind for d in dob.differences}


def _below(query: str, stored: str, cos: float) -> semantic.Verdict:
    analysis = analyze(query, stored)
    return semantic.Verdict(
        semantic.Candidate("id", "key", stored, cos), "below_threshold", "", cos, analysis
    )


def _pair(cos: float) -> list[np.ndarray]:
    return [np.array([1.0, 0.0]), np.array([cos, float(np.sqrt(1 - cos * cos))])]


def test_the_reading_serves_at_the_threshold_and_only_there() -> None:
    v = _below("how do i resett my pasword quickly", "How do I reset my password?", 0.70)
    policy = semantic.SemanticPolicy(threshold=0.92)
    assert semantic.reread([v]) == 0
    out = semantic.reread_checked([v], 0, _pair(0.95), policy, verifier=False)
    assert out[0].outcome == "serve" and out[0].analysis is not None
    assert out[0].analysis.differences[-1].kind == "read"
    kept = semantic.reread_checked([v], 0, _pair(0.90), policy, verifier=False)
    assert kept[0] is v
    servable = semantic.Verdict(v.candidate, "serve", "", 0.95, v.analysis)
    assert semantic.reread([servable, v]) is None


def test_the_bench_serves_what_the_reading_served() -> None:
    read = ScoredCandidate("stored", 0.80, "correct", read_similarity=0.93)
    low = ScoredCandidate("stored", 0.80, "correct", read_similarity=0.90)
    assert served(ScoredQuery("q", 1, "", [read]), 0.92) is read
    assert served(ScoredQuery("q", 1, "", [low]), 0.92) is None


def test_a_misspelled_day_or_unit_of_time_is_that_word() -> None:
    pairs = [
        ("whats the weather in london tomorow", "What is the weather in London tomorrow?"),
        ("Is the pharmacy open on satruday?", "Is the pharmacy open on Saturday?"),
        ("What was the inflation rate last yaer?", "What was the inflation rate last year?"),
        ("is the bank open on weekneds", "Is the bank open on weekends?"),
    ]
    for query, stored in pairs:
        assert not analyze(query, stored).refuses, analyze(query, stored)
    assert analyze("Is the pharmacy open on Satruday?", "Is it open on Sunday?").refuses
    other = analyze(
        "What was the inflation rate last yaer?", "What was the inflation rate last month?"
    )
    assert other.reason == "temporal"


def test_an_abbreviation_is_not_respelled_into_a_month() -> None:
    a = analyze(
        "How do I contact the dept of revenue?", "How do I contact the department of revenue?"
    )
    assert not a.refuses, a
