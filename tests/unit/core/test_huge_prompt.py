"""One large prompt costs a bounded, linear time (issue 19, point 5).

A ~1 MB prompt (allowed by the default ``max_prompt_bytes``) took 416 s in
``get_or_compute``: the difference analysis is quadratic (400K characters against a
2,000-character candidate: 9.5 s). Now the analysis judges at most
``MAX_ANALYZED_CHARS`` of each text (the rest compared by equality; refused when it
differs) and the embedder sees at most ``MAX_EMBEDDED_CHARS``. Fake embedder here; the
real default one in tests/integration/test_huge_prompt_real.py.
"""

from __future__ import annotations

import random
import time

from agent_cache import LayeredCache
from agent_cache.differences import MAX_ANALYZED_CHARS, analyze
from agent_cache.testing import HashEmbedder

WORDS = ("the of and to in is was for on that with as by at from policy refund order "
         "customer shipping invoice account billing plan").split()  # fmt: skip


def text(size: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    words: list[str] = []
    total = 0
    while total < size:
        words.append(rng.choice(WORDS))
        total += len(words[-1]) + 1
    return " ".join(words)[:size]


def test_the_analysis_of_a_long_text_is_bounded_and_refuses() -> None:
    analyze("warm up the dictionary", "warm up the dictionaries")
    long, short = text(400_000), text(2_000)
    started = time.perf_counter()
    found = analyze(long, short)
    assert time.perf_counter() - started < 0.5  # was 9.5 s
    assert found.refused and found.reason == "length"


def test_a_difference_inside_long_texts_is_still_found() -> None:
    shared = text(50_000, seed=1)
    q = shared + " What is the weather in Paris tomorrow?"
    c = shared + " What is the weather in Paris today?"
    started = time.perf_counter()
    assert analyze(q, c).reason == "temporal"
    middle = len(shared) // 2
    q2 = shared[:middle] + " not " + shared[middle:]
    assert analyze(q2, shared).reason == "negation"  # in the middle: windowed there
    assert not analyze(shared + " thanks", shared).refused  # only filler differs
    far = shared[:100] + " invoice " + shared[100:] + " " + "x " * MAX_ANALYZED_CHARS
    assert analyze(far, shared + " y").reason == "length"  # differs over a long span
    assert time.perf_counter() - started < 1.0


def test_a_huge_prompt_misses_and_hits_fast() -> None:
    cache = LayeredCache(path=None, embedder=HashEmbedder(64), threshold=0.0)
    for size, budget in ((150_000, 0.3), (1_000_000, 1.0)):
        prompt = text(size, seed=size)
        for i in range(5):  # candidates the semantic search will find and analyze
            cache.store(prompt[:2_000] + f" variant {i}", f"short {i}")
        cache.store(prompt[: size // 2] + " variant", "a long near-copy")
        cache.lookup("warm up the analysis dictionaries")
        started = time.perf_counter()
        answer = cache.get_or_compute(prompt, lambda: "computed")  # miss: lookup + store
        took = time.perf_counter() - started
        assert answer == "computed"
        assert took < budget, f"{size} bytes: {took:.2f} s"
        started = time.perf_counter()
        hit = cache.lookup(prompt)
        assert hit is not None and hit.layer == "exact" and hit.response == "computed"
        assert time.perf_counter() - started < budget / 2
    cache.close()
