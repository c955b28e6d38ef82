"""Opposites WordNet reaches one link further (issue 18, wrong hits found by pairs
written this session): "Is smoking *allowed* on the balcony?" was served the answer to
"Is smoking *banned* ...?" (0.958) and "Is this medicine *safe* during pregnancy?" the
answer to "... *harmful* ...?" (0.944): the model check read each swap as a rewording.
"Ban" is a narrow kind of "forbid", the antonym of "allow" (a verb inherits the
opposites of a direct hypernym with few troponyms, never of "change"); "safe" points to
"harmless" with "see also", the antonym of "harmful"."""

from __future__ import annotations

import pytest

from agent_cache import LayeredCache
from agent_cache.differences import _antonyms, analyze

OPPOSITE = [
    ("Is smoking allowed on the balcony?", "Is smoking banned on the balcony?"),
    ("Are dogs allowed in the park?", "Are dogs banned in the park?"),
    ("Is this medicine safe during pregnancy?", "Is this medicine harmful during pregnancy?"),
]


@pytest.mark.parametrize(("query", "stored"), OPPOSITE)
def test_inherited_opposites_refuse(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        assert analyze(a, b).reason == "opposites", analyze(a, b)


def test_a_broad_verb_hypernym_gives_no_opposites() -> None:
    """ "stay" is the antonym of "change", the hypernym of hundreds of verbs: none of
    "convert", "adjust", "update" becomes its opposite."""
    table = _antonyms()
    assert not {"convert", "adjust", "update", "modify"} & table.get("stay", frozenset())


def test_inherited_opposites_are_not_served() -> None:
    with LayeredCache(path=None) as cache:
        for i, (query, stored) in enumerate(OPPOSITE):
            cache.store(stored, f"answer {i}", context=f"c{i}")
            assert cache.lookup(query, context=f"c{i}") is None, (query, stored)
