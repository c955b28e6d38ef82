"""Pure helpers of ``CachedLLM``: model identity, JSON payloads, stream replay, usage.

Stored values are JSON (never pickle): a chat answer is the ``ChatMessage`` as JSON (its
tool-call blocks included), a completion is its text.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    TextBlock,
    ToolCallBlock,
)
from pydantic import BaseModel

from agent_cache import ConfigurationError
from agent_cache.keys import canonical_json
from agent_cache.usage import response_usage

__all__ = [
    "Unkeyable",
    "chat_payload",
    "completion_payload",
    "completion_text",
    "estimate_tokens",
    "final_message",
    "identity",
    "llm_string",
    "message_from_payload",
    "replay_chat",
    "replay_completion",
    "split_text",
    "usage",
]

PAYLOAD_VERSION = 1

# Fields of the wrapped LLM that never change an answer, or must never reach a key:
# credentials, transport, callbacks, formatting hooks.
_NOT_IDENTITY = re.compile(
    r"key|secret|token$|password|auth|header|url|api_base|api_version|timeout|retr|"
    r"callback|client|http|verbose|rate_limiter|to_prompt|output_parser|program_mode|"
    r"context_window|is_chat_model|is_function_calling_model",
    re.IGNORECASE,
)


class Unkeyable(ConfigurationError):
    """A call argument that cannot be canonicalized: the call bypasses the cache (a
    ``ConfigurationError``, so callers need no signal of their own)."""


def _plain(value: Any) -> Any:
    """``value`` as canonical-JSON-able data, or raise :class:`Unkeyable`."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    to_tool = getattr(getattr(value, "metadata", None), "to_openai_tool", None)
    if callable(to_tool):  # a LlamaIndex tool object
        return {"tool": _plain(to_tool(skip_length_check=True))}
    if isinstance(value, BaseModel):
        try:
            return _plain(json.loads(value.model_dump_json()))
        except Exception as exc:  # pydantic cannot serialize a field
            raise Unkeyable(type(value).__name__) from exc
    raise Unkeyable(type(value).__name__)


def identity(llm: Any) -> dict[str, Any]:
    """The wrapped LLM's identity: class, model name and answer-changing settings."""
    out: dict[str, Any] = {"class": llm.class_name()}
    with contextlib.suppress(Exception):  # a broken metadata property
        out["model_name"] = llm.metadata.model_name
    for name, value in llm:
        if _NOT_IDENTITY.search(name):
            continue
        try:
            out[name] = _plain(value)
        except Unkeyable:
            continue  # objects (tokenizers, clients) are not part of the identity
    return out


def llm_string(api: str, model: Any, override: str | None, kwargs: Mapping[str, Any]) -> str:
    """The ``llm_string`` of one call: API, model identity and the call's own kwargs.

    Raises:
        Unkeyable: a kwarg has no JSON form (the call bypasses the cache).
    """
    who = override if override is not None else identity(model)
    return canonical_json({"api": api, "llm": who, "kwargs": _plain(dict(kwargs))})


# ---------------------------------------------------------------- payloads
def _has_tool_calls(message: ChatMessage) -> bool:
    return any(isinstance(b, ToolCallBlock) for b in message.blocks) or bool(
        message.additional_kwargs.get("tool_calls")
    )


def chat_payload(message: ChatMessage) -> dict[str, Any] | None:
    """The stored form of a chat answer, ``None`` when it must not be stored.

    An answer with neither text nor tool calls is not stored; an answer whose message
    cannot be written as JSON is not stored either.
    """
    text = message.content or ""
    if not text.strip() and not _has_tool_calls(message):
        return None
    try:
        data = json.loads(message.model_dump_json())
    except Exception:
        return None
    payload: dict[str, Any] = {"v": PAYLOAD_VERSION, "kind": "chat", "message": data}
    if text:
        payload["text"] = text  # read by the core's shadow-mode comparison
    return payload


def completion_payload(response: CompletionResponse) -> dict[str, Any] | None:
    """The stored form of a completion, ``None`` for an empty one."""
    if not response.text.strip():
        return None
    return {"v": PAYLOAD_VERSION, "kind": "completion", "text": response.text}


