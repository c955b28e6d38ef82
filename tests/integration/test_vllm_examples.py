"""The vLLM router examples (LangChain and LlamaIndex) run offline against two vLLM stubs."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("script", ["vllm_langchain_router.py", "vllm_llamaindex_router.py"])
def test_vllm_router_example(script: str, capsys: pytest.CaptureFixture[str]) -> None:
    result: dict[str, Any] = runpy.run_path(str(EXAMPLES / script))["main"]()
    assert result["requests"] == 8 and len(result["endpoints"]) == 2
    assert result["cached_share"] > 0 and result["cached_tokens"] > 0
    # the framework's own usage fields count the same tokens the router counted
    assert result["framework_cached_tokens"] == result["cached_tokens"]
    assert result["framework_prompt_tokens"] == result["prompt_tokens"]
    assert sum(r["cached_tokens"] for r in result["endpoints"].values()) == result["cached_tokens"]
    out = capsys.readouterr().out
    assert "cached" in out and "agrees: True" in out
