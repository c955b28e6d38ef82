"""The bad-input cases on a real Redis (exact layer)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder
from tests.unit.core.test_bad_input import BadInput

pytestmark = pytest.mark.integration


class TestRedisBadInput(BadInput):
    @pytest.fixture
    def cache(self, redis_url: str) -> Iterator[LayeredCache]:
        cache = LayeredCache(
            path=None,
            redis_url=redis_url,
            embedder=HashEmbedder(),
            prefix=f"bad.{uuid.uuid4().hex[:8]}",
        )
        yield cache
        cache.clear()
        cache.close()
