"""The embedded default's vectors: in the exact layer's SQLite database, many processes."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from agent_cache import LayeredCache
from agent_cache.errors import ConfigurationError
from agent_cache.protocols import VectorStore
from agent_cache.stores import SQLiteStore
from agent_cache.stores import _vector_table as vt
from agent_cache.testing import HashEmbedder
from agent_cache.vectors import ChromaVectorStore, MemoryVectorStore, SQLiteVectorStore

ROOT = Path(__file__).resolve().parents[3]


def _v(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float32)


def _meta(scope: str = "s", ns: str = "default", expires: float = math.inf) -> dict[str, object]:
    return {"scope": scope, "namespace": ns, "expires_at": expires, "text": "t"}


@pytest.fixture
def kv(tmp_path: Path) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "exact.sqlite3")
    yield store
    store.close()


def test_protocol_query_scores_and_metadata(kv: SQLiteStore) -> None:
    vs = SQLiteVectorStore(kv)
    assert isinstance(vs, VectorStore)
    vs.add(["a", "b"], [_v(1, 0), _v(0.6, 0.8)], [_meta(), {**_meta(), "key": "kb"}])
    got = vs.query(_v(1, 0), k=5, scope="s", now=0.0)
    assert [m.id for m in got] == ["a", "b"]
    assert got[0].score == pytest.approx(1.0) and got[1].score == pytest.approx(0.6)
    assert got[1].metadata["key"] == "kb" and got[0].metadata["expires_at"] == math.inf
    assert vs.count() == 2


def test_scope_filter_happens_before_the_knn(kv: SQLiteStore) -> None:
    vs = SQLiteVectorStore(kv)
    crowd = [f"c{i}" for i in range(50)]
    vs.add(crowd, [_v(1, 0)] * 50, [_meta("crowded")] * 50)
    vs.add(["mine"], [_v(0.1, 1)], [_meta("small")])
    assert [m.id for m in vs.query(_v(1, 0), k=1, scope="small", now=0.0)] == ["mine"]
    assert vs.query(_v(1, 0), k=1, scope="nobody", now=0.0) == []


def test_expired_rows_are_masked_inside_the_search(kv: SQLiteStore) -> None:
    vs = SQLiteVectorStore(kv)
    vs.add(["old", "new"], [_v(1, 0), _v(0.9, 0.1)], [_meta(expires=10.0), _meta(expires=99.0)])
    assert [m.id for m in vs.query(_v(1, 0), k=1, scope="s", now=5.0)] == ["old"]
    assert [m.id for m in vs.query(_v(1, 0), k=1, scope="s", now=10.0)] == ["new"]


def test_upsert_moves_scope_delete_and_clear(kv: SQLiteStore) -> None:
    vs = SQLiteVectorStore(kv)
    vs.add(["a"], [_v(1, 0)], [_meta("s1", "ns1")])
    vs.add(["a"], [_v(0, 1)], [_meta("s2", "ns1")])
    assert vs.query(_v(1, 0), k=3, scope="s1", now=0.0) == []
    assert [m.id for m in vs.query(_v(0, 1), k=3, scope="s2", now=0.0)] == ["a"]
    vs.add(["b", "c"], [_v(1, 0), _v(1, 0)], [_meta("s2", "ns2"), _meta("s2", "ns2")])
    vs.delete(["b", "unknown"])
    assert sorted(m.id for m in vs.query(_v(1, 0), k=5, scope="s2", now=0.0)) == ["a", "c"]
    vs.clear("ns1")
    assert [m.id for m in vs.query(_v(1, 0), k=5, scope="s2", now=0.0)] == ["c"]
    vs.clear()
    assert vs.query(_v(1, 0), k=5, scope="s2", now=0.0) == [] and vs.count() == 0


def test_validation(kv: SQLiteStore) -> None:
    vs = SQLiteVectorStore(kv)
    with pytest.raises(ConfigurationError):
        vs.add(["a"], [_v(1, 0)], [{"namespace": "n"}])  # no scope
    with pytest.raises(ConfigurationError):
        vs.add(["a"], [_v(1, math.nan)], [_meta()])
    with pytest.raises(ConfigurationError):
        vs.add(["a", "b"], [_v(1, 0)], [_meta()])
    assert vs.count() == 0


def test_entry_and_vector_are_written_and_deleted_together(kv: SQLiteStore) -> None:
    vs = SQLiteVectorStore(kv)
    with pytest.raises(ConfigurationError):  # a bad vector: neither is written
        kv.set(
            "k",
            '"v"',
            namespace="n",
            expires_at=None,
            now=0.0,
            vector=_v(1, 0),
            vector_meta={"namespace": "n"},
        )
    assert kv.get("k", now=0.0) is None and vs.count() == 0
    for key, ns in (("k1", "n"), ("k2", "n"), ("k3", "other")):
        kv.set(
            key,
            '"v"',
            namespace=ns,
            expires_at=None,
            tags=["t"],
            now=0.0,
            vector=_v(1, 0),
            vector_meta=_meta(ns=ns),
        )
    assert vs.count() == 3
    kv.delete(["k1"])
    assert sorted(m.id for m in vs.query(_v(1, 0), k=5, scope="s", now=0.0)) == ["k2", "k3"]
    kv.clear("n")
    assert [m.id for m in vs.query(_v(1, 0), k=5, scope="s", now=0.0)] == ["k3"]
    kv.set("k3", '"v"', namespace="other", expires_at=5.0, now=10.0)  # already expired
    assert vs.count() == 0
    kv.set(
        "k4",
        '"v"',
        namespace="n",
        expires_at=20.0,
        now=0.0,
        vector=_v(1, 0),
        vector_meta=_meta(expires=20.0),
    )
    assert kv.purge_expired(now=30.0) == 1 and vs.count() == 0


def test_another_instance_catches_up_from_the_change_log(
    kv: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = SQLiteVectorStore(SQLiteStore(kv.path))  # stands for another process
    reader = SQLiteVectorStore(kv)
    reloads: list[int] = []
    real_reload = SQLiteVectorStore._reload

    def counting(self: SQLiteVectorStore, conn: object, epoch: int) -> None:
        reloads.append(epoch)
        real_reload(self, conn, epoch)

    monkeypatch.setattr(SQLiteVectorStore, "_reload", counting)
    assert reader.query(_v(1, 0), k=1, scope="s", now=0.0) == []
    assert len(reloads) == 1  # the first query loads once
    for i in range(20):
        writer.add([f"k{i}"], [_v(1, i / 100)], [_meta()])
        assert reader.query(_v(1, i / 100), k=1, scope="s", now=0.0)[0].id == f"k{i}"
    writer.delete(["k19"])
    assert "k19" not in {m.id for m in reader.query(_v(1, 0.19), k=30, scope="s", now=0.0)}
    assert len(reloads) == 1  # every later query applied only the new log rows
    writer.clear()
    assert reader.query(_v(1, 0), k=5, scope="s", now=0.0) == [] and len(reloads) == 2
    writer.store.close()


def test_a_reader_behind_a_trimmed_log_reloads(
    kv: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vt, "LOG_KEEP", 10)
    monkeypatch.setattr(vt, "_TRIM_EVERY", 4)
    writer = SQLiteVectorStore(SQLiteStore(kv.path))
    reader = SQLiteVectorStore(kv)
    writer.add(["first"], [_v(0, 1)], [_meta()])
    assert [m.id for m in reader.query(_v(0, 1), k=1, scope="s", now=0.0)] == ["first"]
    for i in range(40):
        writer.add([f"k{i}"], [_v(1, 0)], [_meta()])
    writer.delete(["first"])
    with kv.snapshot() as conn:
        assert conn.execute("SELECT COUNT(*) FROM vector_log").fetchone()[0] <= 14
    got = reader.query(_v(0, 1), k=50, scope="s", now=0.0)
    assert "first" not in {m.id for m in got} and len(got) == 40
    writer.store.close()


def test_layered_cache_default_path_shares_one_database(tmp_path: Path) -> None:
    with LayeredCache(path=tmp_path, embedder=HashEmbedder()) as cache:
        assert isinstance(cache.vector_store, SQLiteVectorStore)
        assert cache.vector_store.store is cache.kv_store
        cache.store("How do I reset my password?", "use the link", tags=["faq"])
        hit = cache.lookup("how do I reset my password!")
        assert hit is not None and hit.layer == "semantic"
        assert cache.vector_store.count() == 1
        cache.store_many([("what is rag?", "retrieval"), ("what is kv?", "key value")])
        assert cache.vector_store.count() == 3
        assert cache.invalidate(tags=["faq"]) == 1
        assert cache.vector_store.count() == 2
    assert not (tmp_path / "vectors").exists()


def test_vector_backend_by_name(tmp_path: Path) -> None:
    chroma = LayeredCache(path=tmp_path, vector_backend="chroma", embedder=HashEmbedder())
    assert isinstance(chroma.vector_store, ChromaVectorStore)
    assert chroma.vector_store.path == str(tmp_path / "vectors")
    memory = LayeredCache(path=tmp_path, vector_backend="memory", embedder=HashEmbedder())
    assert isinstance(memory.vector_store, MemoryVectorStore)
    assert isinstance(LayeredCache(path=None).vector_store, MemoryVectorStore)
    server = LayeredCache(path=tmp_path, chroma_url="http://127.0.0.1:9")
    assert isinstance(server.vector_store, ChromaVectorStore)
    with pytest.raises(ConfigurationError):
        LayeredCache(path=tmp_path, vector_backend="faiss")  # type: ignore[arg-type]


def _prompt(proc: int, i: int) -> str:
    # several unique words per entry, so that no two entries embed alike
    return f"writer {proc} entry {i} word{proc}x{i} code{i * 7919 % 10007} tag{i}q{proc}"


WRITER = textwrap.dedent(
    """
    import sys
    from agent_cache import LayeredCache
    from agent_cache.testing import HashEmbedder
    sys.path.insert(0, sys.argv[3])
    from test_sqlite_vectors import _prompt
    path, proc = sys.argv[1], int(sys.argv[2])
    with LayeredCache(path=path, embedder=HashEmbedder(dim=256)) as cache:
        sys.stdin.readline()  # start together
        for i in range(int(sys.argv[4])):
            cache.store(_prompt(proc, i), {"text": f"answer {proc}/{i}"})
        print(cache.stats().errors if hasattr(cache.stats(), "errors") else 0)
    """
)


def test_four_processes_writing_one_path_lose_nothing(tmp_path: Path) -> None:
    per = 2000
    env = {"PYTHONPATH": f"{ROOT}", "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(tmp_path),
                str(p),
                str(Path(__file__).parent),
                str(per),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for p in range(4)
    ]
    outs = [p.communicate(input="go\n", timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err
    embedder = HashEmbedder(dim=256)
    with LayeredCache(path=tmp_path, embedder=embedder) as cache:
        assert cache.kv_store.count() == 4 * per
        assert cache.vector_store.count() == 4 * per
        with cache.kv_store.snapshot() as conn:  # type: ignore[attr-defined]
            rows = conn.execute(
                "SELECT v.key, v.vector, v.meta FROM vectors v JOIN entries e USING (key)"
            ).fetchall()
        assert len(rows) == 4 * per  # every vector belongs to an entry
        by_key = {key: (blob, meta) for key, blob, meta in rows}
        wrong = 0
        for p in range(4):
            prompts = [_prompt(p, i) for i in range(per)]
            vectors = embedder.embed(prompts)
            for i, prompt in enumerate(prompts):
                exact = cache.lookup(prompt)
                assert exact is not None and exact.layer == "exact"
                assert exact.response == {"text": f"answer {p}/{i}"}
                blob, meta = by_key[exact.key]
                stored = np.frombuffer(blob, dtype="<f4")
                wrong += not (np.allclose(stored, vectors[i], atol=1e-6) and prompt in meta)
                semantic = cache.lookup(prompt.upper() + " ?!")  # same words, not the same key
                assert semantic is not None and semantic.layer == "semantic", prompt
                assert semantic.key == exact.key
        assert wrong == 0


def test_eight_threads_of_mixed_traffic_on_one_path(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(dim=256)) as cache:

        def work(t: int) -> None:
            try:
                for i in range(150):
                    prompt = _prompt(t, i % 40)
                    if i % 3 == 0:
                        cache.store(prompt, f"a{t}/{i % 40}", tags=[f"t{t}"])
                    elif i % 3 == 1:
                        cache.lookup(prompt.upper() + "?")
                    else:
                        cache.get_or_compute(_prompt(t + 100, i), lambda: "computed")
                    if i % 50 == 49:
                        cache.invalidate(tags=[f"t{t}"])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        assert errors == []
        assert cache.stats().errors == 0
        with cache.kv_store.snapshot() as conn:  # type: ignore[attr-defined]
            orphans = conn.execute(
                "SELECT COUNT(*) FROM vectors WHERE key NOT IN (SELECT key FROM entries)"
            ).fetchone()[0]
        assert orphans == 0
