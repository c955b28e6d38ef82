"""Rerankers that verify a semantic match: a cross-encoder scores (question, candidate).

Both wrappers load their model on the first :meth:`score` call and return one score in
[0, 1] per candidate, higher meaning "the same question".
"""

from __future__ import annotations

import importlib.util
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from agent_cache import _fork
from agent_cache.errors import BackendError, ConfigurationError, MissingDependencyError
from agent_cache.protocols import Reranker
from agent_cache.semantic import Combiner

__all__ = [
    "CrossEncoderReranker",
    "FlagEmbeddingReranker",
    "reranker_from",
]


def _sigmoid(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    out: npt.NDArray[np.float64] = 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free
    return out


def _clamp(values: npt.NDArray[np.float64]) -> list[float]:
    return [min(1.0, max(0.0, float(v))) if math.isfinite(v) else 0.0 for v in values]


def _importable(name: str) -> bool:
    """Whether ``import name`` can succeed, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except ValueError:  # in sys.modules without a __spec__: importable
        return True


def _outputs_probabilities(model: Any) -> bool:
    """Whether a CrossEncoder's ``predict`` already applies a sigmoid (ST's default)."""
    activation = getattr(model, "activation_fn", None)
    if activation is None:
        activation = getattr(model, "default_activation_function", None)
    return type(activation).__name__ == "Sigmoid"


class _Lazy(ABC):
    """Thread-safe one-time model loading shared by the wrappers."""

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))

    @abstractmethod
    def _build(self) -> Any:
        """Load and return the model (called once, under the lock)."""

    def _load(self) -> Any:
        model = self._model
        if model is not None:
            return model
        with self._lock:
            if self._model is None:
                self._model = self._build()
            return self._model


class CrossEncoderReranker(_Lazy):
    """A sentence-transformers ``CrossEncoder`` as a :class:`~agent_cache.protocols.Reranker`.

    Scores are mapped to [0, 1]: a model whose ``predict`` already applies a sigmoid (the
    sentence-transformers default for one-label models) is used as is; a model returning
    raw logits gets a sigmoid; a multi-label model gets a softmax and its last label
    ("relevant" / "duplicate" by convention) is the score.

    Args:
        model: A hub name or local path, or an already loaded ``CrossEncoder`` (any
            object with ``predict``).
        device: Torch device for a model loaded by name.

    Example:
        >>> reranker = CrossEncoderReranker("cross-encoder/quora-distilroberta-base")
        >>> reranker.name                     # nothing is loaded until score()
        'cross-encoder/quora-distilroberta-base'
    """

    def __init__(self, model: str | Any, *, device: str = "cpu") -> None:
        super().__init__()
        #: the calibrated combiner saved beside a model trained by ``train-verifier``
        #: (read without loading the model); ``None`` for any other cross-encoder
        self.combiner: Combiner | None = None
        if isinstance(model, str):
            if not model.strip():
                raise ConfigurationError("a cross-encoder model name or path is required")
            self.name = model
            if Path(model).is_dir():
                self.combiner = Combiner.load(model)
        elif callable(getattr(model, "predict", None)):
            self.name = str(getattr(model, "model_name_or_path", None) or type(model).__name__)
            self._model = model
        else:
            raise ConfigurationError(
                f"expected a model name or a CrossEncoder, got {type(model).__name__}"
            )
        self.device = device

    def _build(self) -> Any:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise MissingDependencyError(
                "sentence-transformers", "rerank", feature="CrossEncoderReranker"
            ) from exc
        try:
            return CrossEncoder(self.name, device=self.device)
        except Exception as exc:
            raise BackendError(
                f"cannot load cross-encoder {self.name!r}: {exc}", layer="semantic"
            ) from exc

    def score(self, query: str, candidates: Sequence[str]) -> list[float]:
        """One score in [0, 1] per candidate, in order."""
        if not candidates:
            return []
        model = self._load()
        pairs = [(query, candidate) for candidate in candidates]
        try:
            raw = np.asarray(
                model.predict(pairs, convert_to_numpy=True, show_progress_bar=False),
                dtype=np.float64,
            )
        except Exception as exc:
            raise BackendError(
                f"cross-encoder {self.name!r} failed: {exc}", layer="semantic"
            ) from exc
        if raw.ndim == 2 and raw.shape[1] > 1:  # multi-label: softmax, last label
            if np.all((raw >= 0) & (raw <= 1)) and np.allclose(raw.sum(axis=1), 1.0):
                return _clamp(raw[:, -1])  # already a distribution
            shifted = np.exp(raw - raw.max(axis=1, keepdims=True))
            return _clamp((shifted / shifted.sum(axis=1, keepdims=True))[:, -1])
        values = raw.reshape(len(pairs))
        if not _outputs_probabilities(model):
            values = _sigmoid(values)
        return _clamp(values)


class FlagEmbeddingReranker(_Lazy):
    """A FlagEmbedding ``FlagReranker`` (e.g. ``BAAI/bge-reranker-base``).

    Scores come from ``compute_score(pairs, normalize=True)``, FlagEmbedding's own
    sigmoid, so each is in [0, 1]. FlagEmbedding is the ``rerank`` extra.

    Args:
        model: A hub name or local path of a ``bge-reranker`` model.
        use_fp16: Half precision (GPU only in practice).
        device: Device such as ``"cpu"`` or ``"cuda:0"``; ``None`` lets FlagEmbedding
            choose (it may start a process pool on a multi-GPU machine).

    Example:
        >>> reranker = FlagEmbeddingReranker()  # nothing is loaded until score()
        >>> reranker.name
        'BAAI/bge-reranker-base'
    """

    def __init__(
        self,
        model: str = "BAAI/bge-reranker-base",
        use_fp16: bool = False,
        *,
        device: str | None = "cpu",
    ) -> None:
        super().__init__()
        if not model or not model.strip():
            raise ConfigurationError("a reranker model name or path is required")
        if not _importable("FlagEmbedding"):
            raise MissingDependencyError("FlagEmbedding", "rerank", feature=model)
        self.name = model
        self.use_fp16 = use_fp16
        self.device = device

    def _build(self) -> Any:
        try:
            from FlagEmbedding import FlagReranker
        except ImportError as exc:
            raise MissingDependencyError("FlagEmbedding", "rerank", feature=self.name) from exc
        kwargs: dict[str, Any] = {"use_fp16": self.use_fp16}
        if self.device is not None:
            kwargs["devices"] = self.device
        try:
            return FlagReranker(self.name, **kwargs)
        except Exception as exc:
            raise BackendError(
                f"cannot load reranker {self.name!r}: {exc}", layer="semantic"
            ) from exc

    def score(self, query: str, candidates: Sequence[str]) -> list[float]:
        """One score in [0, 1] per candidate, in order."""
        if not candidates:
            return []
        model = self._load()
        pairs = [(query, candidate) for candidate in candidates]
        try:
            raw = model.compute_score(pairs, normalize=True)
        except Exception as exc:
            raise BackendError(f"reranker {self.name!r} failed: {exc}", layer="semantic") from exc
        values = np.atleast_1d(np.asarray(raw, dtype=np.float64)).reshape(-1)
        if values.shape[0] != len(pairs):
            raise BackendError(
                f"reranker {self.name!r} returned {values.shape[0]} scores for {len(pairs)} pairs",
                layer="semantic",
            )
        return _clamp(values)


def reranker_from(spec: str | Reranker | None) -> Reranker | None:
    """Build the verifier from a name, a path or an object.

    ``None`` means no reranker; a name starting with ``BAAI/bge-reranker`` is a
    :class:`FlagEmbeddingReranker`; any other string a :class:`CrossEncoderReranker`; an
    object with ``score`` is used as is.

    Example:
        >>> reranker_from(None) is None
        True
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        if not spec.strip():
            raise ConfigurationError("reranker name must not be empty")
        if spec.startswith("BAAI/bge-reranker"):
            return FlagEmbeddingReranker(spec)
        return CrossEncoderReranker(spec)
    if callable(getattr(spec, "score", None)):
        return spec
    raise ConfigurationError(
        f"reranker must be a model name, a path or an object with score(), "
        f"got {type(spec).__name__}"
    )
