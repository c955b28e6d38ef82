"""Exact k-NN: batched search and combined concurrent queries give the brute-force answer."""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from agent_cache.errors import ConfigurationError
from agent_cache.protocols import VectorMatch
from agent_cache.stores import SQLiteStore
from agent_cache.vectors import MemoryVectorStore, SQLiteVectorStore, _int8, _search
from agent_cache.vectors._search import GEMM_FROM, Combiner, Query, search_threads, similarities

DIM = 16
SCOPES = ("s0", "s1", "s2")


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class _Data:
    """Rows in three scopes, some expiring, and a brute-force float64 reference."""

    def __init__(self, n: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.ids = [f"r{i}" for i in range(n)]
        self.row = {id_: i for i, id_ in enumerate(self.ids)}
        self.vectors = _unit(rng, n)
        self.scopes = [SCOPES[i] for i in rng.integers(0, len(SCOPES), n)]
        self.expires = [float(x) if x < 50 else math.inf for x in rng.integers(0, 100, n)]
        self.queries = _unit(rng, 40)

    def metas(self) -> list[dict[str, object]]:
        return [
            {"scope": s, "namespace": "default", "expires_at": e, "key": i}
            for i, s, e in zip(self.ids, self.scopes, self.expires, strict=True)
        ]

    def reference(self, query: np.ndarray, k: int, scope: str, now: float) -> list[str]:
        sims = self.vectors.astype(np.float64) @ query.astype(np.float64)
        alive = (np.array(self.scopes) == scope) & (np.array(self.expires) > now)
        rows = np.flatnonzero(alive)
        rows = rows[np.argsort(-sims[rows], kind="stable")]
        return [self.ids[i] for i in rows[:k]]


def _same(found: list[VectorMatch], expected: list[str], data: _Data, query: np.ndarray) -> None:
    """The same ids as the reference, up to the order of rows whose similarities tie
    within float32 rounding."""
    assert len(found) == len(expected)

    def sim(id_: str) -> float:
        return float(data.vectors[data.row[id_]] @ query)

    for got, want in zip(found, expected, strict=True):
        assert got.id == want or abs(sim(got.id) - sim(want)) < 1e-5
        assert got.score == pytest.approx(min(1.0, max(0.0, sim(got.id))), abs=1e-5)


@pytest.fixture(params=["memory", "sqlite"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[MemoryVectorStore | SQLiteVectorStore]:
    if request.param == "memory":
        yield MemoryVectorStore()
        return
    vs = SQLiteVectorStore(tmp_path / "v.sqlite3")
    yield vs
    vs.close()


@pytest.mark.parametrize("n", [7, 1061, 3077])
def test_query_and_query_many_match_brute_force(
    store: MemoryVectorStore | SQLiteVectorStore, n: int
) -> None:
    data = _Data(n)
    store.add(data.ids, data.vectors, data.metas())
    for now in (0.0, 30.0):
        for k in (1, 5, n + 3):
            for scope in SCOPES:
                for q in data.queries[:3]:
                    _same(
                        store.query(q, k=k, scope=scope, now=now),
                        data.reference(q, k, scope, now),
                        data,
                        q,
                    )
            for b in (2, GEMM_FROM - 1, GEMM_FROM, len(data.queries)):  # both block paths
                queries = data.queries[:b]
                scopes = [SCOPES[i % len(SCOPES)] for i in range(b)]
                got = store.query_many(queries, k=k, scope=scopes, now=now)
                assert len(got) == b
                for q, s, found in zip(queries, scopes, got, strict=True):
                    _same(found, data.reference(q, k, s, now), data, q)


def test_query_many_validates_and_keeps_metadata(
    store: MemoryVectorStore | SQLiteVectorStore,
) -> None:
    data = _Data(20)
    store.add(data.ids, data.vectors, data.metas())
    assert store.query_many(data.queries[:3], k=0, scope="s0", now=0.0) == [[], [], []]
    with pytest.raises(ConfigurationError):
        store.query_many(data.queries[:3], k=2, scope=["s0"], now=0.0)
    with pytest.raises(ConfigurationError):
        store.query_many(np.zeros((2, 3, DIM), dtype=np.float32), k=2, scope="s0", now=0.0)
    with pytest.raises(ConfigurationError):  # a query of another dimension
        store.query_many(np.ones((1, DIM + 1), dtype=np.float32), k=2, scope="s0", now=0.0)
    (found,) = store.query_many(data.queries[:1], k=3, scope="s1", now=0.0)
    assert found and all(m.metadata["key"] == m.id for m in found)
    found[0].metadata["key"] = "changed"  # each answer owns its metadata
    (again,) = store.query_many(data.queries[:1], k=3, scope="s1", now=0.0)
    assert again[0].metadata["key"] == again[0].id


def test_similarities_equal_the_plain_product_on_every_path() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 1024, 2348):
        matrix = _unit(rng, n)
        for b in (1, 2, GEMM_FROM - 1, GEMM_FROM, 9):
            queries = _unit(rng, b)
            got = similarities(matrix, queries)
            assert got.shape == (b, n) and got.dtype == np.float32
            np.testing.assert_allclose(got, queries @ matrix.T, atol=1e-5)


class _FakeBlas:
    """A threadpoolctl library controller that records every change of thread count."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.sets: list[int] = []

    def get_num_threads(self) -> int:
        return self.threads

    def set_num_threads(self, threads: int) -> None:
        self.sets.append(threads)
        self.threads = threads


def test_the_blas_thread_count_is_held_not_put_back_after_each_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # putting OpenBLAS's pool back after every search woke its threads, which then spun
    # on the core the embedder needed (k-NN 3-11 ms instead of 0.5 ms at 5,000 rows)
    monkeypatch.setenv("AGENT_CACHE_SEARCH_THREADS", "1")
    fake = _FakeBlas(threads=2)
    blas = _search._BlasThreads()
    blas._libs = [fake]
    monkeypatch.setattr(_search, "_BLAS", blas)
    rng = np.random.default_rng(5)
    matrix = _unit(rng, 64)
    for b in (1, 1, GEMM_FROM, 1, 2) * 10:
        similarities(matrix, _unit(rng, b))
    assert search_threads() == 1
    assert fake.threads == 1 and fake.sets == [1]
    fake.threads = 3  # someone else changes it: the next search holds it at 1 again
    similarities(matrix, _unit(rng, 1))
    assert fake.threads == 1 and fake.sets == [1, 1]


def test_concurrent_queries_share_a_pass_and_get_their_own_answers(
    store: MemoryVectorStore | SQLiteVectorStore,
) -> None:
    data = _Data(3000)
    store.add(data.ids, data.vectors, data.metas())
    combiner: Combiner = store._combiner
    inner = combiner._serve
    entered, release = threading.Event(), threading.Event()
    sizes: list[int] = []

    def slow_first(batch: list[Query]) -> None:
        sizes.append(len(batch))
        if len(sizes) == 1:
            entered.set()
            assert release.wait(10)
        inner(batch)

    combiner._serve = slow_first
    results: dict[int, list[VectorMatch]] = {}

    def ask(i: int) -> None:
        results[i] = store.query(data.queries[i], k=4, scope=SCOPES[i % 3], now=20.0)

    first = threading.Thread(target=ask, args=(0,))
    first.start()
    assert entered.wait(10)
    others = [threading.Thread(target=ask, args=(i,)) for i in range(1, 9)]
    for t in others:
        t.start()
    while len(combiner._pending) < 8:  # all eight queue behind the running pass
        threading.Event().wait(0.001)
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert sizes == [1, 8]  # the eight waiting queries took one pass together
    for i in range(9):
        q = data.queries[i]
        _same(results[i], data.reference(q, 4, SCOPES[i % 3], 20.0), data, q)


def test_a_lone_caller_never_waits_and_an_error_stays_with_its_query() -> None:
    calls: list[list[str]] = []

    def serve(batch: list[Query]) -> None:
        calls.append([q.scope for q in batch])
        for q in batch:
            if q.scope == "bad":
                q.error = ConfigurationError("bad query")

    combiner = Combiner(serve)
    one = [Query(np.ones(2, dtype=np.float32), 1, "ok", 0.0)]
    combiner.run(one)
    assert calls == [["ok"]] and one[0].done and one[0].error is None
    pair = [Query(np.ones(2, dtype=np.float32), 1, s, 0.0) for s in ("ok", "bad")]
    combiner.run(pair)
    assert calls[-1] == ["ok", "bad"] and pair[0].error is None
    assert isinstance(pair[1].error, ConfigurationError)

    def broken(batch: list[Query]) -> None:
        raise RuntimeError("store down")

    failing = Combiner(broken)
    queries = [Query(np.ones(2, dtype=np.float32), 1, "x", 0.0)]
    failing.run(queries)
    assert isinstance(queries[0].error, RuntimeError) and queries[0].done
    assert failing.passes == 1 and failing.queries == 1


def test_query_many_sees_another_instances_new_rows(tmp_path: Path) -> None:
    kv = SQLiteStore(tmp_path / "shared.sqlite3")
    reader, writer = SQLiteVectorStore(kv), SQLiteVectorStore(tmp_path / "shared.sqlite3")
    data = _Data(50)
    writer.add(data.ids[:25], data.vectors[:25], data.metas()[:25])
    first = reader.query_many(data.queries[:4], k=50, scope="s0", now=0.0)
    writer.add(data.ids[25:], data.vectors[25:], data.metas()[25:])
    writer.delete([data.ids[0]])
    later = reader.query_many(data.queries[:4], k=50, scope="s0", now=0.0)
    for q, found in zip(data.queries[:4], later, strict=True):
        _same(found, [i for i in data.reference(q, 50, "s0", 0.0) if i != data.ids[0]], data, q)
    assert sum(map(len, later)) > sum(map(len, first))
    writer.close()
    reader.close()
    kv.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_searches_although_the_parent_was_mid_search() -> None:
    store = MemoryVectorStore()
    data = _Data(50)
    store.add(data.ids, data.vectors, data.metas())
    inner = store._combiner._serve
    entered, release = threading.Event(), threading.Event()

    def stuck(batch: list[Query]) -> None:
        entered.set()
        release.wait(10)
        inner(batch)

    store._combiner._serve = stuck
    parent = threading.Thread(target=store.query, args=(data.queries[0],), kwargs=_ask)
    parent.start()
    assert entered.wait(10)  # the parent's combiner is busy at the fork
    pid = os.fork()
    if pid == 0:  # the child: the parent's busy flag and waiters are not its own
        store._combiner._serve = inner
        found = store.query(data.queries[1], k=3, scope="s0", now=0.0)
        os._exit(0 if [m.id for m in found] == data.reference(data.queries[1], 3, "s0", 0.0) else 1)
    release.set()
    parent.join(10)
    deadline = time.monotonic() + 20
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the parent's search")
    assert os.waitstatus_to_exitcode(done[1]) == 0


_ask = {"k": 3, "scope": "s0", "now": 0.0}


needs_ort = pytest.mark.skipif(not _int8.available(), reason="needs agent-cache[onnx]")


@pytest.fixture
def sync_int8(monkeypatch: pytest.MonkeyPatch) -> None:
    """Build the int8 copy inside the search that finds it due (the synchronous path)."""
    monkeypatch.setattr(_int8, "BACKGROUND", False)


@needs_ort
@pytest.mark.parametrize("n", [300, 3077])
def test_the_int8_first_pass_gives_the_exact_top_k(
    store: MemoryVectorStore | SQLiteVectorStore,
    n: int,
    monkeypatch: pytest.MonkeyPatch,
    sync_int8: None,
) -> None:
    monkeypatch.setattr(_int8, "MIN_ROWS", 64)
    data = _Data(n, seed=n)
    store.add(data.ids, data.vectors, data.metas())
    for now in (0.0, 30.0):
        for k in (1, 5, 40):
            for scope in SCOPES:
                got = store.query_many(data.queries, k=k, scope=scope, now=now)
                for q, found in zip(data.queries, got, strict=True):
                    _same(found, data.reference(q, k, scope, now), data, q)
    partitions = store._partitions
    assert any(p.index is not None for p in partitions.values())  # the int8 pass ran


@needs_ort
def test_the_int8_pass_follows_writes_moves_and_deletes(
    store: MemoryVectorStore | SQLiteVectorStore, monkeypatch: pytest.MonkeyPatch, sync_int8: None
) -> None:
    monkeypatch.setattr(_int8, "MIN_ROWS", 64)
    monkeypatch.setattr(_int8, "REBUILD_SHARE", 0.5)  # keep the stale copy for a while
    data = _Data(400, seed=7)
    store.add(data.ids, data.vectors, data.metas())
    store.query(data.queries[0], k=3, scope="s0", now=0.0)
    built = store._partitions["s0"].index
    assert built is not None
    rng = np.random.default_rng(8)
    # overwrite some rows with the queries themselves (they must now win), delete others
    targets = [i for i, s in enumerate(data.scopes) if s == "s0"][:10]
    for j, i in enumerate(targets[:5]):
        data.vectors[i] = data.queries[j]
        data.expires[i] = math.inf
    metas = data.metas()
    store.add(
        [data.ids[i] for i in targets[:5]],
        data.vectors[targets[:5]],
        [metas[i] for i in targets[:5]],
    )
    gone = set(data.ids[i] for i in targets[5:])
    store.delete(list(gone))
    for j in range(5):
        q = data.queries[j]
        found = store.query(q, k=5, scope="s0", now=0.0)
        assert found[0].id == data.ids[targets[j]] and found[0].score == pytest.approx(1.0)
        want = [i for i in data.reference(q, 5 + len(gone), "s0", 0.0) if i not in gone][:5]
        _same(found, want, data, q)
    assert store._partitions["s0"].index is built  # stale rows were scored exactly
    fresh = [f"new{j}" for j in range(5)]  # rows newer than the copy, next to stale ones
    store.add(fresh, data.queries[5:10], [{"scope": "s0", "namespace": "d"}] * 5)
    for j in range(5):
        found = store.query(data.queries[5 + j], k=2, scope="s0", now=0.0)
        assert found[0].id == fresh[j] and found[0].score == pytest.approx(1.0)
        q = data.queries[5 + j]
        old = next(i for i in data.reference(q, 50, "s0", 0.0) if i not in gone)
        rivals = {old: float(data.vectors[data.row[old]] @ q)}
        rivals.update({fresh[i]: float(data.queries[5 + i] @ q) for i in range(5) if i != j})
        assert found[1].id == max(rivals, key=lambda r: rivals[r])
        assert found[1].score == pytest.approx(max(0.0, max(rivals.values())), abs=1e-5)
    assert store._partitions["s0"].index is built
    extra = _unit(rng, 300)  # many new rows: the copy is rebuilt
    store.add([f"x{i}" for i in range(300)], extra, [{"scope": "s0", "namespace": "d"}] * 300)
    store.query(data.queries[0], k=3, scope="s0", now=0.0)
    assert store._partitions["s0"].index is not built


def test_without_onnxruntime_the_search_is_the_plain_product(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_int8, "MIN_ROWS", 64)
    monkeypatch.setattr(_int8, "_ORT", False)
    store = MemoryVectorStore()
    data = _Data(500)
    store.add(data.ids, data.vectors, data.metas())
    q = data.queries[0]
    _same(store.query(q, k=5, scope="s1", now=0.0), data.reference(q, 5, "s1", 0.0), data, q)
    assert store._partitions["s1"].index is None


# -- the int8 copy is rebuilt off the search path: a due rebuild never stalls a search,
# and rows written, moved or deleted while it runs are honoured once it is swapped in

Store = MemoryVectorStore | SQLiteVectorStore


class _Gate:
    """A build that takes the rows as they are when it starts (a snapshot, as a build
    reading a changing matrix may see them) and finishes only once opened."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self._real = _int8._build

    def __call__(self, rows: npt.NDArray[np.float32]) -> _int8.Int8Index:
        snapshot = rows.copy()
        if not self.open.wait(20):
            raise TimeoutError("the test never opened the gate")
        return self._real(snapshot)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Gate]:
    monkeypatch.setattr(_int8, "MIN_ROWS", 64)
    monkeypatch.setattr(_int8, "REBUILD_SHARE", 0.1)
    g = _Gate()
    monkeypatch.setattr(_int8, "_build", g)
    yield g
    g.open.set()  # let any thread still waiting finish, before the next test counts them
    for thread in _builds():
        thread.join(20)


def _timed(call: Callable[[], object]) -> float:
    start = time.monotonic()
    call()
    return time.monotonic() - start


def _check(store: Store, data: _Data, k: int = 5) -> None:
    for q in data.queries[:8]:
        _same(store.query(q, k=k, scope="s0", now=0.0), data.reference(q, k, "s0", 0.0), data, q)


def _builds() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "agent-cache-int8-build"]


