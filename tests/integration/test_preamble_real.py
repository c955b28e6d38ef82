"""A greeting and two typos, through the cache (issue 18): the bundled MiniLM puts
"hey there quick question how do i resett my pasword" well under the threshold from
"How do I reset my password?"; the analysis reads the pair as the same words, so it is
served from the equivalence floor. A preamble that says something is not dropped."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from agent_cache import LayeredCache

pytestmark = pytest.mark.integration


def test_a_greeting_with_typos_is_served_and_a_real_preamble_is_not() -> None:
    with LayeredCache(path=None) as cache:
        cache.store("How do I reset my password?", "Use the link on the sign-in page.")
        asked = "hey there quick question how do i resett my pasword"
        hit = cache.lookup(asked)
        assert hit is not None and hit.similarity < 0.92, str(cache.explain(asked))
        assert cache.lookup("I'm on Windows 11. How do I reset my password?") is None
