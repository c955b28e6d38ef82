"""Every test that ``docs/deploy.md`` names exists: its file, its class, its function
(a method inherited from a mixin in another test module counts, as pytest runs it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "deploy.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)((?:::\w+)*)`")


def _classes(path: Path) -> tuple[ast.Module, dict[str, ast.ClassDef]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return tree, {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _imported_from(tree: ast.Module, name: str) -> Path | None:
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("tests.")
            and any((a.asname or a.name) == name for a in node.names)
        ):
            return ROOT / (node.module.replace(".", "/") + ".py")
    return None


def _has_method(path: Path, cls: str, method: str) -> bool:
    tree, classes = _classes(path)
    node = classes.get(cls)
    if node is None:
        source = _imported_from(tree, cls)
        return source is not None and source.exists() and _has_method(source, cls, method)
    if any(
        isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == method
        for item in node.body
    ):
        return True
    return any(
        isinstance(base, ast.Name) and _has_method(path, base.id, method) for base in node.bases
    )


def _exists(file: str, parts: list[str]) -> bool:
    path = ROOT / file
    if not path.exists():
        return False
    if not parts:
        return True
    tree, classes = _classes(path)
    if len(parts) == 1:
        return any(
            isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == parts[0]
            for n in tree.body
        )
    return len(parts) == 2 and parts[0] in classes and _has_method(path, *parts)


def named_tests(text: str) -> list[tuple[str, list[str]]]:
    return [(m.group(1), [p for p in m.group(2).split("::") if p]) for m in NAMED.finditer(text)]


def test_every_test_named_in_the_deploy_doc_exists() -> None:
    named = named_tests(DOC.read_text(encoding="utf-8"))
    assert len([n for n in named if n[1]]) >= 20  # the fault section names its tests
    missing = [f"{f}::{'::'.join(p)}" for f, p in named if not _exists(f, p)]
    assert missing == []


def test_the_check_finds_a_test_that_is_not_there() -> None:
    text = (
        "`tests/unit/core/test_deploy_doc.py::test_every_test_named_in_the_deploy_doc_exists` "
        "`tests/unit/core/test_deploy_doc.py::no_such_test` `tests/unit/no_such_file.py` "
        "`tests/integration/test_tenant_walls_real.py::TestRedisChromaWalls::"
        "test_a_namespace_that_is_not_a_str_deletes_nothing` "
        "`tests/integration/test_tenant_walls_real.py::TestRedisChromaWalls::no_such`"
    )
    found = [_exists(f, p) for f, p in named_tests(text)]
    assert found == [True, False, False, True, False]
