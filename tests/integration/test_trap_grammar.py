"""A second trap suite written a different way (issue 18, point 5): pairs generated from a
grammar of question frames x slot values x perturbations, not hand-written sentences.

Traps change one thing that changes the answer (a modal, a temporal relation, a
quantifier, a reversing prefix, a number, a negation, a swapped name); paraphrases change
only the surface (capitals, a filler, an article, a contraction, a typo). Each kind is
reported on its own (``pytest -s`` prints the table), and the default configuration must
serve no more than 2 % of the traps.
"""

from __future__ import annotations

from collections import Counter

import pytest

from agent_cache import LayeredCache
from agent_cache.bench.trap_grammar import pairs

pytestmark = pytest.mark.integration

_pairs = pairs


def test_generated_traps_are_refused_and_surface_rewrites_hit(minilm: object) -> None:
    traps, paraphrases = _pairs()
    served: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for kind, stored, asked in traps:
        with LayeredCache(path=None, embedder=minilm) as cache:  # type: ignore[arg-type]
            cache.store(stored, "answer", llm_string="m")
            total[kind] += 1
            served[kind] += cache.lookup(asked, llm_string="m") is not None
    hit: Counter[str] = Counter()
    ptotal: Counter[str] = Counter()
    for kind, stored, asked in paraphrases:
        with LayeredCache(path=None, embedder=minilm) as cache:  # type: ignore[arg-type]
            cache.store(stored, "answer", llm_string="m")
            ptotal[kind] += 1
            hit[kind] += cache.lookup(asked, llm_string="m") is not None
    for kind in sorted(total):
        print(f"trap {kind:10} served {served[kind]}/{total[kind]}")
    for kind in sorted(ptotal):
        print(f"paraphrase {kind:10} hit {hit[kind]}/{ptotal[kind]}")
    assert sum(served.values()) <= 0.02 * sum(total.values()), dict(served)
    # a surface rewrite is never a different question: most of them must hit
    assert sum(hit.values()) >= 0.6 * sum(ptotal.values()), dict(hit)
