"""Opposites no rule or list names are refused as opposites, not served by the model
check (found by a pair written this session: "What are the *drawbacks* of a Roth IRA?"
was served the answer to "... the *advantages* ..." at 0.881, the model reading the two
as neighbours in context). WordNet's antonym links (``data/wordnet_antonyms.txt.gz``)
reach them directly, through a satellite adjective's head, or through a noun's
hypernym; synonyms stay synonyms. Pairs written for this test."""

from __future__ import annotations

import pytest

from agent_cache import LayeredCache
from agent_cache.differences import _antonyms, analyze

OPPOSITE = [
    ("What are the drawbacks of a Roth IRA?", "What are the advantages of a Roth IRA?"),
    ("Why is my laptop sluggish after the update?", "Why is my laptop fast after the update?"),
    ("Should I accept the job offer?", "Should I decline the job offer?"),
    ("When did the tenant arrive?", "When did the tenant leave?"),
]
SAME = [
    ("Why is my laptop sluggish after the update?", "Why is my laptop slow after the update?"),
    ("What are the benefits of a Roth IRA?", "What are the advantages of a Roth IRA?"),
    ("How do I repair a leaking faucet?", "How do I fix a leaking faucet?"),
]


@pytest.mark.parametrize(("query", "stored"), OPPOSITE)
def test_wordnet_opposites_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).reason == "opposites", analyze(a, b)


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_synonyms_are_not_opposites(query: str, stored: str) -> None:
    assert "opposites" not in {d.kind for d in analyze(query, stored).differences}


def test_the_drawbacks_are_not_served_the_advantages() -> None:
    with LayeredCache(path=None) as cache:
        cache.store("What are the advantages of a Roth IRA?", "Tax-free growth.")
        assert cache.lookup("What are the drawbacks of a Roth IRA?") is None
        verdict = cache.explain("What are the drawbacks of a Roth IRA?").verdicts[0]
        assert verdict.reason == "opposites"


def test_the_table_is_symmetric_and_holds_no_synonyms() -> None:
    table = _antonyms()
    assert "advantage" in table["drawback"] and "drawback" in table["advantage"]
    assert "fast" in table["sluggish"] and "slow" not in table["sluggish"]
    assert all(word in table[other] for word in ("buy", "open") for other in table[word])