def message_from_payload(payload: Any) -> ChatMessage | None:
    """The chat message of a stored payload (``None`` if it is not a chat payload).

    Tool-call ids are replaced by fresh ones, so that a replayed answer never repeats
    an id already present in the conversation.
    """
    if not isinstance(payload, Mapping) or payload.get("kind") != "chat":
        return None
    try:
        message = ChatMessage.model_validate(payload["message"])
    except Exception:
        return None
    renamed: dict[str, str] = {}
    for block in message.blocks:
        if isinstance(block, ToolCallBlock):
            new = f"call_{uuid.uuid4().hex[:24]}"
            if block.tool_call_id:
                renamed[block.tool_call_id] = new
            block.tool_call_id = new
    for call in message.additional_kwargs.get("tool_calls") or ():
        if isinstance(call, dict) and call.get("id") in renamed:
            call["id"] = renamed[call["id"]]
    return message


def completion_text(payload: Any) -> str | None:
    """The text of a stored completion payload (``None`` if it is not one)."""
    if isinstance(payload, Mapping) and payload.get("kind") == "completion":
        text = payload.get("text")
        return text if isinstance(text, str) else None
    return None


# ---------------------------------------------------------------- streams
_PIECE = re.compile(r"\s*\S+")


def split_text(text: str) -> list[str]:
    """Word-sized deltas whose concatenation is ``text`` exactly.

    Example:
        >>> split_text("Hi there. ")
        ['Hi', ' there. ']
    """
    pieces = _PIECE.findall(text)
    rest = text[len("".join(pieces)) :]
    if rest:
        if pieces:
            pieces[-1] += rest
        else:
            pieces = [rest]
    return pieces


def replay_chat(message: ChatMessage, info: dict[str, Any]) -> Iterator[ChatResponse]:
    """A stored answer as a stream: cumulative messages, one word per delta; the last
    response carries the whole message (tool calls included)."""
    pieces = split_text(message.content or "")
    if not pieces:
        yield ChatResponse(message=message, delta="", additional_kwargs=dict(info))
        return
    so_far = ""
    for i, piece in enumerate(pieces):
        so_far += piece
        current = (
            message if i == len(pieces) - 1 else ChatMessage(role=message.role, content=so_far)
        )
        yield ChatResponse(message=current, delta=piece, additional_kwargs=dict(info))


def replay_completion(text: str, info: dict[str, Any]) -> Iterator[CompletionResponse]:
    """A stored completion as a stream of word deltas with cumulative ``text``."""
    so_far = ""
    for piece in split_text(text) or [""]:
        so_far += piece
        yield CompletionResponse(text=so_far, delta=piece, additional_kwargs=dict(info))


def final_message(last: ChatResponse, deltas: Sequence[str]) -> ChatMessage:
    """The complete message of a finished stream.

    LlamaIndex streams carry the cumulative message in each response; when an
    integration only put the delta there, the joined deltas are the text.
    """
    joined = "".join(deltas)
    content = last.message.content or ""
    if len(joined) <= len(content):
        return last.message
    others = [b for b in last.message.blocks if not isinstance(b, TextBlock)]
    return ChatMessage(
        role=last.message.role,
        blocks=[TextBlock(text=joined), *others],
        additional_kwargs=dict(last.message.additional_kwargs),
    )


# ---------------------------------------------------------------- usage
def estimate_tokens(payload: Any) -> int | None:
    """~4 characters a token of the stored answer, when the model reported no usage."""
    if not isinstance(payload, Mapping):
        return None
    text = payload.get("text")
    if not isinstance(text, str):
        text = json.dumps(payload.get("message", ""), ensure_ascii=False)
    return max(1, -(-len(text) // 4))


def usage(response: ChatResponse | CompletionResponse) -> tuple[int | None, int | None, int | None]:
    """(total tokens, prompt tokens, cached prompt tokens) a model call reported."""
    extra = response.additional_kwargs
    total = extra.get("total_tokens")
    prompt = extra.get("prompt_tokens")
    cached = None
    raw = response_usage(response.raw)  # the core's one reader of OpenAI-shaped usage
    if raw is not None:
        total = total if total is not None else raw.total_tokens
        prompt = prompt if prompt is not None else raw.prompt_tokens
        cached = raw.cached_tokens

    def count(v: Any) -> int | None:
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    return count(total), count(prompt), count(cached)
