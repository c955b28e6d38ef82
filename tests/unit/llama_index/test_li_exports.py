"""The LlamaIndex adapters' public names, and their namespace-package layout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import llama_index.llms.agent_cache as llms
import llama_index.postprocessor.agent_cache as postprocessor
import llama_index.tools.agent_cache as tools

ROOT = Path(__file__).resolve().parents[3]


def test_exported_names_are_pinned() -> None:
    assert sorted(llms.__all__) == [
        "CacheHitEvent",
        "CacheMissEvent",
        "CachedLLM",
        "DEFAULT_QUESTION_VARS",
        "QuestionExtractor",
        "Scope",
        "query_cache_info",
    ]
    assert postprocessor.__all__ == ["StablePrefixPostprocessor"]
    assert sorted(tools.__all__) == ["CachedTool", "cache_step", "cache_tool"]
    for module in (llms, postprocessor, tools):
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_namespace_packages_have_no_init() -> None:
    base = ROOT / "integrations" / "llama_index"
    for folder in (base, base / "llms", base / "postprocessor", base / "tools"):
        assert folder.is_dir() and not (folder / "__init__.py").exists(), folder


def test_fresh_interpreter_merges_with_installed_llama_index(tmp_path: Path) -> None:
    code = (
        "import llama_index.core, llama_index.llms.openai_like\n"
        "from llama_index.llms.agent_cache import CachedLLM\n"
        "from llama_index.postprocessor.agent_cache import StablePrefixPostprocessor\n"
        "from llama_index.tools.agent_cache import cache_tool\n"
        "import sys; print('agent_cache' in sys.modules and 'langchain_core' not in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_core_never_imports_llama_index() -> None:
    offenders = [
        p
        for p in (ROOT / "agent_cache").rglob("*.py")
        if "llama_index" in p.read_text(encoding="utf-8").replace("LlamaIndex", "")
        and any(
            line.lstrip().startswith(("import llama_index", "from llama_index"))
            for line in p.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert offenders == []
