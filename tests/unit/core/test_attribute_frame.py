""" "How tall is X?" and "What is the height of X?" ask one question (issue 18:
nominalizations refused as a substitution of "tall" for "height"). The attribute an
adjective measures comes from WordNet's attribute links
(``data/wordnet_attributes.txt.gz``); a measure that is not the adjective's attribute
stays a substitution. Pairs written for this test."""

from __future__ import annotations

import pytest

from agent_cache.differences import _attributes, analyze

SAME = [
    ("How tall is the Eiffel Tower?", "What is the height of the Eiffel Tower?"),
    ("How deep is Lake Tahoe?", "What is the depth of Lake Tahoe?"),
    ("How old is the Great Wall of China?", "What is the age of the Great Wall of China?"),
    ("How long is the Golden Gate Bridge?", "What is the length of the Golden Gate Bridge?"),
    ("How heavy is a grand piano?", "What is the weight of a grand piano?"),
]
DIFFERENT = [
    ("How tall is the Eiffel Tower?", "What is the weight of the Eiffel Tower?"),
    ("How old is the Great Wall of China?", "What is the length of the Great Wall of China?"),
    ("Why is the Eiffel Tower tall?", "What is the height of the Eiffel Tower?"),
]


@pytest.mark.parametrize(("query", "stored"), SAME)
def test_how_and_the_attribute_ask_one_question(query: str, stored: str) -> None:
    for a, b in ((query, stored), (stored, query)):
        analysis = analyze(a, b)
        assert not analysis.refuses and analysis.reworded, analysis
        assert "frame" in {d.kind for d in analysis.differences}


@pytest.mark.parametrize(("query", "stored"), DIFFERENT)
def test_another_measure_or_no_how_is_not_the_frame(query: str, stored: str) -> None:
    analysis = analyze(query, stored)
    assert analysis.refuses, analysis


def test_the_table_holds_attributes_not_neighbours() -> None:
    table = _attributes()
    assert {"height"} <= table["tall"] and {"age"} <= table["old"]
    assert "frequency" in table["often"]  # an adverb: through "frequently" / "frequent"
    assert "weight" not in table["tall"] and "tall" not in table.get("height", frozenset())
