"""The adapter snippets of README.md / integrations/README.md: credentials where the client
needs them, and the hit markers they document really present where they say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_agent_cache import AgentCache, CachedChatModel
from langchain_core.globals import set_llm_cache
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import TextNode
from llama_index.llms.agent_cache import CachedLLM, query_cache_info

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder
from tests.unit.llama_index.test_li_llm import CountingLLM

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "README.md", ROOT / "integrations" / "README.md"]


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def _calls(code: str, name: str) -> list[str]:
    """The argument text of every ``name(...)`` call (balanced parentheses)."""
    out = []
    for match in re.finditer(rf"\b{name}\(", code):
        depth, i = 1, match.end()
        while depth and i < len(code):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        out.append(code[match.end() : i - 1])
    return out


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.parent.name or p.name)
def test_openai_clients_in_snippets_carry_an_api_key(path: Path) -> None:
    code = "\n".join(_python_blocks(path))
    clients = _calls(code, "ChatOpenAI") + _calls(code, "OpenAILike")
    assert clients, f"{path.name} shows no client"
    for args in clients:
        assert "api_key=" in args, f"{path.name}: a client without api_key: ({args})"


def test_snippets_name_the_hit_markers() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in DOCS)
    for marker in (
        'response_metadata["agent_cache"]',
        'additional_kwargs["agent_cache"]',
        "query_cache_info(",
    ):
        assert marker in text


def lc_model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content="Paris.")] * 3))


def test_langchain_marker_is_in_response_metadata() -> None:
    chat = CachedChatModel(llm=lc_model(), cache=LayeredCache(path=None, embedder=HashEmbedder()))
    miss = chat.invoke("Capital of France?")
    hit = chat.invoke("Capital of France?")
    assert miss.response_metadata["agent_cache"]["hit"] is False
    assert hit.response_metadata["agent_cache"]["layer"] == "exact"
    assert hit.usage_metadata is not None and hit.usage_metadata["total_tokens"] == 0


def test_langchain_global_cache_marks_hits_too() -> None:
    model = lc_model()
    set_llm_cache(AgentCache(LayeredCache(path=None, embedder=HashEmbedder())))
    try:
        model.invoke("Capital of France?")
        hit = model.invoke("Capital of France?")
    finally:
        set_llm_cache(None)
    assert hit.response_metadata["agent_cache"]["layer"] == "exact"


def li_llm() -> CachedLLM:
    return CachedLLM(llm=CountingLLM(), cache=LayeredCache(path=None, embedder=HashEmbedder()))


def test_llama_index_marker_is_in_additional_kwargs() -> None:
    llm = li_llm()
    question = [ChatMessage(role="user", content="What is RAG?")]
    assert llm.chat(question).additional_kwargs["agent_cache"]["hit"] is False
    hit = llm.chat(question)
    assert hit.additional_kwargs["agent_cache"]["hit"] is True
    assert hit.additional_kwargs["agent_cache"]["layer"] == "exact"
    llm.complete("What is RAG?")
    assert llm.complete("What is RAG?").additional_kwargs["agent_cache"]["hit"] is True


def _engine(**kw: object) -> object:
    index = VectorStoreIndex(
        [TextNode(id_="n1", text="RAG retrieves documents, then generates.")],
        embed_model=MockEmbedding(embed_dim=4),
    )
    return index.as_query_engine(llm=li_llm(), **kw)


def test_llama_index_query_marker_is_on_the_response_not_in_its_node_metadata() -> None:
    engine = _engine()
    first = engine.query("What is RAG?")  # type: ignore[attr-defined]
    second = engine.query("What is RAG?")  # type: ignore[attr-defined]
    assert query_cache_info(first)["hit"] is False  # type: ignore[index]
    assert (
        query_cache_info(second)
        == second.agent_cache
        == {
            "hit": True,
            "hits": 1,
            "misses": 0,
            "layers": ["exact"],
        }
    )
    # Response.metadata maps node ids to node metadata, and nothing else
    nodes = {n.node_id: n.metadata for n in second.source_nodes}
    assert second.metadata == nodes and "agent_cache" not in second.metadata
    for node_id, meta in second.metadata.items():  # what LlamaIndex code does with it
        assert isinstance(meta, dict) and node_id in nodes


def test_a_streaming_query_makes_no_claim_on_its_response() -> None:
    # the LLM runs while the caller iterates, after the Response was returned: no marker
    # (the README says so; CacheHitEvent and cache.stats() still see the call)
    engine = _engine(streaming=True)
    first = engine.query("What is RAG?")  # type: ignore[attr-defined]
    text = "".join(first.response_gen)
    second = engine.query("What is RAG?")  # type: ignore[attr-defined]
    assert "".join(second.response_gen) == text
    assert query_cache_info(first) is None and query_cache_info(second) is None
    assert "agent_cache" not in (second.metadata or {})


async def test_llama_index_marker_on_async_queries() -> None:
    index = VectorStoreIndex(
        [TextNode(id_="n1", text="RAG retrieves documents, then generates.")],
        embed_model=MockEmbedding(embed_dim=4),
    )
    engine = index.as_query_engine(llm=li_llm())
    await engine.aquery("What is RAG?")
    second = await engine.aquery("What is RAG?")
    assert query_cache_info(second) is not None and query_cache_info(second)["hit"] is True  # type: ignore[index]
