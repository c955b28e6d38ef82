"""A slow leader on a real Redis: followers in other processes wait for its answer
(the lease renewed every third of its 0.2 s), no extra model call."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.unit.core.test_slow_leader import run_slow_leader

pytestmark = pytest.mark.integration


def test_processes_on_redis_wait_for_a_slow_leader(redis_url: str, tmp_path: Path) -> None:
    calls = run_slow_leader(redis_url, tmp_path, prefix=f"slow.{uuid.uuid4().hex[:8]}")
    assert calls == ["call"]
