"""The LlamaIndex adapter's doctests: ``pytest --doctest-modules`` cannot collect these
files (it would import them as a top-level ``agent_cache`` package, the core's name), so
they run here, imported by their real module names."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ADAPTER = ROOT / "integrations" / "llama_index"


def _modules_with_examples() -> list[str]:
    found = []
    for path in sorted(ADAPTER.rglob("*.py")):
        if re.search(r"^\s*>>> ", path.read_text(encoding="utf-8"), re.M):
            rel = path.relative_to(ROOT / "integrations").with_suffix("")
            found.append(".".join(p for p in rel.parts if p != "__init__"))
    return found


MODULES = _modules_with_examples()


def test_the_adapter_has_examples_to_run() -> None:
    assert "llama_index.llms.agent_cache._codec" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
