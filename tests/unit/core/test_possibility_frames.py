"""Whether a thing can be done, asked in the frames users write (issue 18,
nominalization and question form); pairs written for this test:

* "Is my ticket transferable?" / "Can I transfer my ticket?" (0.943) was refused as a
  word order change: an -able word stands after its noun as the verb's participle does;
* "Can my visa be extended?" / "Is a visa extension possible?" (0.884) and "Can I get
  reimbursed for travel expenses?" / "Is travel expense reimbursement available?" missed:
  two yes/no questions, a verb against its noun, both asking whether it can be done;
* "Is smoking allowed on the balcony?" / "Can I smoke on the balcony?" (0.913) and "What
  documents are required for a passport renewal?" / "... do I need to renew my
  passport?" missed on the modal word as an unexplained detail;
* "How do I apply for a mortgage?" / "What's the mortgage application process?" (0.738)
  fell under the reworded floor (0.75 then, 0.70 now).

Asking whether it *was* done ("Was the deposit refunded?" against "Is the deposit
refundable?") or in another modality ("required" against "possible") is no frame."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_cache.differences import analyze

REWORDED = [
    ("Is my ticket transferable?", "Can I transfer my ticket?"),
    ("Can my visa be extended?", "Is a visa extension possible?"),
    ("Can I get reimbursed for travel expenses?", "Is travel expense reimbursement available?"),
    ("Is cancellation free?", "Can I cancel for free?"),
    ("Is smoking allowed on the balcony?", "Can I smoke on the balcony?"),
    ("Is smoking permitted on the balcony?", "Can I smoke on the balcony?"),
    (
        "What documents are required for a passport renewal?",
        "What documents do I need to renew my passport?",
    ),
    ("How do I apply for a mortgage?", "What's the mortgage application process?"),
]
DIFFERENT = [
    ("Is the deposit refundable?", "Was the deposit refunded?"),
    ("Is my ticket transferable?", "Was my ticket transferred?"),
    ("Is a refund possible after 30 days?", "Is a refund required after 30 days?"),
    ("Is smoking allowed on the balcony?", "Do I have to smoke on the balcony?"),
    ("Is smoking allowed on the balcony?", "Is vaping allowed on the balcony?"),
    ("Is a visa required to visit Japan?", "Can I get a visa to visit Japan?"),
    ("Is cancellation free?", "Can I cancel?"),
]


@pytest.mark.parametrize(("query", "stored"), REWORDED)
def test_one_question_in_two_frames_is_reworded(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses and analysis.reworded, analysis


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_another_question_is_not_reworded(query: str, stored: str) -> None:
    analysis = analyze(query, stored)
    assert analysis.refuses or not analysis.reworded, analysis


def test_frames_hit_and_other_questions_miss(check_lookups: Callable[..., None]) -> None:
    check_lookups(REWORDED, DIFFERENT)
