"""The ONNX backend for real: exported offline from the bundled MiniLM, same vectors as torch."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import asyncio
from pathlib import Path

import numpy as np
import pytest

from agent_cache import LayeredCache
from agent_cache.embedders import SentenceTransformerEmbedder, embedder_from
from agent_cache.onnx_embedder import OnnxEmbedder

pytestmark = pytest.mark.integration

SENTENCES = [
    "How do I cancel an order?",
    "How do I create an order?",
    "What is the capital of France?",
    "My package hasn't arrived yet, what should I do?",
    "Wie geht es dir heute?",
    "refund " * 300,  # longer than max_seq_length: truncated the same way
]


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx")


@pytest.fixture(scope="module")
def torch_rows() -> np.ndarray:
    return SentenceTransformerEmbedder().embed(SENTENCES)


def test_fp32_matches_torch(onnx_dir: Path, torch_rows: np.ndarray) -> None:
    embedder = OnnxEmbedder(cache_dir=onnx_dir)
    rows = embedder.embed(SENTENCES)
    assert rows.dtype == np.float32 and rows.shape == torch_rows.shape
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    cosine = np.sum(rows * torch_rows, axis=1)
    assert cosine.min() >= 0.999, cosine
    assert embedder.path is not None and embedder.path.is_relative_to(onnx_dir)
    assert embedder.dimension == 384


def test_the_export_is_reused(onnx_dir: Path) -> None:
    first = OnnxEmbedder(cache_dir=onnx_dir)
    first.embed(["warm"])
    assert first.path is not None
    stamp = first.path.stat().st_mtime_ns
    second = OnnxEmbedder(cache_dir=onnx_dir)
    second.embed(["again"])
    assert second.path == first.path and first.path.stat().st_mtime_ns == stamp


def test_int8_stays_close(onnx_dir: Path, torch_rows: np.ndarray) -> None:
    rows = OnnxEmbedder(precision="int8", cache_dir=onnx_dir).embed(SENTENCES)
    cosine = np.sum(rows * torch_rows, axis=1)
    assert cosine.min() >= 0.97, cosine


def test_layered_cache_on_the_onnx_backend(onnx_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_CACHE_ONNX_DIR", str(onnx_dir))
    with LayeredCache(path=None, embedder="onnx:all-MiniLM-L6-v2") as cache:
        cache.store("How do I reset my password?", {"answer": "Settings > Security"})
        hit = cache.lookup("how can I reset my password")
        assert hit is not None and hit.layer == "semantic"

        async def many() -> list[object]:
            return list(
                await asyncio.gather(
                    *(cache.alookup(f"how do I reset my password {i}?") for i in range(8))
                )
            )

        assert len(asyncio.run(many())) == 8


def test_the_default_embedder_is_onnx_fp32(onnx_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_CACHE_ONNX_DIR", str(onnx_dir))
    built = embedder_from("sentence-transformers/all-MiniLM-L6-v2")
    model = built.inner.inner  # type: ignore[attr-defined]
    assert isinstance(model, OnnxEmbedder) and model.precision == "fp32"


def test_torch_and_onnx_fp32_share_entries_int8_has_its_own(
    onnx_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One folder, the same model on three runtimes: torch and ONNX fp32 make the same
    vectors, so they search each other's; int8 is another embedder identity (its own
    semantic scope), while every exact repeat hits across all three."""
    monkeypatch.setenv("AGENT_CACHE_ONNX_DIR", str(onnx_dir))
    question, paraphrase = "How do I reset my password?", "how can I reset my password"
    with LayeredCache(path=tmp_path, embedder="torch:all-MiniLM-L6-v2") as torch_cache:
        torch_cache.store(question, "Settings > Security")
    with LayeredCache(path=tmp_path, embedder="onnx:all-MiniLM-L6-v2") as fp32:
        hit = fp32.lookup(paraphrase)
        assert hit is not None and hit.layer == "semantic" and hit.response == "Settings > Security"
    with LayeredCache(path=tmp_path, embedder="onnx-int8:all-MiniLM-L6-v2") as int8:
        assert int8.lookup(paraphrase) is None
        exact = int8.lookup(question)
        assert exact is not None and exact.layer == "exact"
        int8.store("How do I delete my account?", "Settings > Account")
        own = int8.lookup("how can I delete my account")
        assert own is not None and own.layer == "semantic"


class _CountingSession:
    """The real ONNX session, counting the token positions (real and padding) it runs."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.positions = 0
        self.runs = 0

    def run(self, names: object, feeds: dict[str, np.ndarray]) -> object:
        self.runs += 1
        self.positions += int(feeds["input_ids"].size)
        return self.inner.run(names, feeds)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_mixed_batch_is_padded_per_length_group(onnx_dir: Path) -> None:
    # one long text in a batch of short questions: padding every row to its length
    # would run 8 x 256 positions; grouped by length each row pays about its own
    texts = ["refund " * 300, *SENTENCES[:5], "Is it raining?", "Where is my parcel?"]
    embedder = OnnxEmbedder(cache_dir=onnx_dir)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    assert embedder._session is not None
    counting = _CountingSession(embedder._session)
    embedder._session = counting
    rows = embedder.embed(texts)
    np.testing.assert_allclose(rows, alone, atol=1e-5)  # the same rows, in order
    assert counting.runs >= 2
    assert counting.positions < 2 * 256, counting.positions
