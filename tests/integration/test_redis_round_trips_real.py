"""Issue 22: an exact lookup on Redis reads the namespace version and the key in one round
trip, and stays right when another process bumps the version."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis.connection

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder

pytestmark = pytest.mark.integration


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Redis commands sent (a pipeline counts once), as the backends bench counts them."""
    sent = [0]
    real = redis.connection.Connection.send_packed_command

    def counting(self: Any, *a: Any, **k: Any) -> Any:
        sent[0] += 1
        return real(self, *a, **k)

    monkeypatch.setattr(redis.connection.Connection, "send_packed_command", counting)
    return sent


def _cache(url: str, prefix: str) -> LayeredCache:
    return LayeredCache(path=None, redis_url=url, prefix=prefix, embedder=HashEmbedder(dim=16))


@pytest.fixture
def pair(redis_url: str) -> Iterator[tuple[LayeredCache, LayeredCache]]:
    prefix = f"rt-{uuid.uuid4().hex[:10]}"
    a, b = _cache(redis_url, prefix), _cache(redis_url, prefix)  # two readers, one Redis
    yield a, b
    a.close()
    b.close()


def test_an_exact_hit_is_one_round_trip(
    pair: tuple[LayeredCache, LayeredCache], trips: list[int]
) -> None:
    a, _ = pair
    a.store("order 17 status", "shipped", verbatim=True)
    a.lookup("order 17 status", verbatim=True)  # warms the connection
    before = trips[0]
    hit = a.lookup("order 17 status", verbatim=True)
    assert hit is not None and hit.response == "shipped"
    assert trips[0] - before == 1  # the version and the record in one pipeline
    before = trips[0]
    assert a.lookup("order 18 status", verbatim=True) is None
    assert trips[0] - before == 1


def test_a_version_bumped_elsewhere_is_seen_at_once(
    pair: tuple[LayeredCache, LayeredCache], trips: list[int]
) -> None:
    a, b = pair
    a.store("refund policy", "30 days", verbatim=True)
    hit = b.lookup("refund policy", verbatim=True)
    assert hit is not None and hit.response == "30 days"
    a.bump_version()  # b still guesses the old version
    before = trips[0]
    assert b.lookup("refund policy", verbatim=True) is None
    assert trips[0] - before == 2  # the guess was wrong: one more read at the new version
    a.store("refund policy", "14 days", verbatim=True)
    hit = b.lookup("refund policy", verbatim=True)
    assert hit is not None and hit.response == "14 days"
    a.bump_version()
    hit = asyncio.run(b.alookup("refund policy", verbatim=True))
    assert hit is None
    a.store("refund policy", "7 days", verbatim=True)
    hit = asyncio.run(b.alookup("refund policy", verbatim=True))
    assert hit is not None and hit.response == "7 days"


def test_a_store_checks_the_version_in_its_one_round_trip(
    pair: tuple[LayeredCache, LayeredCache], trips: list[int]
) -> None:
    a, b = pair
    a.store("warm up", "ok", verbatim=True)  # the connection, the script, housekeeping
    before = trips[0]
    key = a.store("invoice 9 total", "$120", verbatim=True)
    assert trips[0] - before == 1  # the version check and the write in one script
    hit = b.lookup("invoice 9 total", verbatim=True)
    assert hit is not None and hit.response == "$120" and hit.key == key
    b.bump_version()  # a still guesses the old version
    before = trips[0]
    moved = a.store("invoice 9 total", "$135", verbatim=True)
    assert trips[0] - before == 2  # refused at the old version, written at the new one
    assert moved != key
    hit = b.lookup("invoice 9 total", verbatim=True)
    assert hit is not None and hit.response == "$135" and hit.key == moved
    b.bump_version()
    asyncio.run(a.astore("invoice 9 total", "$150", verbatim=True))
    hit = b.lookup("invoice 9 total", verbatim=True)
    assert hit is not None and hit.response == "$150"
