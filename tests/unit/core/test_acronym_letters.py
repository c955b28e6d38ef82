"""Acronyms coined from more than initials (issue 18, abbreviations): "NSAIDs" is
*N*on*S*teroidal *A*nti-*I*nflammatory *D*rug*s* and "LHR" is *L*ondon *H*eath*r*ow, so
the pairs were refused ("anti" read as a reversing prefix, "London" as a lost name).
Each word of the spelled-out run gives its first letter, later letters may follow in
order (Schwartz & Hearst's rule for abbreviation definitions); a run whose letters do
not spell the acronym still refuses, and an acronym spelled by initials keeps that
reading. One word's capitals spell an acronym too ("JS" / "JavaScript"). Pairs written
for this test."""

from __future__ import annotations

import pytest

from agent_cache.differences import analyze

SAME = [
    (
        "Is it OK to take NSAIDs if I have high blood pressure?",
        "Is it OK to take nonsteroidal anti-inflammatory drugs if I have high blood pressure?",
    ),
    (
        "How early should I get to London Heathrow for an international flight?",
        "How early should I get to LHR for an international flight?",
    ),
    (
        "Where is the nearest DMV office?",
        "Where is the nearest Department of Motor Vehicles office?",
    ),
    ("Which TLDs are cheapest?", "Which top-level domains are cheapest?"),
    ("How do I debug JS in Chrome?", "How do I debug JavaScript in Chrome?"),
    ("How do I push a branch to GH?", "How do I push a branch to GitHub?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_acronym_spelled_by_inner_letters(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses, analysis
        assert any(d.kind == "acronym" for d in analysis.differences), analysis


def test_letters_that_do_not_spell_it_still_refuse() -> None:
    analysis = analyze(
        "How early should I get to London Gatwick for an international flight?",
        "How early should I get to LHR for an international flight?",
    )
    assert analysis.refuses and analysis.reason == "entities", analysis


def test_initials_win_over_inner_letters() -> None:
    """ "pressure in" spells PSI with inner letters; "pounds per square inch" with
    initials, and that is the reading kept."""
    analysis = analyze(
        "What's the recommended tire PSI for a 2019 Toyota Camry?",
        "What's the recommended tire pressure in pounds per square inch for a 2019 Toyota Camry?",
    )
    acronym = next(d for d in analysis.differences if d.kind == "acronym")
    assert acronym.candidate == "pounds per square inch"
    assert not analysis.refuses, analysis


def test_a_reversing_prefix_outside_an_acronym_still_refuses() -> None:
    analysis = analyze("Can I take anti-inflammatory drugs?", "Can I take inflammatory drugs?")
    assert analysis.refuses, analysis


@pytest.mark.parametrize(
    ("query", "stored"),
    [
        ("Do I need a CPA?", "Do I need a copy of the passport?"),
        ("Is there a fee at the ATM?", "Is there a fee at the airport terminal?"),
        ("Is my HSA taxable?", "Is my house sale taxable?"),
    ],
)
def test_inner_letters_must_open_a_part(query: str, stored: str) -> None:
    """A later letter stands in an acronym only where a part of the word begins ("non-
    *s*teroidal", "Heath-*r*ow") or as a plural's "s": "copy of the *pa*ssport" spells no
    CPA, "*s*ale" no HSA."""
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).refuses, (a, b)


def test_two_letters_are_initials_only() -> None:
    """ "BP" inside one word ("backup") is not an acronym: two letters say too little."""
    analysis = analyze("How do I check my BP at home?", "How do I check my backup at home?")
    assert analysis.refuses, analysis


def test_a_word_both_sides_hold_spells_nothing() -> None:
    """ "PDF to a PowerPoint" spells P-P-T with later letters, but "PDF" is asked on both
    sides: the acronym is not read into it."""
    analysis = analyze(
        "How do I convert a PDF to a PPT?", "How do I convert a PDF to a PowerPoint?"
    )
    acronym = [d for d in analysis.differences if d.kind == "acronym"]
    assert all("PDF" not in d.candidate for d in acronym), analysis


def test_capitals_of_another_word_still_refuse() -> None:
    analysis = analyze("How do I learn JS?", "How do I learn Java?")
    assert analysis.refuses and analysis.reason == "entities", analysis
