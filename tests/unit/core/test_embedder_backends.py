"""Choosing the embedding backend: spec prefixes, the auto default, the ONNX embedder's
set-up rules. No model is loaded here (the real export is an integration test)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from agent_cache import embedders, onnx_embedder
from agent_cache.batching import MicroBatcher
from agent_cache.embedders import (
    DEFAULT_EMBEDDER,
    MemoEmbedder,
    SentenceTransformerEmbedder,
    embedder_from,
)
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.onnx_embedder import OnnxEmbedder, default_threads, export_onnx, onnx_cache_dir
from agent_cache.testing import HashEmbedder


def model_of(built: object) -> object:
    assert isinstance(built, MemoEmbedder)
    inner = built.inner
    return inner.inner if isinstance(inner, MicroBatcher) else inner


@pytest.mark.parametrize(
    ("spec", "backend", "precision"),
    [
        ("onnx:all-MiniLM-L6-v2", "onnx-fp32", "fp32"),
        ("onnx-int8:all-MiniLM-L6-v2", "onnx-int8", "int8"),
        ("onnx:", "onnx-fp32", "fp32"),
        ("onnx-int8", None, None),  # no colon: a model name, not a backend
    ],
)
def test_prefix_selects_the_onnx_backend(
    spec: str, backend: str | None, precision: str | None
) -> None:
    built = embedder_from(spec)
    model = model_of(built)
    if backend is None:
        assert isinstance(model, SentenceTransformerEmbedder | OnnxEmbedder)
        assert model.name == spec
        return
    assert isinstance(model, OnnxEmbedder)
    assert (model.backend, model.precision) == (backend, precision)
    assert model._session is None and model.path is None  # no I/O until the first embed


def test_torch_prefix_and_backend_argument() -> None:
    model = model_of(embedder_from("torch:some/model"))
    assert isinstance(model, SentenceTransformerEmbedder) and model.name == "some/model"
    assert model.backend == "torch"
    forced = model_of(embedder_from("all-MiniLM-L6-v2", backend="onnx-int8"))
    assert isinstance(forced, OnnxEmbedder) and forced.precision == "int8"
    with pytest.raises(ConfigurationError, match="backend"):
        embedder_from("all-MiniLM-L6-v2", backend="tensorrt")


def test_batching_can_be_turned_off() -> None:
    built = embedder_from("onnx:", batching=False)
    assert isinstance(built, MemoEmbedder) and isinstance(built.inner, OnnxEmbedder)


def test_auto_runs_every_model_on_onnx() -> None:
    # torch is never the silent default: ONNX Runtime for the default and any other model,
    # sentence-transformers only as the fallback for a model ONNX cannot run
    default = model_of(embedder_from(DEFAULT_EMBEDDER))
    assert isinstance(default, OnnxEmbedder) and default.precision == "fp32"
    assert isinstance(default.fallback, SentenceTransformerEmbedder)  # installed in dev
    other = model_of(embedder_from("some/model"))
    assert isinstance(other, OnnxEmbedder) and other.name == "some/model"


def test_auto_has_no_fallback_without_sentence_transformers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = embedders.importlib.util.find_spec
    monkeypatch.setattr(
        embedders.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sentence_transformers" else real(name, *a),
    )
    assert model_of(embedder_from(DEFAULT_EMBEDDER)).fallback is None  # type: ignore[union-attr]


def test_only_a_model_onnx_cannot_run_falls_back_loudly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unsupported(*args: object, **kwargs: object) -> Path:
        raise ConfigurationError("the ONNX builder runs BERT encoders; this is 't5'")

    monkeypatch.setattr(onnx_embedder, "_exported", unsupported)
    fallback = HashEmbedder(dim=12)
    embedder = OnnxEmbedder(fallback=fallback)
    with caplog.at_level(logging.WARNING, logger="agent_cache.onnx_embedder"):
        rows = embedder.embed(["a question"])
    np.testing.assert_allclose(rows, fallback.embed(["a question"]), rtol=1e-6)
    assert "BERT encoders" in caplog.text and "slower" in caplog.text
    assert embedder.dimension == 12
    assert embedder.backend == "fallback"  # HashEmbedder declares no backend
    assert embedder.source.startswith("fallback:")


def test_a_broken_model_is_an_error_not_a_slower_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> Path:
        raise RuntimeError("exporter exploded")

    monkeypatch.setattr(onnx_embedder, "_exported", broken)
    with pytest.raises(BackendError, match="exporter exploded"):
        OnnxEmbedder(fallback=HashEmbedder(dim=12)).embed(["a question"])
    with pytest.raises(BackendError, match="exporter exploded"):
        OnnxEmbedder().embed(["no fallback"])


def test_onnx_embedder_validates_its_arguments() -> None:
    for kwargs in ({"precision": "int4"}, {"threads": 0}, {"batch_size": 0}, {"model": ""}):
        with pytest.raises(ConfigurationError):
            OnnxEmbedder(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="precision"):
        export_onnx("all-MiniLM-L6-v2", precision="fp16")  # type: ignore[arg-type]


def test_export_refuses_what_the_graph_does_not_reproduce(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="local model directory"):
        export_onnx(str(tmp_path / "missing"), cache_dir=tmp_path)
    model = tmp_path / "cls-model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "tokenizer.json").write_text("{}")
    (model / "1_Pooling" / "config.json").write_text(
        '{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}'
    )
    with pytest.raises(ConfigurationError, match="mean pooling"):
        export_onnx(str(model), cache_dir=tmp_path)


def test_export_path_changes_with_the_model_files(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    first = onnx_embedder._export_path(model, "fp32", tmp_path / "cache")
    assert first == onnx_embedder._export_path(model, "fp32", tmp_path / "cache")
    assert first != onnx_embedder._export_path(model, "int8", tmp_path / "cache")
    (model / "config.json").write_text('{"changed": true}')
    assert first.parent != onnx_embedder._export_path(model, "fp32", tmp_path / "cache").parent


def test_cache_dir_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_CACHE_ONNX_DIR", str(tmp_path / "env"))
    assert onnx_cache_dir(tmp_path / "arg") == tmp_path / "arg"
    assert onnx_cache_dir() == tmp_path / "env"
    monkeypatch.delenv("AGENT_CACHE_ONNX_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert onnx_cache_dir() == tmp_path / "xdg" / "agent-cache" / "onnx"


def test_default_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_CACHE_EMBED_THREADS", raising=False)
    monkeypatch.setattr(onnx_embedder.os, "sched_getaffinity", lambda pid: {0, 1})
    assert default_threads() == 1
    monkeypatch.setattr(onnx_embedder.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert default_threads() == 4
    monkeypatch.setenv("AGENT_CACHE_EMBED_THREADS", "3")
    assert default_threads() == 3
    for bad in ("0", "many"):
        monkeypatch.setenv("AGENT_CACHE_EMBED_THREADS", bad)
        with pytest.raises(ConfigurationError):
            default_threads()