@needs_ort
def test_a_due_build_never_stalls_a_search(store: Store, gate: _Gate) -> None:
    data = _Data(900, seed=3)
    store.add(data.ids, data.vectors, data.metas())
    # the first build is due: the search answers exactly without waiting for it
    assert _timed(lambda: _check(store, data)) < 10  # the gate holds the build 20 s
    part = store._partitions["s0"]
    assert part.int8.builds == 1 and part.int8.building and part.index is None
    gate.open.set()
    part.int8.wait(20)
    _check(store, data)
    first = part.index
    assert first is not None and first.rows == len(part) and part.int8.builds == 1
    # 10 % new rows: a rebuild is due; searches keep the old copy meanwhile
    gate.open.clear()
    rng = np.random.default_rng(4)
    extra = _unit(rng, len(part) // 5)
    new_ids = [f"x{i}" for i in range(len(extra))]
    store.add(new_ids, extra, [{"scope": "s0", "namespace": "d"}] * len(extra))
    data.ids += new_ids
    data.row = {id_: i for i, id_ in enumerate(data.ids)}
    data.vectors = np.concatenate([data.vectors, extra])
    data.scopes += ["s0"] * len(extra)
    data.expires += [math.inf] * len(extra)
    assert _timed(lambda: _check(store, data)) < 10
    assert part.index is first and part.int8.building and part.int8.builds == 2
    gate.open.set()
    part.int8.wait(20)
    _check(store, data)
    assert part.index is not first and part.index is not None
    assert part.index.rows == len(part) and not part.index.worn(len(part))
    assert part.int8.builds == 2 and not part.int8.building


@needs_ort
def test_writes_and_deletes_during_a_build_are_honoured_after_the_swap(
    store: Store, gate: _Gate
) -> None:
    data = _Data(900, seed=5)
    store.add(data.ids, data.vectors, data.metas())
    store.query(data.queries[0], k=1, scope="s0", now=0.0)  # starts the build
    part = store._partitions["s0"]
    assert part.int8.building
    # while it runs: overwrite rows with the queries (they must now win), delete others
    targets = [i for i, s in enumerate(data.scopes) if s == "s0"][:12]
    for j, i in enumerate(targets[:6]):
        data.vectors[i] = data.queries[j]
        data.expires[i] = math.inf
    metas = data.metas()
    store.add(
        [data.ids[i] for i in targets[:6]],
        data.vectors[targets[:6]],
        [metas[i] for i in targets[:6]],
    )
    gone = {data.ids[i] for i in targets[6:]}
    store.delete(list(gone))
    gate.open.set()
    part.int8.wait(20)
    for j in range(6):
        q = data.queries[j]
        found = store.query(q, k=5, scope="s0", now=0.0)
        assert found[0].id == data.ids[targets[j]] and found[0].score == pytest.approx(1.0)
        want = [i for i in data.reference(q, 5 + len(gone), "s0", 0.0) if i not in gone][:5]
        _same(found, want, data, q)
    index = part.index
    assert index is not None and not part.int8.building  # swapped in, not rebuilt again
    assert index.stale_count >= 6  # the rows changed during the build are scored exactly


@needs_ort
def test_one_build_per_scope_and_one_more_when_due_again(store: Store, gate: _Gate) -> None:
    data = _Data(900, seed=6)
    store.add(data.ids, data.vectors, data.metas())
    for q in data.queries[:10]:  # every scope due, many searches: one thread each
        for scope in ("s0", "s1", "s2"):
            store.query(q, k=3, scope=scope, now=0.0)
    parts = [store._partitions[scope] for scope in ("s0", "s1", "s2")]
    assert len(_builds()) == 3 and all(p.int8.building and p.int8.builds == 1 for p in parts)
    part = store._partitions["s0"]
    n = len(part)
    rng = np.random.default_rng(7)  # more churn while the build runs: due again after it
    extra = _unit(rng, n // 4)
    store.add(
        [f"y{i}" for i in range(len(extra))],
        extra,
        [{"scope": "s0", "namespace": "d"}] * len(extra),
    )
    store.query(data.queries[0], k=3, scope="s0", now=0.0)
    assert part.int8.builds == 1
    gate.open.set()
    part.int8.wait(20)
    store.query(data.queries[0], k=3, scope="s0", now=0.0)  # swaps in a worn copy
    assert part.index is not None and part.index.rows == n
    assert part.int8.builds == 2  # ... and starts exactly one more
    part.int8.wait(20)
    store.query(data.queries[0], k=3, scope="s0", now=0.0)
    assert part.index.rows == len(part) and part.int8.builds == 2


@needs_ort
def test_the_synchronous_path_builds_inside_the_search(
    gate: _Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_int8, "BACKGROUND", False)
    gate.open.set()
    store = MemoryVectorStore()
    data = _Data(300, seed=8)
    store.add(data.ids, data.vectors, data.metas())
    _check(store, data)
    part = store._partitions["s0"]
    assert part.index is not None and part.int8.builds == 1 and not _builds()


@needs_ort
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_waits_for_the_parents_build(gate: _Gate) -> None:
    store = MemoryVectorStore()
    data = _Data(900, seed=9)
    store.add(data.ids, data.vectors, data.metas())
    store.query(data.queries[0], k=3, scope="s0", now=0.0)
    part = store._partitions["s0"]
    assert part.int8.building  # the parent's build is held by the gate at the fork
    pid = os.fork()
    if pid == 0:  # the child: no thread of the parent's runs here
        code = 1
        try:
            _int8._build = gate._real  # type: ignore[assignment]
            _check(store, data)  # exact answers, and a build of the child's own
            part.int8.wait(20)
            _check(store, data)
            if part.index is not None and part.index.rows == len(part):
                code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.open.set()
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the parent's build")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    part.int8.wait(20)
    _check(store, data)
    assert part.index is not None
