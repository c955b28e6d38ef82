"""A LlamaIndex ``BaseEmbedding`` or a LangChain ``Embeddings`` as ``embedder=``."""

from __future__ import annotations

import asyncio
import pickle
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_agent_cache import AgentCache, CachedChatModel
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import MockLLM
from llama_index.llms.agent_cache import CachedLLM

from agent_cache import BackendError, ConfigurationError, LayeredCache
from agent_cache.embedders import FrameworkEmbedder, MemoEmbedder, embedder_from
from agent_cache.testing import HashEmbedder

_HASH = HashEmbedder(dim=32)
QUESTION = "how do I reset my password"
PARAPHRASE = "how can I reset my password"


class LiEmbedding(BaseEmbedding):
    """A LlamaIndex embedding model over the hashing embedder; counts sync/async calls."""

    fail: bool = False
    _calls: dict[str, int] = PrivateAttr(default_factory=dict)

    def _count(self, what: str) -> None:
        if self.fail:
            raise ConnectionError("embedding server down")
        self._calls[what] = self._calls.get(what, 0) + 1

    def _get_text_embedding(self, text: str) -> list[float]:
        self._count("sync")
        return [float(x) for x in _HASH.embed([text])[0]]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await self._aget_text_embedding(query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        self._count("async")
        return [float(x) for x in _HASH.embed([text])[0]]


class LcEmbeddings(Embeddings):
    """A LangChain embeddings model over the hashing embedder, unnormalized rows."""

    model = "fake-embed-1"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: dict[str, int] = {}

    def _rows(self, texts: list[str], what: str) -> list[list[float]]:
        if self.fail:
            raise ConnectionError("embedding server down")
        self.calls[what] = self.calls.get(what, 0) + 1
        return [[3.0 * float(x) for x in row] for row in _HASH.embed(texts)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._rows(texts, "sync")

    def embed_query(self, text: str) -> list[float]:
        return self._rows([text], "sync")[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._rows(texts, "async")


def models(fail: bool = False) -> list[Any]:
    return [LiEmbedding(fail=fail), LcEmbeddings(fail=fail)]


@pytest.mark.parametrize("model", models(), ids=["llama_index", "langchain"])
def test_wrapped_rows_are_unit_float32_with_an_identity(model: Any) -> None:
    wrapped = embedder_from(model)
    assert isinstance(wrapped, MemoEmbedder) and isinstance(wrapped.inner, FrameworkEmbedder)
    rows = wrapped.embed([QUESTION, PARAPHRASE])
    assert rows.shape == (2, 32) and str(rows.dtype) == "float32"
    assert abs(float(rows[0] @ rows[0]) - 1.0) < 1e-5
    assert wrapped.dimension == 32
    assert wrapped.name.startswith(type(model).__name__)
    if isinstance(model, LcEmbeddings):
        assert wrapped.name == "LcEmbeddings:fake-embed-1"


@pytest.mark.parametrize("model", models(), ids=["llama_index", "langchain"])
def test_layered_cache_serves_exact_and_paraphrase_hits(model: Any, tmp_path: Path) -> None:
    cache = LayeredCache(path=tmp_path, embedder=model, threshold=0.6)
    cache.store(QUESTION, "Use the account page.")
    exact = cache.lookup(QUESTION)
    near = cache.lookup(PARAPHRASE)
    assert exact is not None and exact.layer == "exact"
    assert near is not None and near.layer == "semantic"
    cache.close()


@pytest.mark.parametrize("model", models(), ids=["llama_index", "langchain"])
def test_async_path_uses_the_models_async_batch(model: Any) -> None:
    cache = LayeredCache(path=None, embedder=model, threshold=0.6)

    async def go() -> Any:
        await cache.astore(QUESTION, "Use the account page.")
        return await cache.alookup(PARAPHRASE)

    hit = asyncio.run(go())
    assert hit is not None and hit.layer == "semantic"
    calls = model.calls if isinstance(model, LcEmbeddings) else model._calls
    assert calls.get("async", 0) >= 1 and calls.get("sync", 0) == 0


@pytest.mark.parametrize("path", [True, False], ids=["sqlite", "memory"])
@pytest.mark.parametrize("make", [LiEmbedding, LcEmbeddings], ids=["llama_index", "langchain"])
def test_a_failing_model_keeps_exact_hits_counts_and_warns_once(
    make: Any, path: bool, tmp_path: Path
) -> None:
    model = make(fail=True)
    cache = LayeredCache(path=tmp_path if path else None, embedder=model)
    calls: list[int] = []

    def compute() -> str:
        calls.append(1)
        return "Use the account page."

    with pytest.warns(RuntimeWarning, match="embedder .* failed") as caught:
        first = cache.fetch(QUESTION, compute)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would fail here
        again = cache.fetch(QUESTION, compute)
        other = cache.fetch(PARAPHRASE, compute)
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    assert first.computed and not again.computed
    assert again.hit is not None and again.hit.layer == "exact"
    assert other.computed  # the semantic layer misses while the model fails
    assert len(calls) == 2
    inner = cache.embedder.inner  # type: ignore[attr-defined]
    assert isinstance(inner, FrameworkEmbedder) and inner.failures >= 2
    assert cache.stats().as_dict()["errors"] >= 2  # counted, not only logged
    cache.close()


def test_failure_is_a_backend_error_of_the_semantic_layer() -> None:
    wrapped = FrameworkEmbedder(LcEmbeddings(fail=True))
    with pytest.warns(RuntimeWarning), pytest.raises(BackendError) as err:
        wrapped.embed(["x"])
    assert err.value.layer == "semantic" and isinstance(err.value.__cause__, ConnectionError)


def test_anything_else_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="BaseEmbedding"):
        embedder_from(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="neither"):
        FrameworkEmbedder(object())


def test_cached_llm_takes_settings_embed_model(tmp_path: Path) -> None:
    model = LiEmbedding()
    llm = CachedLLM(llm=MockLLM(), cache=str(tmp_path), embedder=model)
    assert llm.cache.path == tmp_path.resolve()
    llm.complete(QUESTION)
    assert model._calls.get("sync", 0) >= 1  # the cache embeds with the given model
    again = pickle.loads(pickle.dumps(llm))
    inner = again.cache.embedder.inner  # type: ignore[attr-defined]
    assert isinstance(inner, FrameworkEmbedder) and isinstance(inner.model, LiEmbedding)
    assert again.complete(QUESTION).additional_kwargs["agent_cache"]["hit"] is True
    assert "embedder" not in llm.to_dict()  # an object: to_dict leaves it out
    loaded = CachedLLM.from_dict(llm.to_dict(), embedder=model)  # given back explicitly
    assert loaded.cache.embedder.inner.model is model  # type: ignore[attr-defined]
    assert loaded.cache.path == tmp_path.resolve()
    with pytest.raises(ConfigurationError, match="embedder"):
        CachedLLM(llm=MockLLM(), cache=LayeredCache(path=None), embedder=model)


def test_langchain_adapters_take_an_embeddings(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    model = LcEmbeddings()
    chat = CachedChatModel(llm=FakeListChatModel(responses=["a", "b"]), embedder=model)
    chat.invoke(QUESTION)
    second = chat.invoke(QUESTION)
    assert second.content == "a" and second.response_metadata["agent_cache"]["layer"] == "exact"
    assert model.calls.get("sync", 0) >= 1
    assert chat.agent_cache is not None
    assert chat.agent_cache.layered.path == (tmp_path / ".agent_cache").resolve()
    with pytest.raises(ValueError, match="builds its own cache"):  # pydantic wraps it
        CachedChatModel(llm=FakeListChatModel(responses=["a"]), cache=False, embedder=model)
    lc = AgentCache(path=None, embedder=LcEmbeddings())
    assert isinstance(lc.layered.embedder.inner, FrameworkEmbedder)  # type: ignore[attr-defined]
