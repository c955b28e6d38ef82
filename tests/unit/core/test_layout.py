"""Issue 21, item 8: unit tests laid out one folder per package, none left flat."""

from __future__ import annotations

from pathlib import Path

UNIT = Path(__file__).resolve().parents[1]
#: One folder per package tested: the core (``agent_cache``), its vLLM router and prompt
#: layout (``agent_cache.vllm``, ``agent_cache.prompt``), its benchmarks, each adapter,
#: and the tests that hold both adapters to one contract.
FOLDERS = {"core", "vllm", "bench", "langchain", "llama_index", "adapters"}


def test_no_test_file_sits_flat_in_tests_unit() -> None:
    assert sorted(p.name for p in UNIT.glob("*.py")) == []


def test_every_folder_is_a_package_folder_with_tests() -> None:
    folders = {p.name for p in UNIT.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert folders == FOLDERS
    for name in FOLDERS:
        assert list((UNIT / name).glob("test_*.py")), f"tests/unit/{name} holds no test"
