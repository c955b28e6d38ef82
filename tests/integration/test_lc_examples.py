"""The LangChain example scripts run against the real local model.

(The LangChain notebook is run by test_examples.py with every other notebook.)
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_langchain_rag_example(llm_server: str) -> None:
    result = runpy.run_path(str(EXAMPLES / "langchain_rag.py"))["main"](llm_server)
    assert result["layers"] == ["model", "exact", "semantic"], result
    assert result["model_requests"] == 1
    orders = result["retrieval_orders"]
    assert len({tuple(o) for o in orders}) > 1, "retrieval order varied; the cache still hit"
    assert result["stream_chunks"] > 1 and result["streamed_text"].strip()
    assert result["global_cache_requests"] == 1 and result["global_answers_equal"]


def test_langchain_agent_tools_example() -> None:
    """Runs as a user would: the script starts its own function-calling model server."""
    result = runpy.run_path(str(EXAMPLES / "langchain_agent_tools.py"))["main"]()
    runs = result["runs"]
    assert result["refused_side_effecting"]
    assert [r["model_requests"] for r in runs] == [2, 0, 1], runs
    assert result["weather_calls"] == ["Paris"]
    assert runs[0]["tool_results"] and all(
        r["tool_results"] == runs[0]["tool_results"] for r in runs
    )
    assert runs[0]["plan"] == runs[1]["plan"] == runs[2]["plan"]
