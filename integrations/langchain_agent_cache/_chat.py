"""Pure helpers for chat prompts: question/scope split, sampling, hit marking, replay.

LangChain hands a cache ``prompt = dumps(messages)`` and an ``llm_string`` (model
identity, bound tools, temperature, stop). The semantic layer must embed the question
only, so :func:`split_prompt` takes the last human turn's text as the question and turns
everything else that changes the answer (system prompt, earlier turns, tool results,
non-text parts of the last turn) into the *scope*: an exact filter, never embedded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, Generation

from agent_cache import CacheHit
from agent_cache.markers import hit_info

__all__ = [
    "ENDPOINT_FIELDS",
    "NO_QUESTION",
    "SplitPrompt",
    "mark_coalesced",
    "mark_hit",
    "mark_miss",
    "model_identity",
    "replay_chunks",
    "split_prompt",
    "temperature_of",
]

#: Stands in for the question when a chat has no human text (the scope then holds it all).
NO_QUESTION = "(no user message)"
_TEMPERATURE = re.compile(
    r"""['"]temperature['"]\s*[:,]\s*(-?\d+(?:\.\d*)?(?:[eE]-?\d+)?|None|null)"""
)
_PIECE = re.compile(r"\s*\S+\s*|\s+")
#: Constructor fields of a serialized model that say *where* and *how* it is reached, not
#: what it answers: replicas of one model behind different URLs or keys share entries.
ENDPOINT_FIELDS = frozenset(
    {
        "openai_api_base",
        "base_url",
        "api_base",
        "azure_endpoint",
        "endpoint_url",
        "openai_api_key",
        "api_key",
        "openai_organization",
        "organization",
        "openai_proxy",
        "request_timeout",
        "timeout",
        "max_retries",
        "default_headers",
        "default_query",
        "http_client",
        "http_async_client",
        "streaming",
        "stream_usage",
        "verbose",
    }
)
_RUN_ID_PREFIX = "lc_run-"


@dataclass(frozen=True)
class SplitPrompt:
    """A prompt as the core sees it: the question it embeds and the scope it filters by."""

    question: str
    context: dict[str, Any] | None


def _serialized_messages(data: Any) -> list[tuple[str, Mapping[str, Any]]] | None:
    if not isinstance(data, list) or not data:
        return None
    out = []
    for item in data:
        if not (isinstance(item, Mapping) and item.get("lc") == 1):
            return None
        kwargs = item.get("kwargs")
        if item.get("type") != "constructor" or not isinstance(kwargs, Mapping):
            return None
        role = kwargs.get("type")
        if not isinstance(role, str):
            ident = item.get("id")
            role = str(ident[-1]) if isinstance(ident, list) and ident else "unknown"
        out.append((role, kwargs))
    return out


def _text_and_rest(content: Any) -> tuple[str, list[Any]]:
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    rest: list[Any] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        else:
            rest.append(block)
    return "\n".join(texts), rest


