"""The public front: settings validated on assignment as in the constructor, the key a
write returns, and one body behind each sync/async pair."""

from __future__ import annotations

from typing import Any

import pytest

from agent_cache import ConfigurationError, LayeredCache, TtlPolicy
from agent_cache.stores import MemoryStore
from agent_cache.testing import FakeClock, HashEmbedder


def make(**kw: Any) -> LayeredCache:
    kw.setdefault("embedder", HashEmbedder())
    kw.setdefault("clock", FakeClock())
    kw.setdefault("ttl_policy", TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()))
    return LayeredCache(path=None, **kw)


# (setting, a value the constructor refuses)
REFUSED = [
    ("threshold", 5.0),
    ("threshold", -0.1),
    ("threshold", "0.9"),
    ("thresholds", {"faq": 1.5}),
    ("top_k", 0),
    ("top_k", 2.5),
    ("bypass_rate", 2.0),
    ("audit_rate", -1.0),
    ("explore_rate", 1.5),
    ("max_error_rate", 1.0),
    ("rerank_threshold", 3.0),
    ("refresh_ahead", 0),
    ("quotas", {"faq": 0}),
    ("max_prompt_bytes", 0),
    ("case_sensitive", "code"),
    ("ttl_policy", 3600),
    ("clock", 12.0),
]


@pytest.mark.parametrize(("name", "bad"), REFUSED)
def test_assignment_refuses_what_the_constructor_refuses(name: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        make(**{name: bad})
    cache = make()
    before = getattr(cache, name)
    with pytest.raises(ConfigurationError, match=name):
        setattr(cache, name, bad)
    assert getattr(cache, name) == before  # nothing changed


def test_assignment_of_a_valid_value_is_used_and_normalized() -> None:
    cache = make()
    cache.threshold = 1  # an int in [0, 1]: stored as the constructor stores it
    assert cache.threshold == 1.0 and isinstance(cache.threshold, float)
    assert cache.threshold_for("default") == 1.0
    cache.case_sensitive = ["code", "sql"]  # type: ignore[assignment]
    assert cache.case_sensitive == frozenset({"code", "sql"})
    cache.top_k = 3
    assert cache.top_k == 3


def test_a_skipped_write_returns_the_key_it_would_have_written() -> None:
    cache = make()
    cache.bump_version("faq")
    skipped = cache.store("What is RAG?", "", namespace="faq")  # empty: not stored
    assert cache.stats().skipped_stores == 1
    written = cache.store("What is RAG?", "Retrieval.", namespace="faq")
    assert skipped == written


class FailingSet(MemoryStore):
    def set(self, *args: Any, **kwargs: Any) -> None:
        raise ConnectionError("store down")


def test_a_failed_write_returns_the_key_it_tried_after_bump_version() -> None:
    kv = FailingSet()
    cache = make(kv_store=kv)
    cache.bump_version()
    failed = cache.store("What is RAG?", "Retrieval.")
    assert cache.stats().errors >= 1
    ok = make(kv_store=MemoryStore())
    ok.bump_version()
    assert failed == ok.store("What is RAG?", "Retrieval.")
