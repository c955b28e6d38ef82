"""Every doctest is checked: none is skipped, and ``make check`` runs DOCTEST_MODULES.

An example that needs a server, a GPU, a network or a model is a plain ``Example::``
literal block (no ``>>>``), so nothing pretends to test it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SKIP = re.compile(r"#\s*doctest:.*\+SKIP")


def doctest_modules(makefile: str) -> list[str]:
    """The paths ``DOCTEST_MODULES :=`` names, backslash continuations included."""
    joined = re.sub(r"\\\n", " ", makefile)
    lines = [ln for ln in joined.splitlines() if re.match(r"DOCTEST_MODULES\s*:?=", ln)]
    assert len(lines) == 1, lines
    return lines[0].split("=", 1)[1].split()


def test_the_parser_follows_continuations() -> None:
    text = "A := 1\nDOCTEST_MODULES := a.py b.py \\\n  c.py \\\n  d.py\n\ncheck:\n\tx\n"
    assert doctest_modules(text) == ["a.py", "b.py", "c.py", "d.py"]


def test_no_doctest_is_skipped() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in ("agent_cache", "integrations")
        for path in sorted((ROOT / top).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SKIP.search(line)
    ]
    assert not found, f"doctest +SKIP left (make it run, or an Example:: block): {found}"


def test_every_doctest_module_exists_and_has_an_example() -> None:
    modules = doctest_modules((ROOT / "Makefile").read_text(encoding="utf-8"))
    assert "agent_cache/cache.py" in modules
    assert len(modules) == len(set(modules)), modules
    for module in modules:
        path = ROOT / module
        assert path.is_file(), module
        assert ">>>" in path.read_text(encoding="utf-8"), module
