"""The adapters stay thin (issue 21): ``CachedLLM``'s module within 500 lines and no
function under ``integrations/`` over 60 lines (its docstring and nested functions
included), read from the source with :mod:`ast`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

INTEGRATIONS = Path(__file__).resolve().parents[3] / "integrations"
CACHED_LLM = INTEGRATIONS / "llama_index" / "llms" / "agent_cache" / "base.py"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
SOURCES = sorted(INTEGRATIONS.rglob("*.py"))


def _long_functions(path: Path, limit: int) -> list[str]:
    """``name:first-last (n lines)`` for each function of ``path`` over ``limit`` lines
    (decorators not counted, the docstring and the body are)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.lineno
            length = end - node.lineno + 1
            if length > limit:
                found.append(f"{node.name}:{node.lineno}-{end} ({length} lines)")
    return found


def test_the_adapters_are_found() -> None:
    assert CACHED_LLM in SOURCES
    assert len(SOURCES) > 20  # every adapter module, not an empty glob


def test_cached_llm_module_is_within_500_lines() -> None:
    tree = ast.parse(CACHED_LLM.read_text(encoding="utf-8"))
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    assert "CachedLLM" in classes
    lines = len(CACHED_LLM.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"base.py has {lines} lines"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(INTEGRATIONS)))
def test_no_function_is_over_60_lines(path: Path) -> None:
    assert _long_functions(path, MAX_FUNCTION_LINES) == []


def test_the_length_check_sees_a_long_function(tmp_path: Path) -> None:
    """The check itself: a 61-line function (docstring included) is reported, a 60-line
    one and a long class of short methods are not."""
    long = "def f():\n    '''doc'''\n" + "    x = 1\n" * 59
    short = "def g():\n" + "    x = 1\n" * 59
    methods = "class C:\n" + "".join(f"    def m{i}(self):\n        pass\n" for i in range(40))
    source = tmp_path / "m.py"
    source.write_text(long + short + methods, encoding="utf-8")
    assert _long_functions(source, MAX_FUNCTION_LINES) == ["f:1-61 (61 lines)"]
