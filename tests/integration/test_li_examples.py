"""The LlamaIndex example scripts run against the real local model server.

(The notebook ``examples/notebooks/llamaindex_quickstart.ipynb`` is run by
``test_examples.py``, which executes every notebook; it starts its own server.)
"""

from __future__ import annotations

import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Settings

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def restore_settings() -> Iterator[None]:
    saved = (Settings._llm, Settings._embed_model)
    yield
    Settings._llm, Settings._embed_model = saved


def run(name: str, llm_url: str) -> Any:
    return runpy.run_path(str(EXAMPLES / name))["main"](llm_url)


def test_query_engine_example(llm_server: str, restore_settings: None) -> None:
    result = run("llamaindex_query_engine.py", llm_server)
    # 4 questions + 1 streamed repeat: a paraphrase (semantic), a repeat and the stream
    # (exact) leave 2 model calls
    assert result["model_calls"] == 2, result
    assert result["semantic"] == 1 and result["exact"] == 2
    answers = result["answers"]
    assert answers["How do I reset my password?"] == answers["How can I reset my password?"]
    assert result["streamed"].strip() == answers["How do I reset my password?"]
    assert result["stream_deltas"] > 1


def test_agent_example(llm_server: str) -> None:
    result = run("llamaindex_agent.py", llm_server)
    first, repeat, paraphrase = result["runs"]
    assert first == {"answer": "Sunny and 21 C in Oslo.", "model_calls": 1, "tool_runs": 1}
    assert repeat == first  # the agent ran from the LLM and tool caches
    assert paraphrase["answer"].startswith("Sunny and 21 C in")
    assert paraphrase["model_calls"] <= 2 and paraphrase["tool_runs"] <= 2
    assert result["plans"][0] == result["plans"][1] and result["plans"][0]
