"""The LangChain adapter's exported names are a contract."""

from __future__ import annotations

import subprocess
import sys

import langchain_agent_cache


def test_all_is_pinned() -> None:
    assert sorted(langchain_agent_cache.__all__) == sorted(
        [
            "AgentCache",
            "CachedChatModel",
            "CachedResult",
            "CachedStep",
            "CachedTool",
            "FetchedResult",
            "StableContextOrderer",
            "cache_step",
            "cache_tool",
            "cached_step",
            "default_cache",
            "document_key",
            "format_documents",
            "is_side_effecting",
            "request_policy",
            "stable_rag_prompt",
        ]
    )
    for name in langchain_agent_cache.__all__:
        assert hasattr(langchain_agent_cache, name), name


def test_importing_the_adapter_loads_no_model_or_store() -> None:
    code = (
        "import sys, langchain_agent_cache\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'chromadb', 'langchain_openai')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_py_typed_is_shipped() -> None:
    from importlib.resources import files

    assert files("langchain_agent_cache").joinpath("py.typed").is_file()
