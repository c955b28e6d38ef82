"""A 1 MB prompt through the real default embedder (MiniLM on ONNX) and the SQLite
cache: the miss (lookup + store) and the exact hit stay within the bound (issue 19,
point 5)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from agent_cache import LayeredCache

WORDS = ("the of and to in is was for on that with as by at from policy refund order "
         "customer shipping invoice account billing plan").split()  # fmt: skip


def _text(size: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(size // 4))[:size]


def test_a_huge_prompt_through_the_default_embedder(minilm: Any, tmp_path: Path) -> None:
    with LayeredCache(path=tmp_path / "c", embedder=minilm, threshold=0.5) as cache:
        cache.lookup("warm up the model and the analysis")
        # the bound: <= 1 s of cache overhead per call, whatever the size (a full
        # 256-token embedding alone is ~0.1-0.3 s on a loaded core)
        for size, budget in ((150_000, 1.0), (1_000_000, 1.0)):
            prompt = _text(size, size)
            for i in range(5):
                cache.store(prompt[:2_000] + f" variant {i}", f"short {i}")
            started = time.perf_counter()
            assert cache.get_or_compute(prompt, lambda: "computed") == "computed"
            took = time.perf_counter() - started
            assert took < budget, f"{size} bytes: {took:.2f} s"
            started = time.perf_counter()
            hit = cache.lookup(prompt)
            assert hit is not None and hit.layer == "exact"
            assert time.perf_counter() - started < budget / 2
            # the same start, another end: the same vector, refused by the analysis
            other = prompt[: size - 20_000] + _text(20_000, 7)
            assert cache.lookup(other) is None
