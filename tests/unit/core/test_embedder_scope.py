"""The embedder is part of the semantic scope, never of the exact key.

Two caches with different embedders on one store (one ``path=``, one shared memory or
SQLite vector store) must never compare a query embedded by one model with the vectors
of the other: the cosines are meaningless (a wrong hit or a missed one). Exact repeats
do not depend on the embedder and still hit across them. The cleanup paths (tags,
namespace, quotas, expiry) still reach the vectors of every embedder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from agent_cache import LayeredCache
from agent_cache import _request as rq
from agent_cache.embedders import (
    DEFAULT_EMBEDDER,
    FrameworkEmbedder,
    MemoEmbedder,
    embedder_from,
    embedder_identity,
)
from agent_cache.ops import export_entries, restore_entries
from agent_cache.protocols import Embedder
from agent_cache.stores import MemoryStore
from agent_cache.testing import FakeClock, HashEmbedder
from agent_cache.vectors import MemoryVectorStore, SQLiteVectorStore

Q = "How do I reset my password for account 7?"
PARA = "how do I reset my password for account 7 !"  # same words: a semantic hit
Q2 = "Where can I download the invoice for order 12?"
PARA2 = "where can I download the invoice for order 12 ?"


class Renamed:
    """Another model as far as the cache can tell: the inner vectors, another name.

    The worst case for the wall: the vectors are close (a paraphrase scores ~1), so
    without the embedder in the scope the other cache serves them.
    """

    def __init__(self, inner: HashEmbedder, name: str) -> None:
        self.inner, self.name = inner, name

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.inner.embed(texts)


Make = Callable[..., LayeredCache]


@pytest.fixture(params=["path", "memory-stores", "sqlite-vectors"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Make]:
    """Caches on one shared backend, each with the embedder given."""
    opened: list[Any] = []
    shared: dict[str, Any] = {}
    if request.param == "memory-stores":
        shared = {"kv_store": MemoryStore(), "vector_store": MemoryVectorStore()}
    elif request.param == "sqlite-vectors":
        shared = {
            "kv_store": MemoryStore(),
            "vector_store": SQLiteVectorStore(tmp_path / "vectors.sqlite3"),
        }
        opened.append(shared["vector_store"])

    def factory(embedder: Embedder, **kw: Any) -> LayeredCache:
        path = tmp_path / "cache" if request.param == "path" else None
        cache = LayeredCache(path=path, embedder=embedder, threshold=0.8, **shared, **kw)
        opened.append(cache)
        return cache

    yield factory
    for thing in reversed(opened):
        thing.close()


def _no_failures(caplog: pytest.LogCaptureFixture) -> None:
    failed = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert failed == []


def test_another_embedder_never_searches_the_vectors(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    a = make(HashEmbedder(64))
    b = make(Renamed(HashEmbedder(64), "another-model"))
    key = a.store(Q, "from A")
    own = a.lookup(PARA)
    assert own is not None and own.layer == "semantic" and own.response == "from A"
    assert b.lookup(PARA) is None  # B's query would score ~1 against A's vector
    assert b.explain(PARA).verdicts == ()  # filtered inside the k-NN: no candidate at all
    exact = b.lookup(Q)  # an exact repeat does not depend on the embedder
    assert exact is not None and exact.layer == "exact" and exact.response == "from A"
    assert key == b.store(Q, "from A")  # exact keys are embedder-free
    b.store(Q2, "from B")
    mine = b.lookup(PARA2)
    assert mine is not None and mine.layer == "semantic" and mine.response == "from B"
    assert a.lookup(PARA2) is None
    _no_failures(caplog)


def test_one_vector_per_entry_in_the_last_writers_scope(make: Make) -> None:
    """The entry's key is its vector's id: a store of the same entry by the other
    embedder moves the vector into that embedder's scope (no second vector); the first
    still hits it exactly."""
    a = make(HashEmbedder(64))
    b = make(Renamed(HashEmbedder(64), "another-model"))
    a.store(Q, "from A")
    b.store(Q, "from B")
    assert a.vector_store.count() == 1
    hit = b.lookup(PARA)
    assert hit is not None and hit.layer == "semantic" and hit.response == "from B"
    assert a.lookup(PARA) is None
    exact = a.lookup(Q)
    assert exact is not None and exact.layer == "exact" and exact.response == "from B"


async def test_another_embedder_never_searches_the_vectors_async(make: Make) -> None:
    a = make(HashEmbedder(64))
    b = make(Renamed(HashEmbedder(64), "another-model"))
    await a.astore(Q, "from A")
    assert await b.alookup(PARA) is None
    hit = await a.alookup(PARA)
    assert hit is not None and hit.layer == "semantic"
    exact = await b.alookup(Q)
    assert exact is not None and exact.layer == "exact"


def test_bulk_loads_are_scoped_by_embedder(make: Make) -> None:
    a = make(HashEmbedder(64))
    b = make(Renamed(HashEmbedder(64), "another-model"))
    a.store_many([(Q, "from A"), (Q2, "from A 2")])
    assert b.lookup(PARA) is None and b.lookup(PARA2) is None
    hit = a.lookup(PARA2)
    assert hit is not None and hit.layer == "semantic" and hit.response == "from A 2"


@pytest.mark.parametrize(
    "other",
    [HashEmbedder(32), Renamed(HashEmbedder(32), "hash-embedder-64")],  # the same name too
    ids=["other-name", "same-name"],
)
def test_another_dimension_is_its_own_scope(
    make: Make, other: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    a = make(HashEmbedder(64))
    b = make(other)
    a.store(Q, "from A")
    assert b.lookup(PARA) is None  # no error deep in numpy: an empty scope
    b.store(Q2, "from B")  # the exact entry and B's own vector are both written
    exact = b.lookup(Q)
    assert exact is not None and exact.layer == "exact" and exact.response == "from A"
    mine = b.lookup(PARA2)
    assert mine is not None and mine.layer == "semantic" and mine.response == "from B"
    theirs = a.lookup(PARA)
    assert theirs is not None and theirs.layer == "semantic" and theirs.response == "from A"
    assert a.lookup(PARA2) is None
    _no_failures(caplog)


def test_a_reopened_cache_still_sees_each_embedders_vectors(tmp_path: Path) -> None:
    """SQLite reloads every vector of the file: each dimension lands in its own scope."""
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(64), threshold=0.8) as a:
        a.store(Q, "from A")
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(32), threshold=0.8) as b:
        b.store(Q2, "from B")
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(32), threshold=0.8) as b:
        hit = b.lookup(PARA2)
        assert hit is not None and hit.layer == "semantic" and hit.response == "from B"
        assert b.lookup(PARA) is None
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(64), threshold=0.8) as a:
        hit = a.lookup(PARA)
        assert hit is not None and hit.layer == "semantic" and hit.response == "from A"


# -- every cleanup path reaches the vectors of every embedder --------------------------


def _two_embedders(make: Make, **kw: Any) -> tuple[LayeredCache, LayeredCache]:
    a = make(HashEmbedder(64), **kw)
    b = make(Renamed(HashEmbedder(64), "another-model"), **kw)
    return a, b


def test_invalidation_removes_every_embedders_vectors(make: Make) -> None:
    a, b = _two_embedders(make)
    a.store(Q, "from A", namespace="t", tags=["doc:1"])
    b.store(Q2, "from B", namespace="t", tags=["doc:1"])
    b.store("kept question about shipping", "kept", namespace="t", tags=["doc:2"])
    assert a.vector_store.count() == 3
    assert a.invalidate(tags=["doc:1"], namespace="t") == 2
    assert a.vector_store.count() == 1
    assert b.lookup(PARA2, namespace="t") is None and a.lookup(PARA, namespace="t") is None


def test_clear_of_a_namespace_removes_every_embedders_vectors(make: Make) -> None:
    a, b = _two_embedders(make)
    a.store(Q, "from A", namespace="t")
    b.store(Q2, "from B", namespace="t")
    b.store(Q2, "elsewhere", namespace="other")
    a.clear("t")
    assert a.vector_store.count() == 1
    hit = b.lookup(PARA2, namespace="other")
    assert hit is not None and hit.response == "elsewhere"
    a.clear()
    assert a.vector_store.count() == 0


def test_a_quota_evicts_the_vectors_of_every_embedder(make: Make) -> None:
    a, b = _two_embedders(make, quotas={"t": 2})
    a.store(Q, "from A", namespace="t")
    b.store(Q2, "from B", namespace="t")
    b.store("a third question about refunds", "third", namespace="t")  # evicts A's entry
    assert a.kv_store.count("t") == 2
    assert a.vector_store.count() == 2
    assert a.lookup(PARA, namespace="t") is None


def test_housekeeping_purges_the_expired_vectors_of_every_embedder(make: Make) -> None:
    clock = FakeClock()
    a, b = _two_embedders(make, clock=clock)
    a.store(Q, "from A", ttl=10)
    b.store(Q2, "from B", ttl=10)
    a.store("a lasting question", "lasting")
    clock.advance(20)
    a.housekeep()
    assert a.vector_store.count() == 1
    assert a.kv_store.count() == 1


# -- operations: a warmup re-embeds into the restoring cache's scope -------------------


def test_warmup_with_another_embedder_places_vectors_in_its_scope(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with LayeredCache(path=tmp_path / "src", embedder=HashEmbedder(64), threshold=0.8) as src:
        src.store(Q, "from A", llm_string="model-x")
        export_entries(src, out)
    import json

    rows = [("l", json.loads(line)) for line in out.read_text(encoding="utf-8").splitlines()]
    other = Renamed(HashEmbedder(32), "another-model")
    with LayeredCache(path=tmp_path / "dst", embedder=other, threshold=0.8) as dst:
        assert restore_entries(dst, rows).stored == 1
        hit = dst.lookup(PARA, llm_string="model-x")
        assert hit is not None and hit.layer == "semantic" and hit.response == "from A"
        assert dst.lookup(PARA, llm_string="model-y") is None  # the rest of the scope kept
        exact = dst.lookup(Q, llm_string="model-x")
        assert exact is not None and exact.layer == "exact"


def test_warmup_of_an_export_without_an_embedder_tag(tmp_path: Path) -> None:
    """An export written before the embedder was part of the scope still warms up."""
    with LayeredCache(path=None, embedder=HashEmbedder(64)) as src:
        src.store(Q, "old")
        export_entries(src, tmp_path / "out.jsonl")
    import json

    (row,) = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    old = dict(row, scope=rq.entry_scope(row["scope"]))
    assert "." not in old["scope"]
    with LayeredCache(path=None, embedder=HashEmbedder(64), threshold=0.8) as dst:
        restore_entries(dst, [("l", old)])
        hit = dst.lookup(PARA)
        assert hit is not None and hit.layer == "semantic" and hit.response == "old"


# -- the identity ------------------------------------------------------------------------


def test_identity_is_the_model_not_the_wrapper_or_the_runtime() -> None:
    """torch and ONNX fp32 give the same vectors: one identity; int8 is another."""
    default = embedder_identity(embedder_from(DEFAULT_EMBEDDER))
    assert default == DEFAULT_EMBEDDER
    for spec in ("all-MiniLM-L6-v2", "torch:all-MiniLM-L6-v2", "onnx:all-MiniLM-L6-v2"):
        assert embedder_identity(embedder_from(spec)) == default, spec
    assert embedder_identity(embedder_from("all-MiniLM-L6-v2", batching=False)) == default
    int8 = embedder_identity(embedder_from("onnx-int8:all-MiniLM-L6-v2"))
    assert int8 != default and "int8" in int8
    assert embedder_identity(embedder_from("./my-model")) == "./my-model"
    assert embedder_identity(MemoEmbedder(HashEmbedder(16))) == "hash-embedder-16"


def test_identity_of_framework_embedders_and_an_explicit_one() -> None:
    class Embeddings:  # a LangChain Embeddings, duck-typed
        model = "text-embedding-3-small"

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

    assert embedder_identity(embedder_from(Embeddings())) == "Embeddings:text-embedding-3-small"
    assert embedder_identity(FrameworkEmbedder(Embeddings(), name="mine")) == "mine"

    class Pinned(HashEmbedder):
        identity = "hash@v2"

    assert embedder_identity(embedder_from(Pinned(8))) == "hash@v2"


def test_scope_tag_separates_identity_and_dimension() -> None:
    base = rq.keys_for(
        rq.prepare(
            Q,
            llm_string="",
            namespace="n",
            context=None,
            template_version="",
            casefold=True,
            templates=[],
        ),
        0,
    ).entry_scope
    scopes = {
        rq.vector_scope(base, rq.embedder_tag(name, dim))
        for name, dim in (("m", 64), ("m", 32), ("n", 64))
    }
    assert len(scopes) == 3
    for scope in scopes:
        assert rq.entry_scope(scope) == base
    assert rq.entry_scope(base) == base
