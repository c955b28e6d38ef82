"""An exact hit is served only if the record under its key is the one written there
(issue 19, point 1): a record moved under another key (a backup restored over the file,
another database's WAL) is a counted miss, and evicted.

``RecordChecks`` is a mixin (``make`` builds a cache); memory and SQLite run here, Redis
with a Chroma server in ``tests/integration/test_record_checks_real.py``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache import _request as rq
from agent_cache.testing import HashEmbedder

Make = Callable[[], LayeredCache]
A, B = "orig question 0", "other question 0"


def _overwrite(cache: LayeredCache, key: str, raw: str, namespace: str = "default") -> None:
    """What a restored or mixed-up store does: another record under ``key``."""
    cache.kv_store.set(key, raw, namespace=namespace, expires_at=None, now=cache.clock())


def _key(cache: LayeredCache, prompt: str, **kw: str) -> str:
    hit = cache.lookup(prompt, **kw)
    assert hit is not None
    return hit.key


class RecordChecks:
    def test_another_prompts_record_under_the_key_is_a_counted_miss(
        self, make: Make, caplog: pytest.LogCaptureFixture
    ) -> None:
        cache = make()
        cache.store(A, "answer A")
        cache.store(B, "other|0")
        key_a, key_b = _key(cache, A), _key(cache, B)
        raw_b = cache.kv_store.get(key_b, cache.clock())
        assert raw_b is not None
        _overwrite(cache, key_a, raw_b)
        with caplog.at_level(logging.WARNING, logger="agent_cache"):
            assert cache.lookup(A) is None  # never "other|0"
            assert cache.lookup(A) is None
        assert cache.stats().counters["record_mismatch"] == 1
        assert cache.kv_store.get(key_a, cache.clock()) is None  # evicted
        assert sum("not the one written there" in r.getMessage() for r in caplog.records) == 1
        hit = cache.lookup(B)
        assert hit is not None and hit.response == "other|0"  # the rightful one serves
        assert cache.get_or_compute(A, lambda: "answer A again") == "answer A again"
        hit = cache.lookup(A)
        assert hit is not None and hit.response == "answer A again"

    def test_a_record_without_its_key_is_checked_by_its_prompt(self, make: Make) -> None:
        cache = make()
        cache.store(A, "answer A")
        key_a = _key(cache, A)
        legacy = rq.Record(B, "other|0", created=0.0).encode()
        assert "k" not in json.loads(legacy)  # as written before records named their key
        _overwrite(cache, key_a, legacy)
        assert cache.lookup(A) is None
        assert cache.stats().counters["record_mismatch"] == 1
        same = rq.Record("  ORIG   question 0 ", "old answer", created=0.0).encode()
        _overwrite(cache, key_a, same)  # the same prompt once normalized: served
        hit = cache.lookup(A)
        assert hit is not None and hit.response == "old answer"

    def test_another_models_or_tenants_record_is_refused(self, make: Make) -> None:
        cache = make()
        cache.store(A, "mine", llm_string="model-x", namespace="tenant-a")
        cache.store(A, "theirs", llm_string="model-y", namespace="tenant-b")
        mine = _key(cache, A, llm_string="model-x", namespace="tenant-a")
        theirs = _key(cache, A, llm_string="model-y", namespace="tenant-b")
        raw = cache.kv_store.get(theirs, cache.clock())
        assert raw is not None
        _overwrite(cache, mine, raw, "tenant-a")  # same prompt, other model and tenant
        assert cache.lookup(A, llm_string="model-x", namespace="tenant-a") is None
        assert cache.stats().counters["record_mismatch"] == 1

    def test_a_semantic_candidate_whose_record_moved_is_not_served(self, make: Make) -> None:
        cache = make()
        cache.store("How do I reset my password for account 7?", "reset it")
        cache.store("what is the capital of France", "Paris")
        key = _key(cache, "How do I reset my password for account 7?")
        raw = cache.kv_store.get(_key(cache, "what is the capital of France"), cache.clock())
        assert raw is not None
        _overwrite(cache, key, raw)
        assert cache.lookup("how do I reset my password for account 7 !") is None
        assert cache.stats().counters["record_mismatch"] == 1
        assert cache.kv_store.get(key, cache.clock()) is None


class TestMemoryRecordChecks(RecordChecks):
    @pytest.fixture
    def make(self) -> Make:
        return lambda: LayeredCache(path=None, embedder=HashEmbedder(dim=256))


class TestSQLiteRecordChecks(RecordChecks):
    @pytest.fixture
    def make(self, tmp_path: Path) -> Iterator[Make]:
        made: list[LayeredCache] = []

        def make() -> LayeredCache:
            made.append(LayeredCache(path=tmp_path / "c", embedder=HashEmbedder(dim=256)))
            return made[-1]

        yield make
        for cache in made:
            cache.close()


# ---------------------------------------------------------------------- corrupt pages
def _filled_then_zeroed(path: Path) -> list[str]:
    """A cache file with 300 entries, then six pages zeroed a third of the way in."""
    prompts = [f"question number {i} " + "x" * 200 for i in range(300)]
    with LayeredCache(path=path, embedder=HashEmbedder(dim=64)) as cache:
        for i, prompt in enumerate(prompts):
            cache.store(prompt, f"answer {i} " + "y" * 300)
    db = path / "exact.sqlite3"
    pages = db.stat().st_size // 4096
    with db.open("r+b") as f:
        for page in range(pages // 3, pages // 3 + 6):
            f.seek(page * 4096)
            f.write(b"\0" * 4096)
    return prompts


def test_a_corrupt_page_met_by_a_read_is_a_backend_error_naming_the_file(
    tmp_path: Path,
) -> None:
    from agent_cache.errors import BackendError

    prompts = _filled_then_zeroed(tmp_path)
    db = tmp_path / "exact.sqlite3"
    raised: list[BackendError] = []
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(dim=64)) as cache:
        for prompt in prompts:
            try:
                hit = cache.lookup(prompt)
            except BackendError as exc:
                raised.append(exc)
            else:
                assert hit is not None and hit.matched_prompt == prompt
        assert cache.stats().errors == 0  # never a silent miss
    assert raised and all(str(db) in str(e) and "corrupt" in str(e) for e in raised)
    assert not list(tmp_path.glob("*.corrupt-*"))  # left for the operator


def test_a_corrupt_page_met_by_a_read_is_rebuilt_with_on_corrupt_rebuild(
    tmp_path: Path,
) -> None:
    prompts = _filled_then_zeroed(tmp_path)
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(dim=64), on_corrupt="rebuild") as c:
        with pytest.warns(RuntimeWarning, match="moved to"):
            for prompt in prompts:
                c.lookup(prompt)
        assert c.stats().errors == 1  # the one lookup that met the page: a miss
        assert len(list(tmp_path.glob("exact.sqlite3.corrupt-*"))) == 1
        c.store("after the rebuild?", "fresh")
        hit = c.lookup("after the rebuild?")
        assert hit is not None and hit.response == "fresh"
        assert c.lookup(prompts[-1]) is None  # the new file starts empty
