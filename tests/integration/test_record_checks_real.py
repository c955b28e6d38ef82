"""The record checks of ``tests/unit/core/test_record_checks.py`` on Redis + a Chroma server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder
from tests.unit.core.test_record_checks import Make, RecordChecks

pytestmark = pytest.mark.integration


class TestRedisChromaRecordChecks(RecordChecks):
    @pytest.fixture
    def make(self, redis_url: str, chroma_url: str) -> Iterator[Make]:
        made: list[LayeredCache] = []

        def make() -> LayeredCache:
            cache = LayeredCache(
                path=None,
                redis_url=redis_url,
                chroma_url=chroma_url,
                embedder=HashEmbedder(dim=256),
                prefix=f"records.{uuid.uuid4().hex[:8]}",
            )
            made.append(cache)
            return cache

        yield make
        for cache in made:
            cache.clear()
            cache.close()
