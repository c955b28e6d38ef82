"""Every exact-layer store runs through the same conformance cases.

``StoreConformance`` is a mixin (cachetools' ``CacheTestMixin``): a subclass provides a
``store`` fixture that yields a fresh, empty store. Memory and SQLite run here; Redis runs
the same mixin in ``tests/integration/test_redis_store.py`` against a real server.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import agent_cache.stores
from agent_cache.errors import BackendError, ConfigurationError, MissingDependencyError
from agent_cache.protocols import KVStore
from agent_cache.stores import MemoryStore, SQLiteStore, StoredEntry
from agent_cache.stores import sqlite as sqlite_module

UNICODE = [
    "héllo wörld",
    "日本語のテキスト",
    "emoji 🚀🌍",
    "مرحبا",
    "e\u0301 combining",
    '"quoted"',
]


class StoreConformance:
    """The behaviour every :class:`KVStore` must show. Subclasses provide ``store``."""

    def test_satisfies_protocol(self, store: KVStore) -> None:
        assert isinstance(store, KVStore)

    def test_get_set_roundtrip(self, store: KVStore) -> None:
        assert store.get("k", now=0.0) is None
        store.set("k", '{"a": 1}', namespace="ns", expires_at=None, now=0.0)
        assert store.get("k", now=1e12) == '{"a": 1}'
        assert store.get("other", now=0.0) is None

    def test_set_overwrites_value(self, store: KVStore) -> None:
        store.set("k", '"one"', namespace="ns", expires_at=None, now=0.0)
        store.set("k", '"two"', namespace="ns", expires_at=None, now=0.0)
        assert store.get("k", now=0.0) == '"two"'
        assert store.count() == 1

    def test_expiry_follows_the_now_argument(self, store: KVStore) -> None:
        store.set("k", '"v"', namespace="ns", expires_at=100.0, now=0.0)
        assert store.get("k", now=99.5) == '"v"'
        assert store.get_many(["k"], now=99.5) == {"k": '"v"'}
        assert store.get("k", now=100.0) is None
        assert store.get_many(["k"], now=100.0) == {}
        assert store.get("k", now=5000.0) is None

    def test_expiry_is_relative_to_the_writers_clock(self, store: KVStore) -> None:
        # a fake clock far from wall time: expiry is expires_at vs now, not wall time
        store.set("k", '"v"', namespace="ns", expires_at=1_000_060.0, now=1_000_000.0)
        assert store.get("k", now=1_000_030.0) == '"v"'
        assert store.get("k", now=1_000_061.0) is None

    def test_set_already_expired_removes_the_key(self, store: KVStore) -> None:
        store.set("k", '"old"', namespace="ns", expires_at=None, tags=["t"], now=0.0)
        store.set("k", '"new"', namespace="ns", expires_at=5.0, tags=["t"], now=10.0)
        assert store.get("k", now=10.0) is None
        assert store.keys_for_tag("t", limit=10) == []

    def test_get_many(self, store: KVStore) -> None:
        store.set("a", "1", namespace="ns", expires_at=None, now=0.0)
        store.set("b", "2", namespace="ns", expires_at=None, now=0.0)
        store.set("gone", "3", namespace="ns", expires_at=1.0, now=0.0)
        got = store.get_many(["a", "b", "missing", "gone", "a"], now=2.0)
        assert got == {"a": "1", "b": "2"}
        assert store.get_many([], now=0.0) == {}

    def test_get_many_beyond_one_query_chunk(self, store: KVStore) -> None:
        keys = [f"key-{i}" for i in range(1234)]
        for i, key in enumerate(keys):
            store.set(key, str(i), namespace="ns", expires_at=None, now=0.0)
        got = store.get_many([*keys, "missing"], now=0.0)
        assert len(got) == 1234
        assert got["key-0"] == "0" and got["key-1233"] == "1233"

    def test_delete_counts_existing_and_removes_tags(self, store: KVStore) -> None:
        store.set("a", "1", namespace="ns", expires_at=None, tags=["doc:1", "x"], now=0.0)
        store.set("b", "2", namespace="ns", expires_at=None, tags=["doc:1"], now=0.0)
        assert store.delete(["a", "missing", "a"]) == 1
        assert store.get("a", now=0.0) is None
        assert store.keys_for_tag("doc:1", limit=10) == ["b"]
        assert store.keys_for_tag("x", limit=10) == []
        assert store.delete([]) == 0
        assert store.count() == 1

    def test_keys_for_tag_in_batches(self, store: KVStore) -> None:
        tagged = {f"k{i}" for i in range(25)}
        for key in sorted(tagged):
            store.set(key, "1", namespace="ns", expires_at=None, tags=["doc:7"], now=0.0)
        store.set("untagged", "1", namespace="ns", expires_at=None, tags=["doc:8"], now=0.0)
        seen: set[str] = set()
        rounds = 0
        while batch := store.keys_for_tag("doc:7", limit=10):
            rounds += 1
            assert len(batch) <= 10 and len(set(batch)) == len(batch)
            assert not seen.intersection(batch)
            seen.update(batch)
            store.delete(batch)
            assert rounds <= 5
        assert seen == tagged
        assert rounds == 3
        assert store.get("untagged", now=0.0) == "1"
        assert store.keys_for_tag("doc:7", limit=0) == []
        assert store.keys_for_tag("never-used", limit=10) == []

    def test_keys_for_tag_with_several_tags(self, store: KVStore) -> None:
        store.set("a", "1", namespace="ns", expires_at=None, tags=["x", "y", "x"], now=0.0)
        store.set("b", "1", namespace="other", expires_at=None, tags=["y"], now=0.0)
        assert store.keys_for_tag("x", limit=10) == ["a"]
        assert sorted(store.keys_for_tag("y", limit=10)) == ["a", "b"]

    def test_overwrite_replaces_tags(self, store: KVStore) -> None:
        store.set("k", "1", namespace="ns", expires_at=None, tags=["a", "b"], now=0.0)
        store.set("k", "2", namespace="ns", expires_at=None, tags=["b", "c"], now=0.0)
        assert store.keys_for_tag("a", limit=10) == []
        assert store.keys_for_tag("b", limit=10) == ["k"]
        assert store.keys_for_tag("c", limit=10) == ["k"]
        store.set("k", "3", namespace="ns", expires_at=None, now=0.0)
        assert store.keys_for_tag("b", limit=10) == []

    def test_overwrite_moves_namespace(self, store: KVStore) -> None:
        store.set("k", "1", namespace="old", expires_at=None, now=0.0)
        store.set("k", "2", namespace="new", expires_at=None, now=0.0)
        assert store.count("old") == 0
        assert store.count("new") == 1
        assert store.clear("old") == 0
        assert store.get("k", now=0.0) == "2"

    def test_clear_namespace_only_clears_that_namespace(self, store: KVStore) -> None:
        for i in range(3):
            store.set(f"a{i}", "1", namespace="alpha", expires_at=None, tags=["t"], now=0.0)
        store.set("b0", "2", namespace="beta", expires_at=None, tags=["t"], now=0.0)
        assert store.clear("alpha") == 3
        assert store.get_many(["a0", "a1", "a2"], now=0.0) == {}
        assert store.get("b0", now=0.0) == "2"
        assert store.keys_for_tag("t", limit=10) == ["b0"]
        assert store.count("alpha") == 0
        assert store.count("beta") == 1
        assert store.clear("never-used") == 0

    def test_clear_all_keeps_counters(self, store: KVStore) -> None:
        store.set("a", "1", namespace="alpha", expires_at=None, tags=["t"], now=0.0)
        store.set("b", "2", namespace="beta", expires_at=None, now=0.0)
        store.incr("version:alpha")
        assert store.clear() == 2
        assert store.count() == 0
        assert store.get_many(["a", "b"], now=0.0) == {}
        assert store.keys_for_tag("t", limit=10) == []
        assert store.get_counter("version:alpha") == 1
        store.set("a", "3", namespace="alpha", expires_at=None, now=0.0)
        assert store.get("a", now=0.0) == "3"

    def test_incr_and_get_counter(self, store: KVStore) -> None:
        assert store.get_counter("c") == 0
        assert [store.incr("c") for _ in range(3)] == [1, 2, 3]
        assert store.get_counter("c") == 3
        assert store.incr("d") == 1
        assert store.get_counter("c") == 3

    def test_incr_is_atomic_across_threads(self, store: KVStore) -> None:
        results: list[int] = []
        lock = threading.Lock()

        def work() -> None:
            mine = [store.incr("hits") for _ in range(50)]
            with lock:
                results.extend(mine)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == list(range(1, 401))
        assert store.get_counter("hits") == 400

    def test_count(self, store: KVStore) -> None:
        assert store.count() == 0
        store.set("a", "1", namespace="alpha", expires_at=None, now=0.0)
        store.set("b", "1", namespace="alpha", expires_at=None, now=0.0)
        store.set("c", "1", namespace="beta", expires_at=None, now=0.0)
        assert store.count() == 3
        assert store.count("alpha") == 2
        assert store.count("beta") == 1
        assert store.count("gamma") == 0

    @pytest.mark.parametrize("text", UNICODE)
    def test_unicode_values_keys_and_tags(self, store: KVStore, text: str) -> None:
        store.set(text, text, namespace=text, expires_at=None, tags=[text], now=0.0)
        assert store.get(text, now=0.0) == text
        assert store.get_many([text], now=0.0) == {text: text}
        assert store.keys_for_tag(text, limit=5) == [text]
        assert store.count(text) == 1

    def test_large_value(self, store: KVStore) -> None:
        value = '"' + "x" * 1_000_000 + '"'
        store.set("big", value, namespace="ns", expires_at=None, now=0.0)
        assert store.get("big", now=0.0) == value

    def test_close_is_idempotent(self, store: KVStore) -> None:
        store.set("k", "1", namespace="ns", expires_at=None, now=0.0)
        store.close()
        store.close()

    # -- iteration (export) and counts per namespace (stats) ---------------------------

    def test_entries_yield_live_records_with_tags_and_expiry(self, store: KVStore) -> None:
        store.set("a", '"1"', namespace="alpha", expires_at=None, tags=["z", "doc"], now=0.0)
        store.set("b", '"2"', namespace="alpha", expires_at=50.0, now=0.0)
        store.set("c", '"3"', namespace="beta", expires_at=500.0, tags=["t"], now=0.0)
        entries = {e.key: e for e in store.entries(100.0)}
        assert set(entries) == {"a", "c"}  # b expired at 50
        assert entries["a"] == StoredEntry("a", "alpha", '"1"', None, ("doc", "z"))
        assert entries["c"] == StoredEntry("c", "beta", '"3"', 500.0, ("t",))
        only = [e.key for e in store.entries(0.0, "alpha")]
        assert sorted(only) == ["a", "b"]
        assert list(store.entries(0.0, "gamma")) == []

    def test_entries_page_through_many_records_once_each(self, store: KVStore) -> None:
        keys = [f"k{i:03d}" for i in range(1203)]
        for i, key in enumerate(keys):
            store.set(key, str(i), namespace="ns" if i % 3 else "other", expires_at=None, now=0.0)
        seen = [e.key for e in store.entries(0.0, batch=7)]
        assert len(seen) == len(keys) and set(seen) == set(keys)
        ns = [e.key for e in store.entries(0.0, "ns", batch=500)]
        assert len(ns) == len(set(ns)) == 802

    def test_entries_follow_a_namespace_move(self, store: KVStore) -> None:
        store.set("k", '"1"', namespace="alpha", expires_at=None, now=0.0)
        store.set("k", '"2"', namespace="beta", expires_at=None, now=0.0)
        assert [(e.key, e.namespace, e.value) for e in store.entries(0.0)] == [("k", "beta", '"2"')]
        assert list(store.entries(0.0, "alpha")) == []

    def test_namespace_counts(self, store: KVStore) -> None:
        assert store.namespace_counts() == {}
        for key, ns in (("a", "alpha"), ("b", "alpha"), ("c", "beta")):
            store.set(key, "1", namespace=ns, expires_at=None, now=0.0)
        assert store.namespace_counts() == {"alpha": 2, "beta": 1}
        store.clear("alpha")
        assert store.namespace_counts() == {"beta": 1}

    def test_evict_over_keeps_a_namespace_to_its_quota_and_touches_no_other(
        self, store: KVStore
    ) -> None:
        # quotas (LayeredCache(quotas=...)) stand on this on every backend, Redis included
        for i in range(10):
            store.set(f"n{i}", '"n"', namespace="noisy", expires_at=None, tags=["t"], now=float(i))
        for i in range(3):
            store.set(f"q{i}", '"q"', namespace="quiet", expires_at=None, now=float(i))
        store.set("n0", '"moved"', namespace="quiet", expires_at=None, now=20.0)  # not noisy's
        evict_over = store.evict_over  # type: ignore[attr-defined]  # not in KVStore: optional
        assert evict_over("noisy", 5) == ["n1", "n2", "n3", "n4"]
        assert store.count("noisy") == 5
        assert store.count("quiet") == 4
        assert store.get("n0", now=30.0) == '"moved"'
        assert set(store.keys_for_tag("t", 100, namespace="noisy")) == {
            f"n{i}" for i in range(5, 10)
        }
        assert evict_over("noisy", 5) == []
        assert evict_over("quiet", 10) == []


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    def store(self) -> Iterator[MemoryStore]:
        with MemoryStore() as store:
            yield store

    def test_lru_eviction_drops_least_recently_used(self) -> None:
        store = MemoryStore(max_entries=3)
        for key in ("a", "b", "c"):
            store.set(key, key, namespace="ns", expires_at=None, tags=[f"t:{key}"], now=0.0)
        assert store.get("a", now=0.0) == "a"  # a is now the most recently used
        store.set("d", "d", namespace="ns", expires_at=None, tags=["t:d"], now=0.0)
        assert store.get("b", now=0.0) is None
        assert store.get_many(["a", "c", "d"], now=0.0) == {"a": "a", "c": "c", "d": "d"}
        assert store.keys_for_tag("t:b", limit=10) == []
        assert store.count() == 3

    def test_expired_read_removes_the_record(self) -> None:
        store = MemoryStore()
        store.set("k", "1", namespace="ns", expires_at=5.0, tags=["t"], now=0.0)
        assert store.count() == 1
        assert store.get("k", now=6.0) is None
        assert store.count() == 0
        assert store.keys_for_tag("t", limit=10) == []

    @pytest.mark.parametrize("bad", [0, -1])
    def test_rejects_non_positive_size(self, bad: int) -> None:
        with pytest.raises(ConfigurationError):
            MemoryStore(max_entries=bad)


class TestSQLiteStore(StoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SQLiteStore]:
        with SQLiteStore(tmp_path / "exact.db") as store:
            yield store

    def test_constructor_does_no_io_and_first_use_creates_parents(self, tmp_path: Path) -> None:
        path = tmp_path / "deep" / "er" / "exact.db"
        store = SQLiteStore(path)
        assert not path.parent.exists()
        store.set("k", "1", namespace="ns", expires_at=None, now=0.0)
        assert path.exists()
        store.close()

    def test_uses_wal_mode(self, tmp_path: Path) -> None:
        path = tmp_path / "exact.db"
        with SQLiteStore(path) as store:
            store.set("k", "1", namespace="ns", expires_at=None, now=0.0)
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            conn.close()

    def test_persists_across_instances(self, tmp_path: Path) -> None:
        path = tmp_path / "exact.db"
        with SQLiteStore(path) as store:
            store.set("k", '"v"', namespace="ns", expires_at=None, tags=["t"], now=0.0)
            store.incr("c")
        with SQLiteStore(path) as store:
            assert store.get("k", now=0.0) == '"v"'
            assert store.keys_for_tag("t", limit=1) == ["k"]
            assert store.get_counter("c") == 1

    def test_reopens_after_close(self, store: SQLiteStore) -> None:
        store.set("k", "1", namespace="ns", expires_at=None, now=0.0)
        store.close()
        assert store.get("k", now=0.0) == "1"

    def test_purge_expired(self, store: SQLiteStore) -> None:
        store.set("old", "1", namespace="ns", expires_at=10.0, tags=["t"], now=0.0)
        store.set("edge", "1", namespace="ns", expires_at=20.0, tags=["t"], now=0.0)
        store.set("live", "1", namespace="ns", expires_at=30.0, tags=["t"], now=0.0)
        store.set("forever", "1", namespace="ns", expires_at=None, tags=["t"], now=0.0)
        assert store.count() == 4  # expired records are counted until purged
        assert store.purge_expired(now=20.0) == 2
        assert store.count() == 2
        assert sorted(store.keys_for_tag("t", limit=10)) == ["forever", "live"]
        assert store.purge_expired(now=20.0) == 0

    def test_incr_without_returning_clause(
        self, store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(sqlite_module, "_HAS_RETURNING", False)
        assert [store.incr("c") for _ in range(3)] == [1, 2, 3]
        assert store.get_counter("c") == 3

    def test_corrupt_file_raises_backend_error(self, tmp_path: Path) -> None:
        path = tmp_path / "exact.db"
        path.write_bytes(b"this is not a database" * 100)
        store = SQLiteStore(path)
        with pytest.raises(BackendError) as info:
            store.get("k", now=0.0)
        assert info.value.layer == "exact"
        assert isinstance(info.value.__cause__, sqlite3.Error)

    def test_directory_path_raises_backend_error(self, tmp_path: Path) -> None:
        with pytest.raises(BackendError) as info:
            SQLiteStore(tmp_path).set("k", "1", namespace="ns", expires_at=None, now=0.0)
        assert isinstance(info.value.__cause__, sqlite3.Error)

    @pytest.mark.parametrize("bad", ["", ":memory:", "file:x?mode=memory"])
    def test_rejects_non_file_paths(self, bad: str) -> None:
        with pytest.raises(ConfigurationError):
            SQLiteStore(bad)


class TestStoresPackage:
    def test_exported_names(self) -> None:
        assert sorted(agent_cache.stores.__all__) == [
            "MemoryStore",
            "RedisStore",
            "SQLiteStore",
            "StoredEntry",
        ]

    def test_redis_store_is_imported_lazily(self) -> None:
        from agent_cache.stores.redis import RedisStore

        assert agent_cache.stores.RedisStore is RedisStore
        with pytest.raises(AttributeError):
            _ = agent_cache.stores.NoSuchStore

    def test_redis_store_names_the_extra_when_redis_is_missing(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from agent_cache.stores.redis import RedisStore

        monkeypatch.setitem(sys.modules, "redis", None)  # makes `import redis` fail
        with pytest.raises(MissingDependencyError, match=r"agent-cache\[redis\]"):
            RedisStore("redis://127.0.0.1:1/0")

    def test_redis_store_never_closes_a_client_passed_in(self) -> None:
        from agent_cache.stores.redis import RedisStore

        class Client:
            closed = False

            def close(self) -> None:
                self.closed = True

        client = Client()
        RedisStore(client=client).close()
        assert client.closed is False

    def test_redis_store_constructor_does_no_io(self) -> None:
        from agent_cache.stores.redis import RedisStore

        # nothing listens on port 1: building and closing the store must not connect
        store = RedisStore("redis://127.0.0.1:1/0", prefix="p:")
        assert store.prefix == "p:"
        store.close()
