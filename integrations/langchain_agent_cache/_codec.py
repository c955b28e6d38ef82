"""JSON codecs for what the adapters store: generations, tool results and step outputs.

Everything goes through ``langchain_core.load`` (``dumpd`` to write, ``load`` with an
explicit allow-list to read) or plain JSON; never pickle. A value that cannot be written
faithfully raises :class:`Uncacheable`; the adapters' ``encode`` turns that into
``agent_cache.NOT_STORED`` (served, not stored) instead of storing a lossy copy.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.load import dumpd, load
from langchain_core.load.serializable import Serializable
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, Generation, GenerationChunk
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from agent_cache import SerializationError

__all__ = [
    "GENERATION_CLASSES",
    "VALUE_CLASSES",
    "Uncacheable",
    "decode_generations",
    "decode_value",
    "encode_generations",
    "encode_value",
    "jsonable",
]

#: What a stored LLM result may deserialize into (``load``'s allow-list).
GENERATION_CLASSES: tuple[type[Serializable], ...] = (
    Generation,
    GenerationChunk,
    ChatGeneration,
    ChatGenerationChunk,
    AIMessage,
    AIMessageChunk,
)
#: What a stored tool result or step output may deserialize into.
VALUE_CLASSES: tuple[type[Serializable], ...] = (
    Document,
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    ChatMessage,
    FunctionMessage,
    Generation,
    ChatGeneration,
)
_MARK = "__agent_cache__"  # envelope key for values that are not plain JSON


class Uncacheable(SerializationError):
    """A value that cannot be stored faithfully (the encoders' error; never crosses the
    core: the adapters answer ``NOT_STORED`` for it)."""


def _load(data: Any, allowed: Iterable[type[Serializable]]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ``load`` is marked beta
        return load(data, allowed_objects=list(allowed))


def _has_not_implemented(node: Any) -> bool:
    if isinstance(node, Mapping):
        if node.get("lc") == 1 and node.get("type") == "not_implemented":
            return True
        return any(_has_not_implemented(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_not_implemented(v) for v in node)
    return False


def _plain_models(value: Any) -> Any:
    """Pydantic models (structured output's ``parsed``) become JSON dicts."""
    if isinstance(value, BaseModel) and not isinstance(value, Serializable):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {k: _plain_models(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_models(v) for v in value]
    return value


def _dump(obj: Serializable) -> dict[str, Any]:
    data = dumpd(obj)
    if _has_not_implemented(data):
        raise Uncacheable(f"{type(obj).__name__} holds a value LangChain cannot serialize")
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Uncacheable(f"{type(obj).__name__} is not JSON: {exc}") from exc
    return data  # type: ignore[no-any-return]


def encode_generations(generations: Sequence[Generation]) -> list[dict[str, Any]]:
    """Every generation (not just the first) as ``dumpd`` JSON.

    Chat messages keep ``tool_calls``, ``usage_metadata`` and ``response_metadata``;
    pydantic objects in ``additional_kwargs`` (structured output's ``parsed``) are stored
    as their JSON dicts, which the output parsers accept back.

    Raises:
        Uncacheable: a generation holds something that would not survive a round trip.
    """
    out = []
    for gen in generations:
        if isinstance(gen, ChatGeneration):
            msg = gen.message
            gen = gen.model_copy(
                update={
                    "message": msg.model_copy(
                        update={
                            "additional_kwargs": _plain_models(msg.additional_kwargs),
                            "response_metadata": _plain_models(msg.response_metadata),
                        }
                    )
                }
            )
        out.append(_dump(gen))
    return out


def decode_generations(data: Any) -> list[Generation]:
    """Inverse of :func:`encode_generations` (only the allow-listed classes load).

    Raises:
        SerializationError: the stored value is not a list of generations.
    """
    if not isinstance(data, list) or not data:
        raise SerializationError("stored LLM result is not a list of generations")
    gens = [_load(item, GENERATION_CLASSES) for item in data]
    if not all(isinstance(g, Generation) for g in gens):
        raise SerializationError("stored LLM result holds something other than generations")
    return gens


def jsonable(value: Any) -> Any:
    """A JSON-like view of an input for keys: messages, documents, models, prompt values."""
    if isinstance(value, BaseMessage):
        data: dict[str, Any] = {"type": value.type, "content": value.content}
        for attr in ("name", "tool_call_id"):
            if getattr(value, attr, None):
                data[attr] = getattr(value, attr)
        if isinstance(value, AIMessage) and value.tool_calls:
            data["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in value.tool_calls]
        return jsonable(data)
    if isinstance(value, Document):
        return {"page_content": value.page_content, "metadata": jsonable(value.metadata)}
    if hasattr(value, "to_messages") and callable(value.to_messages):  # a PromptValue
        return [jsonable(m) for m in value.to_messages()]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return to_jsonable_python(value)


def encode_value(value: Any, models: Collection[type[BaseModel]] = ()) -> Any:
    """A tool result or step output as JSON; plain JSON stays as it is.

    Tuples (``content_and_artifact`` tools), LangChain objects (documents, messages) and
    pydantic models whose class is in ``models`` are wrapped in a small envelope.
    Anything else raises :class:`Uncacheable`.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise Uncacheable("NaN and infinities are not JSON")
        return value
    if isinstance(value, Serializable) and type(value) in VALUE_CLASSES:
        return {_MARK: "lc", "value": _dump(value)}
    if isinstance(value, BaseModel) and not isinstance(value, Serializable):
        cls = type(value)
        if cls not in models:
            raise Uncacheable(f"{cls.__qualname__} is not an allowed output type")
        return {
            _MARK: "model",
            "class": f"{cls.__module__}:{cls.__qualname__}",
            "value": value.model_dump(mode="json"),
        }
    if isinstance(value, tuple):
        return {_MARK: "tuple", "value": [encode_value(v, models) for v in value]}
    if isinstance(value, list):
        return [encode_value(v, models) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        if _MARK in value:
            raise Uncacheable(f"a dict holding the reserved key {_MARK!r}")
        return {k: encode_value(v, models) for k, v in value.items()}
    raise Uncacheable(f"{type(value).__name__} is not JSON-serializable")


def decode_value(data: Any, models: Iterable[type[BaseModel]] = ()) -> Any:
    """Inverse of :func:`encode_value`.

    Pydantic models are rebuilt only when their class is in ``models`` (classes come from
    code, never from the store).

    Raises:
        SerializationError: an envelope names a class that is not allowed.
    """
    if isinstance(data, list):
        return [decode_value(v, models) for v in data]
    if not isinstance(data, Mapping):
        return data
    kind = data.get(_MARK)
    if kind is None:
        return {k: decode_value(v, models) for k, v in data.items()}
    if kind == "lc":
        return _load(data["value"], VALUE_CLASSES)
    if kind == "tuple":
        return tuple(decode_value(v, models) for v in data["value"])
    if kind == "model":
        for cls in models:
            if f"{cls.__module__}:{cls.__qualname__}" == data.get("class"):
                return cls.model_validate(data["value"])
        raise SerializationError(f"stored model {data.get('class')!r} is not an allowed type")
    raise SerializationError(f"unknown stored value kind {kind!r}")
