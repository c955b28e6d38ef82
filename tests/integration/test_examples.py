"""Every script and notebook in examples/ runs in the test suite."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_core_quickstart_script() -> None:
    ns = runpy.run_path(str(EXAMPLES / "core_quickstart.py"))
    result = ns["main"]()
    # 6 questions: exact, semantic and template hits leave 3 model calls
    assert result["model_calls"] == 3, result
    assert result["exact"] >= 1 and result["semantic"] >= 1 and result["template"] == 1
    assert result["removed"] >= 3


@pytest.mark.parametrize(
    "notebook", sorted((EXAMPLES / "notebooks").glob("*.ipynb")), ids=lambda p: p.name
)
def test_notebook_runs(notebook: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(notebook.parent)}},
    ).execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
