"""Issue 21: no function over 60 lines in ``agent_cache/`` and ``integrations/``.

A function's length is ``end_lineno - lineno + 1`` (its docstring included), as
:mod:`ast` reports it; nested functions and methods count on their own.
``agent_cache/bench/`` (benchmark scripts) is left out, as the issue says.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 60
TREES = ("agent_cache", "integrations")
SKIPPED = (ROOT / "agent_cache" / "bench",)


def _sources() -> list[Path]:
    return sorted(
        path
        for tree in TREES
        for path in (ROOT / tree).rglob("*.py")
        if not any(path.is_relative_to(skip) for skip in SKIPPED)
    )


def _long_functions(source: str, name: str) -> list[tuple[int, str, int]]:
    """(length, name, first line) of every function in ``source`` over MAX_LINES."""
    tree = ast.parse(source, filename=name)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            if length > MAX_LINES:
                found.append((length, node.name, node.lineno))
    return found


def test_the_walk_sees_the_package() -> None:
    files = {p.relative_to(ROOT).as_posix() for p in _sources()}
    assert "agent_cache/cache.py" in files
    assert "agent_cache/cli.py" in files
    assert any(f.startswith("integrations/") for f in files)
    assert not any(f.startswith("agent_cache/bench/") for f in files)


def test_a_long_function_is_found() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    found = _long_functions(f"def f():\n{body}", "<long>")
    assert found == [(MAX_LINES + 1, "f", 1)]
    assert _long_functions(f"def f():\n{body[: body.rindex('    x')]}", "<short>") == []


@pytest.mark.parametrize("kind", ["def", "async def"])
def test_methods_and_async_functions_count(kind: str) -> None:
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_LINES))
    found = _long_functions(f"class C:\n    {kind} m(self):\n{body}", "<method>")
    assert [(name, line) for _, name, line in found] == [("m", 2)]


def test_no_function_over_60_lines() -> None:
    long = [
        f"{path.relative_to(ROOT).as_posix()}:{line} {name} ({length} lines)"
        for path in _sources()
        for length, name, line in _long_functions(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not long, (
        f"{len(long)} function(s) over {MAX_LINES} lines; split them into named steps:\n"
        + "\n".join(long)
    )
