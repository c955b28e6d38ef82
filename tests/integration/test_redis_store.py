"""RedisStore against a real redis-server (started by the ``redis_url`` fixture)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from agent_cache.errors import BackendError
from agent_cache.stores import RedisStore
from tests.unit.core.test_store_conformance import StoreConformance

pytestmark = pytest.mark.integration


@pytest.fixture
def raw(redis_url: str) -> Iterator[Any]:
    """A plain client for looking behind the store's back."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def prefix() -> str:
    return f"test:{uuid.uuid4().hex[:12]}:"


class TestRedisStore(StoreConformance):
    @pytest.fixture(params=["url", "bytes-client"])
    def store(
        self, request: pytest.FixtureRequest, redis_url: str, prefix: str
    ) -> Iterator[RedisStore]:
        client = None
        if request.param == "bytes-client":  # a user's client, decode_responses=False
            client = redis.Redis.from_url(redis_url)
        store = RedisStore(redis_url, client=client, prefix=prefix)
        yield store
        store.clear()
        store.close()
        if client is not None:
            client.close()

    def test_native_ttl_follows_expires_at(self, store: RedisStore, raw: Any) -> None:
        from agent_cache.stores.redis import _GRACE_MS  # housekeep still finds the indexes

        store.set("k", "1", namespace="ns", expires_at=1030.0, tags=["t"], now=1000.0)
        assert 29_000 < raw.pttl(f"{store.prefix}e:k") - _GRACE_MS <= 30_000
        assert 29_000 < raw.pttl(f"{store.prefix}kt:k") - _GRACE_MS <= 30_000
        store.set("k", "2", namespace="ns", expires_at=None, now=1000.0)
        assert raw.pttl(f"{store.prefix}e:k") == -1  # overwritten without expiry

    def test_natively_expired_records_leave_no_wrong_answers(
        self, store: RedisStore, raw: Any
    ) -> None:
        store.set("k", "1", namespace="old", expires_at=None, tags=["t"], now=0.0)
        raw.delete(f"{store.prefix}e:k", f"{store.prefix}kt:k")  # what a native expiry does
        assert store.get("k", now=0.0) is None
        assert store.keys_for_tag("t", limit=10) == []  # stale tag row pruned
        assert raw.scard(f"{store.prefix}t:3:old:t") == 0
        assert store.count("old") == 1  # approximate until the namespace is cleared
        store.set("k", "2", namespace="new", expires_at=None, now=0.0)
        assert store.clear("old") == 0
        assert store.get("k", now=0.0) == "2"
        assert store.count("old") == 0

    def test_clear_all_leaves_other_prefixes_and_counters(
        self, store: RedisStore, raw: Any
    ) -> None:
        raw.set("unrelated:key", "keep")
        other = RedisStore(client=raw, prefix=store.prefix + "x[*]?:")
        try:
            other.set("k", "other", namespace="ns", expires_at=None, now=0.0)
            store.set("k", "mine", namespace="ns", expires_at=None, tags=["t"], now=0.0)
            store.incr("c")
            assert store.clear() == 1
            assert raw.get("unrelated:key") == "keep"
            assert store.get_counter("c") == 1
            assert other.get("k", now=0.0) == "other"  # a longer prefix is another app
            leftovers = [k for k in raw.scan_iter(match=f"{store.prefix}*")]
            assert f"{store.prefix}c:c" in leftovers
            assert not [k for k in leftovers if k.startswith(f"{store.prefix}e:")]
        finally:
            other.clear()
            raw.delete("unrelated:key")
        assert raw.get(f"{store.prefix}c:c") == "1"

    def test_a_write_is_one_round_trip(
        self, store: RedisStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store.set("warm", "0", namespace="ns", expires_at=None, now=0.0)  # loads the script
        sent: list[int] = []
        real = redis.connection.Connection.send_packed_command

        def counted(conn: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(1)
            return real(conn, *args, **kwargs)

        monkeypatch.setattr(redis.connection.Connection, "send_packed_command", counted)
        store.set("k", "1", namespace="ns", expires_at=50.0, tags=["a", "b"], now=0.0)
        store.set("k", "2", namespace="other", expires_at=None, tags=["b"], now=0.0)
        assert len(sent) == 2  # one per write: reading the old tags is part of it
        monkeypatch.undo()
        assert store.get("k", now=0.0) == "2"
        assert store.keys_for_tag("b", limit=5, namespace="other") == ["k"]
        assert store.keys_for_tag("b", limit=5, namespace="ns") == []  # moved away
        assert store.keys_for_tag("a", limit=5) == []

    def test_non_ascii_namespaces_and_tags_index_by_character_length(
        self, store: RedisStore, raw: Any
    ) -> None:
        ns, other = "ünïcødé-租户", "другой"
        store.set("k", "1", namespace=ns, expires_at=None, tags=["tág", "x"], now=0.0)
        assert raw.smembers(store._t(ns, "tág")) == {"k"}  # the name Python builds
        assert raw.zscore(store._w(ns), "k") == 0.0
        store.set("k", "2", namespace=other, expires_at=None, tags=["x"], now=1.0)
        assert raw.scard(store._t(ns, "tág")) == 0 and raw.scard(store._t(ns, "x")) == 0
        assert raw.zscore(store._w(ns), "k") is None
        assert store.keys_for_tag("x", limit=5, namespace=other) == ["k"]
        assert store.clear(ns) == 0 and store.get("k", now=1.0) == "2"
        assert store.clear(other) == 1 and store.get("k", now=1.0) is None

    def test_a_client_passed_in_stays_usable(self, redis_url: str, prefix: str) -> None:
        client = redis.Redis.from_url(redis_url, decode_responses=True)
        with RedisStore(client=client, prefix=prefix) as store:
            store.incr("c")
        assert client.get(f"{prefix}c:c") == "1"  # the store did not close it
        client.delete(f"{prefix}c:c")
        client.close()


def test_an_unreachable_server_raises_backend_error() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = RedisStore(f"redis://127.0.0.1:{port}/0", prefix="p:")
    with pytest.raises(BackendError) as info:
        store.get("k", now=0.0)
    assert info.value.layer == "exact"
    assert isinstance(info.value.__cause__, redis.RedisError)
    store.close()


def test_redis_lock_is_exclusive_and_compare_and_delete(redis_url: str) -> None:
    from agent_cache.stores import RedisStore

    store = RedisStore(redis_url, prefix="locktest:")
    assert store.try_lock("x", "a", ttl=60)
    assert not store.try_lock("x", "b", ttl=60)
    store.unlock("x", "b")
    assert not store.try_lock("x", "b", ttl=60)
    store.unlock("x", "a")
    assert store.try_lock("x", "b", ttl=60)
    store.close()
