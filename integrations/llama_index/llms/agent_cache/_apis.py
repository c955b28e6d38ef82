"""The two APIs ``CachedLLM`` serves (chat, completion) as one spec table each.

Every entry point of ``CachedLLM`` (``chat``/``complete`` x streamed or not x sync or
async) runs one path over an :class:`Api`: how a response is stored and rebuilt, how a
finished stream is joined, how a served entry is replayed as a stream. The stream
helpers below mark and copy what the model or a concurrent request streamed.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from llama_index.core.base.llms.types import ChatResponse, CompletionResponse
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.llms.agent_cache import _codec

from agent_cache import NOT_STORED, SerializationError
from agent_cache.markers import hit_info

__all__ = ["CHAT", "COMPLETE", "Api"]

R = TypeVar("R")


def _stored(payload: Any) -> Any:
    """A payload as the codec's ``encode`` returns it (``None``: ``NOT_STORED``)."""
    return NOT_STORED if payload is None else payload


def _decode_chat(payload: Any) -> ChatResponse:
    message = _codec.message_from_payload(payload)
    if message is None:
        raise SerializationError("not a stored chat answer")
    return ChatResponse(message=message)


def _decode_completion(payload: Any) -> CompletionResponse:
    text = _codec.completion_text(payload)
    if text is None:
        raise SerializationError("not a stored completion")
    return CompletionResponse(text=text)


def _rebuild_chat(response: Any, kwargs: dict[str, Any], coalesced: bool) -> ChatResponse:
    """A chat response of its own (a coalesced one copies the message too)."""
    message = response.message.model_copy(deep=True) if coalesced else response.message
    return ChatResponse(message=message, additional_kwargs=kwargs)


def _rebuild_completion(response: Any, kwargs: dict[str, Any], _: bool) -> CompletionResponse:
    return CompletionResponse(text=response.text, additional_kwargs=kwargs)


def _chat_final(chunks: list[ChatResponse]) -> Any:
    message = _codec.final_message(chunks[-1], [r.delta or "" for r in chunks])
    return _codec.chat_payload(message)


def _completion_final(chunks: list[CompletionResponse]) -> Any:
    last, joined = chunks[-1], "".join(r.delta or "" for r in chunks)
    final = last if len(joined) <= len(last.text) else CompletionResponse(text=joined)
    return _codec.completion_payload(final)


def _chat_events(model: dict[str, Any], messages: Any, response: Any) -> list[BaseEvent]:
    return [
        LLMChatStartEvent(model_dict=model, messages=list(messages), additional_kwargs={}),
        LLMChatEndEvent(messages=list(messages), response=response),
    ]


def _completion_events(model: dict[str, Any], prompt: Any, response: Any) -> list[BaseEvent]:
    return [
        LLMCompletionStartEvent(model_dict=model, prompt=prompt, additional_kwargs={}),
        LLMCompletionEndEvent(prompt=prompt, response=response),
    ]


@dataclass(frozen=True)
class Api(Generic[R]):
    """One API's spec: its name (``"chat"``/``"complete"``, also the key's API and the
    wrapped LLM's method), the response type, the codec of a whole answer, the rebuild of
    a served one with new ``additional_kwargs``, the join of a finished stream into a
    payload, the read and replay of a stored payload as a stream, and the start/end events
    a wrapped call would have sent (``events(model_dict, args, response)``)."""

    name: str
    kind: type[R]
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]
    rebuild: Callable[[Any, dict[str, Any], bool], R]
    final: Callable[[list[Any]], Any]
    read: Callable[[Any], Any]
    replay: Callable[[Any, dict[str, Any]], Iterator[R]]
    events: Callable[[dict[str, Any], Any, Any], list[BaseEvent]]


CHAT = Api(
    "chat", ChatResponse, lambda r: _stored(_codec.chat_payload(r.message)), _decode_chat,
    _rebuild_chat, _chat_final, _codec.message_from_payload, _codec.replay_chat, _chat_events,
)  # fmt: skip
COMPLETE = Api(
    "complete", CompletionResponse, lambda r: _stored(_codec.completion_payload(r)),
    _decode_completion, _rebuild_completion, _completion_final, _codec.completion_text,
    _codec.replay_completion, _completion_events,
)  # fmt: skip


# ---------------------------------------------------------------------- stream helpers
def _as_missed(response: Any) -> Any:
    """The model's response marked as a miss (unless it already says where it came from)."""
    response.additional_kwargs.setdefault("agent_cache", hit_info())
    return response


def missed_marks(stream: Iterable[Any]) -> Generator[Any, None, None]:
    """The model's responses marked as a miss, before any reader sees them."""
    yield from map(_as_missed, stream)


async def amissed_marks(stream: AsyncIterator[Any]) -> AsyncGenerator[Any, None]:
    async for response in stream:
        yield _as_missed(response)


def _as_follower(response: Any) -> Any:
    """A follower's copy of a recorded response: marked coalesced (it cost nothing)."""
    kwargs = {**response.additional_kwargs, "agent_cache": hit_info(coalesced=True)}
    return response.model_copy(update={"additional_kwargs": kwargs})


def _read(got: Any, response: Any) -> Any:
    """This reader's copy of a response of ``got``'s stream: the starter's own, a
    follower's marked (``got.computed`` is known once a response has been read)."""
    return response if got.computed else _as_follower(response)


def followed(got: Any) -> Generator[Any, None, None]:
    """This reader's responses (a consumer that stops early leaves the stream to the
    others, or closes it when it was the last)."""
    with got:
        yield from (_read(got, response) for response in got)


async def afollowed(got: Any) -> AsyncGenerator[Any, None]:
    async with got:
        async for response in got:
            yield _read(got, response)


def reported(total: int | None, prompt: int | None) -> dict[str, int] | int | None:
    """The usage the model reported, split into prompt / completion when it can be
    (nothing reported: ``None``, and the core counts its own estimate apart)."""
    if total is not None and prompt is not None and total >= prompt:
        return {"prompt_tokens": prompt, "completion_tokens": total - prompt}
    return total