def _turn(role: str, kwargs: Mapping[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """What of one message changes the answer; random ids become positions."""

    def canon(call_id: Any) -> str:
        return ids.setdefault(str(call_id), f"call#{len(ids)}")

    turn: dict[str, Any] = {"role": role, "content": kwargs.get("content", "")}
    if kwargs.get("name"):
        turn["name"] = kwargs["name"]
    calls = kwargs.get("tool_calls") or []
    if calls:
        turn["tool_calls"] = [
            {"name": c.get("name"), "args": c.get("args"), "id": canon(c.get("id"))}
            for c in calls
            if isinstance(c, Mapping)
        ]
    if kwargs.get("tool_call_id"):
        turn["tool_call_id"] = canon(kwargs["tool_call_id"])
    extra = kwargs.get("additional_kwargs") or {}
    if isinstance(extra, Mapping) and extra.get("function_call"):
        turn["function_call"] = extra["function_call"]
    return turn


def split_prompt(prompt: str) -> SplitPrompt:
    """Split a LangChain cache prompt into the question and its scope.

    A plain string prompt (completion models) is its own question with no scope. A
    serialized chat becomes: question = the text of the last human message; scope =
    every message (role, content, name, tool calls with their arguments, tool results),
    the last human message reduced to its non-text parts (images change the answer).
    Response metadata of earlier turns and random tool-call ids are left out, so two
    equal conversations share a scope.

    Example:
        >>> from langchain_core.load import dumps
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> s = split_prompt(dumps([SystemMessage("Be brief."), HumanMessage("Hi?")]))
        >>> s.question, s.context["messages"][0]["content"]
        ('Hi?', 'Be brief.')
    """
    messages = None
    if prompt.lstrip().startswith("["):
        try:
            messages = _serialized_messages(json.loads(prompt))
        except ValueError:
            messages = None
    if messages is None:
        return SplitPrompt(prompt, None)
    last_human = max((i for i, (role, _) in enumerate(messages) if role == "human"), default=-1)
    ids: dict[str, str] = {}
    turns: list[dict[str, Any]] = []
    question = ""
    for i, (role, kwargs) in enumerate(messages):
        if i == last_human:
            question, rest = _text_and_rest(kwargs.get("content", ""))
            turns.append({"role": role, "question": True, "content": rest})
        else:
            turns.append(_turn(role, kwargs, ids))
    if not question.strip():
        question = NO_QUESTION
    return SplitPrompt(question, {"messages": turns})


def model_identity(llm_string: str, ignore: frozenset[str] = ENDPOINT_FIELDS) -> str:
    """``llm_string`` without the fields in ``ignore`` (endpoint, keys, timeouts).

    Only LangChain's serialized form (``json---params``) is rewritten; anything else is
    returned as it is.

    Example:
        >>> model_identity('{"kwargs": {"model_name": "m", "base_url": "http://a"}}---[]')
        '{"kwargs": {"model_name": "m"}}---[]'
    """
    head, sep, params = llm_string.partition("---")
    if not sep or not head.startswith("{"):
        return llm_string
    try:
        data = json.loads(head)
    except ValueError:
        return llm_string
    if not isinstance(data, dict) or not isinstance(data.get("kwargs"), dict):
        return llm_string
    kwargs = {k: v for k, v in data["kwargs"].items() if k not in ignore}
    return json.dumps({**data, "kwargs": kwargs}, sort_keys=True) + sep + params


def temperature_of(llm_string: str) -> float | None:
    """The sampling temperature named in ``llm_string`` (the last one wins), if any.

    Example:
        >>> temperature_of('{"kwargs": {"temperature": 0.0}}---[("temperature", 0.7)]')
        0.7
    """
    found = _TEMPERATURE.findall(llm_string)
    if not found or found[-1] in ("None", "null"):
        return None
    return float(found[-1])


def mark_hit(generations: Sequence[Generation], hit: CacheHit) -> list[Generation]:
    """Copies of ``generations`` that say they came from the cache.

    Chat messages get ``response_metadata["agent_cache"]`` (:mod:`agent_cache.markers`:
    ``hit`` true, layer, score, matched question, key, and as ``saved_usage`` the usage
    the original call spent) and a zero ``usage_metadata``: a hit cost no new tokens.
    Run ids of the original call are dropped.
    """
    return _mark(generations, hit_info(hit), served=True)


def mark_coalesced(generations: Sequence[Generation]) -> list[Generation]:
    """Copies of ``generations`` answered by a concurrent identical call: marked
    ``{"hit": False, "coalesced": True, ...}``, zero usage (that call, not this one, spent
    the tokens)."""
    return _mark(generations, hit_info(coalesced=True), served=True)


def mark_miss(generations: Sequence[Generation]) -> list[Generation]:
    """Copies of ``generations`` this request paid the model for: marked ``{"hit":
    False, ...}`` (the same keys as a hit's), their usage kept."""
    return _mark(generations, hit_info(), served=False)


def _mark(
    generations: Sequence[Generation], info: dict[str, Any], *, served: bool
) -> list[Generation]:
    out: list[Generation] = []
    for gen in generations:
        if not isinstance(gen, ChatGeneration):
            out.append(gen)
            continue
        msg = gen.message
        meta = {**info}
        update: dict[str, Any] = {}
        if served and isinstance(msg, AIMessage):
            if msg.usage_metadata:  # LangChain's own figures (with their details)
                meta["saved_usage"] = dict(msg.usage_metadata)
            update["usage_metadata"] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        update["response_metadata"] = {**msg.response_metadata, "agent_cache": meta}
        if isinstance(msg.id, str) and msg.id.startswith(_RUN_ID_PREFIX):
            update["id"] = None
        out.append(gen.model_copy(update={"message": msg.model_copy(update=update)}))
    return out


def replay_chunks(generation: Generation) -> Iterator[ChatGenerationChunk]:
    """A stored answer as stream chunks: its text word by word, then a last chunk with
    the tool calls, usage and metadata, so ``merge(chunks)`` equals the stored message.

    Example:
        >>> from langchain_core.outputs import ChatGeneration
        >>> from langchain_core.messages import AIMessage
        >>> [c.text for c in replay_chunks(ChatGeneration(message=AIMessage("a b")))]
        ['a ', 'b', '']
    """
    if isinstance(generation, ChatGeneration) and isinstance(generation.message, AIMessage):
        msg = generation.message
    else:
        msg = AIMessage(content=generation.text)
    content = msg.content
    if isinstance(content, str):
        pieces = _PIECE.findall(content)
        for i, piece in enumerate(pieces):
            extra = msg.additional_kwargs if i == 0 else {}
            yield ChatGenerationChunk(
                message=AIMessageChunk(content=piece, additional_kwargs=extra, id=msg.id)
            )
        empty: str | list[Any] = ""
        first_extra = {} if pieces else msg.additional_kwargs
    else:
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content=content, additional_kwargs=msg.additional_kwargs, id=msg.id
            )
        )
        empty, first_extra = [], {}
    calls = [
        {"name": c["name"], "args": json.dumps(c["args"]), "id": c.get("id"), "index": i}
        for i, c in enumerate(msg.tool_calls)
    ]
    calls += [
        {"name": c.get("name"), "args": c.get("args"), "id": c.get("id"), "index": len(calls) + i}
        for i, c in enumerate(msg.invalid_tool_calls)
    ]
    last = AIMessageChunk(
        content=empty,
        additional_kwargs=first_extra,
        tool_call_chunks=calls,  # type: ignore[arg-type]
        usage_metadata=msg.usage_metadata,
        response_metadata=msg.response_metadata,
        id=msg.id,
        chunk_position="last",
    )
    info = generation.generation_info
    yield ChatGenerationChunk(message=last, generation_info=info)
