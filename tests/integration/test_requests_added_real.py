"""A second request added to a stored question, through the cache with the bundled
embedder (issue 18): the two texts read 0.92-0.95, over the threshold, and the answer to
the first question was served for both; the same question with a polite request for
help added is still served."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from agent_cache import LayeredCache

pytestmark = pytest.mark.integration


def test_an_added_question_is_a_miss_and_a_plea_for_help_is_a_hit() -> None:
    with LayeredCache(path=None) as cache:
        cache.store("How do I cancel my subscription?", "Settings > Billing > Cancel.")
        for asked in (
            "How do I cancel my subscription? Also, how do I delete my account?",
            "How do I cancel my subscription and delete my account?",
        ):
            assert cache.lookup(asked) is None, str(cache.explain(asked))
            assert cache.explain(asked).verdicts[0].reason == "request"
        polite = "How do I cancel my subscription? Can anyone advise?"
        assert cache.lookup(polite) is not None, str(cache.explain(polite))
