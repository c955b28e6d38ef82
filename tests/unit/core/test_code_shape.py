"""Issue 21: no function over 60 lines in ``agent_cache/`` and ``integrations/``.

A function's length is ``end_lineno - lineno + 1`` (its docstring included), as
:mod:`ast` reports it; nested functions and methods count on their own.
``agent_cache/bench/`` (benchmark scripts) is left out, as the issue says.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
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


# ---------------------------------------------------------------------- async twins
#: Issue 21, item 2: a hand-written sync/async pair is at most 3 lines each over one
#: shared body. The exceptions are the drivers, which a generator cannot share (a sync
#: generator and an async one each loop over the same flows).
MAX_TWIN_LINES = 3
DRIVERS = {
    "agent_cache/_stream.py:_Cursor.follow",
    "integrations/llama_index/llms/agent_cache/_path.py:<module>.drive",
}


def _body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's body in lines, its docstring left out."""
    body = fn.body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
        body = body[1:]
    if not body:
        return 0
    end = body[-1].end_lineno
    assert end is not None
    return end - body[0].lineno + 1


def _twins(source: str, name: str) -> list[tuple[str, int, int]]:
    """``(scope.sync_name, sync lines, async lines)`` of every pair ``f``/``af`` (or
    ``_f``/``_af``) defined side by side in a module or a class, both over the limit."""
    tree = ast.parse(source, filename=name)
    scopes: list[ast.Module | ast.ClassDef] = [tree]
    scopes += [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    found = []
    for scope in scopes:
        fns = {
            n.name: n for n in scope.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for aname, afn in fns.items():
            if not isinstance(afn, ast.AsyncFunctionDef):
                continue
            if aname.startswith("_a"):
                sname = "_" + aname[2:]
            elif aname.startswith("a"):
                sname = aname[1:]
            else:
                continue
            sfn = fns.get(sname)
            if sfn is None or isinstance(sfn, ast.AsyncFunctionDef):
                continue
            sync, asyn = _body_lines(sfn), _body_lines(afn)
            if min(sync, asyn) > MAX_TWIN_LINES:
                where = scope.name if isinstance(scope, ast.ClassDef) else "<module>"
                found.append((f"{where}.{sname}", sync, asyn))
    return found


def test_a_long_twin_pair_is_found() -> None:
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_TWIN_LINES + 1))
    source = f"class C:\n    def get(self):\n{body}\n    async def aget(self):\n{body}"
    assert _twins(source, "<twins>") == [("C.get", 4, 4)]
    short = "".join(f"        x{i} = {i}\n" for i in range(MAX_TWIN_LINES))
    source = f"class C:\n    def get(self):\n{body}\n    async def aget(self):\n{short}"
    assert _twins(source, "<one short>") == []
    flat = "".join(f"    x{i} = {i}\n" for i in range(MAX_TWIN_LINES + 1))
    module = f'def _go():\n    """doc."""\n{flat}\nasync def _ago():\n{flat}'
    assert _twins(module, "<module>") == [("<module>._go", 4, 4)]


def test_every_async_twin_is_three_lines_over_one_body() -> None:
    found = {
        f"{path.relative_to(ROOT).as_posix()}:{name}": (sync, asyn)
        for path in _sources()
        for name, sync, asyn in _twins(path.read_text(encoding="utf-8"), str(path))
    }
    assert set(found) >= DRIVERS, f"drivers no longer twins: {sorted(DRIVERS - set(found))}"
    long = {k: v for k, v in found.items() if k not in DRIVERS}
    assert not long, (
        f"{len(long)} sync/async pair(s) with both bodies over {MAX_TWIN_LINES} lines; "
        "write the logic once (a flow, or a shared helper) and keep each twin to the one "
        "blocking or awaited call:\n"
        + "\n".join(f"{k} (sync {s}, async {a})" for k, (s, a) in sorted(long.items()))
    )
