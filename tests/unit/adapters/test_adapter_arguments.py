"""The adapters' constructors: the names users bring from other caches are refused with
the names meant (and the conversion where the scales differ), naming the adapter."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_agent_cache import AgentCache, CachedChatModel
from langchain_core.language_models import GenericFakeChatModel
from llama_index.core.llms import MockLLM
from llama_index.llms.agent_cache import CachedLLM

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder


def agent_cache(tmp_path: Path, **kw: Any) -> Any:
    return AgentCache(path=tmp_path / "cache", **kw)


def chat_model(tmp_path: Path, **kw: Any) -> Any:
    model = GenericFakeChatModel(messages=iter(["a"]))
    return CachedChatModel(llm=model, cache=LayeredCache(path=None), **kw)


def cached_llm(tmp_path: Path, **kw: Any) -> Any:
    return CachedLLM(llm=MockLLM(), cache=tmp_path / "cache", **kw)


Make = Callable[..., Any]
CASES: list[tuple[str, Make, dict[str, Any], list[str]]] = [
    ("AgentCache", agent_cache, {"embeddings": HashEmbedder()}, ["it is embedder= here"]),
    (
        "AgentCache",
        agent_cache,
        {"distance_threshold": 0.2},
        ["it is threshold= here", "threshold = 1 - distance_threshold", "is threshold=0.8"],
    ),
    ("AgentCache", agent_cache, {"score_threshold": 0.8}, ["it is threshold= here"]),
    ("AgentCache", agent_cache, {"threshhold": 0.8}, ["did you mean threshold="]),
    ("CachedChatModel", chat_model, {"embeddings": HashEmbedder()}, ["it is embedder= here"]),
    (
        "CachedChatModel",
        chat_model,
        {"distance_threshold": 0.2},
        ["agent-cache calls it threshold=, an argument of the AgentCache / LayeredCache"],
    ),
    ("CachedChatModel", chat_model, {"namespce": "x"}, ["does not take namespce="]),
    ("CachedLLM", cached_llm, {"embed_model": HashEmbedder()}, ["it is embedder= here"]),
    ("CachedLLM", cached_llm, {"namspace": "x"}, ["did you mean namespace="]),
    # removed (it was unused): concurrent misses coalesce in the core's LayeredCache
    ("CachedLLM", cached_llm, {"singleflight_timeout": 5.0}, ["(it takes "]),
    (
        "CachedLLM",
        cached_llm,
        {"distance_threshold": 0.2},
        ["an argument of the LayeredCache given as cache=", "1 - distance_threshold"],
    ),
]


@pytest.mark.parametrize(
    ("owner", "make", "kwargs", "says"), CASES, ids=[f"{c[0]}-{next(iter(c[2]))}" for c in CASES]
)
def test_unknown_keyword_names_the_adapter_and_the_name_meant(
    tmp_path: Path, owner: str, make: Make, kwargs: dict[str, Any], says: list[str]
) -> None:
    with pytest.raises(ValueError) as caught:
        make(tmp_path, **kwargs)
    message = str(caught.value)
    assert f"{owner}() does not take {next(iter(kwargs))}=" in message
    assert "LayeredCache.__init__" not in message
    for part in says:
        assert part in message
    assert not (tmp_path / "cache").exists()  # refused before anything was opened


def test_agent_cache_takes_a_directory_positionally(tmp_path: Path) -> None:
    """``AgentCache(".agent_cache")``, the ``SQLiteCache(".langchain.db")`` habit."""
    cache = AgentCache(tmp_path / "here")
    assert Path(str(cache.layered.path)) == (tmp_path / "here").resolve()


def test_cached_llm_settings_are_typed_keywords() -> None:
    params = inspect.signature(CachedLLM.__init__).parameters
    for name in ("namespace", "ttl", "tags", "llm_string", "embedder", "question_extractor"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert params[name].annotation is not inspect.Parameter.empty, name


def test_cached_llm_keeps_llamaindex_fields(tmp_path: Path) -> None:
    llm = CachedLLM(llm=MockLLM(), cache=LayeredCache(path=None), system_prompt="Be brief.")
    assert llm.system_prompt == "Be brief."
    again = CachedLLM.from_dict(llm.to_dict(), cache=llm.cache)
    assert (again.system_prompt, again.namespace) == ("Be brief.", "default")
    assert "singleflight_timeout" not in llm.to_dict()


def test_langchain_tools_and_steps_take_a_directory(tmp_path: Path) -> None:
    """``cache_tool(..., cache=".agent_cache")`` like every other adapter's ``cache=``."""
    from langchain_agent_cache import cache_step, cache_tool
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tools import tool

    calls = []

    @tool
    def lookup_order(order_id: str) -> str:
        """The status of an order."""
        calls.append(order_id)
        return f"order {order_id}: shipped"

    where = tmp_path / "cache"
    cached = cache_tool(lookup_order, cache=str(where))
    assert cached.invoke({"order_id": "42"}) == cached.invoke({"order_id": "42"})
    assert calls == ["42"]
    step = cache_step(RunnableLambda(lambda q: f"plan for {q}"), name="plan", cache=where)
    assert step.invoke("ship it") == "plan for ship it"
    assert (where / "exact.sqlite3").is_file()  # the directory's shared cache, on disk
