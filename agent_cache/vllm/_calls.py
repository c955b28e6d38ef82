"""Building router calls and reading their answers: pure helpers, no I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_cache.errors import BackendError
from agent_cache.vllm._dispatch import Call
from agent_cache.vllm._endpoint import Endpoint
from agent_cache.vllm._protocol import derive_cache_salt
from agent_cache.vllm._ratio import CharsPerToken
from agent_cache.vllm.affinity import affinity_key
from agent_cache.vllm.prefix_tree import TOKEN_BLOCK, prefix_blocks, render_for_prefix

__all__ = [
    "CallBuilder",
    "Generation",
    "Message",
    "Prefix",
    "json_body",
    "status_error",
    "token_ids",
]

Message = Mapping[str, Any]
Prefix = str | Sequence[Message]


@dataclass(frozen=True)
class Generation:
    """What a chat or text completion carries besides its prompt: the router's
    arguments (``affinity`` is its ``affinity_key``, ``session`` its ``session_id``)."""

    model: str | None = None
    namespace: str | None = None
    extra_body: Mapping[str, Any] | None = None
    affinity: str | bytes | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    stream: bool = False
    session: str | None = None


def status_error(resp: httpx.Response, ep: Endpoint) -> BackendError:
    """A non-retryable error answer as a :class:`BackendError`."""
    return BackendError(
        f"HTTP {resp.status_code} from {ep.base_url}: {resp.text[:300]!r}", endpoint=ep.base_url
    )


def json_body(resp: httpx.Response, ep: Endpoint) -> dict[str, Any]:
    """The JSON object of a successful answer; BackendError otherwise."""
    if resp.status_code >= 400:
        raise status_error(resp, ep)
    try:
        data = resp.json()
    except ValueError as exc:
        raise BackendError(f"not JSON: {resp.text[:200]!r}", endpoint=ep.base_url) from exc
    if not isinstance(data, dict):
        raise BackendError(f"unexpected body: {data!r:.200}", endpoint=ep.base_url)
    return data


def token_ids(data: Mapping[str, Any], ep: Endpoint) -> list[int]:
    """The ``tokens`` of a ``/tokenize`` answer."""
    tokens = data.get("tokens")
    if not isinstance(tokens, list):
        raise BackendError(
            f"/tokenize answered without tokens: {data!r:.200}", endpoint=ep.base_url
        )
    return [int(t) for t in tokens]


class CallBuilder:
    """Turns the router's arguments into :class:`Call`s (bodies, salts, affinity keys).

    ``chars_per_token`` is a fixed ratio or a :class:`CharsPerToken` estimate (the one
    the dispatcher learns); each call reads its value at the time it is built.
    """

    def __init__(
        self,
        *,
        model: str | None,
        secret: bytes,
        depth: int,
        skip: int,
        block_chars: int = 64,
        chars_per_token: float | CharsPerToken = 4.0,
        tokenizer: Callable[[str | Sequence[Message]], Sequence[int]] | None = None,
    ) -> None:
        self.model = model
        self.secret = secret
        self.depth = depth
        self.skip = skip
        self.block_chars = block_chars
        # shared with the dispatcher, which learns it from usage: read it per call
        self.ratio = (
            chars_per_token
            if isinstance(chars_per_token, CharsPerToken)
            else CharsPerToken(chars_per_token)
        )
        self.tokenizer = tokenizer

    def route(
        self,
        call: Call,
        prompt: str | Sequence[Message] | Sequence[int],
        namespace: str | None,
        tools: Any = None,
        session: str | None = None,
    ) -> Call:
        """Give ``call`` what the prefix policy routes by: block hashes, sizes, session."""
        items: list[Any] = [] if isinstance(prompt, str) else list(prompt)
        call.salt = self.cache_salt(namespace) if namespace is not None else None
        if isinstance(call.body, Mapping) and isinstance(call.body.get("cache_salt"), str):
            call.salt = call.body["cache_salt"]
        if items and all(isinstance(t, int) for t in items):
            call.block_tokens, call.prompt_tokens = float(TOKEN_BLOCK), float(len(items))
            call.tokens = [int(t) for t in items]
        else:
            if self.tokenizer is not None:
                call.tokens = list(self.tokenizer(prompt if isinstance(prompt, str) else items))
            text = render_for_prefix(prompt if isinstance(prompt, str) else items, tools)
            cpt = self.ratio.value
            call.block_tokens = self.block_chars / cpt
            call.prompt_tokens = len(text) / cpt
            call.prompt_chars = len(text)
        call.blocks = prefix_blocks(
            prompt, namespace=namespace, block_chars=self.block_chars, tools=tools
        )
        call.session = session
        return call

    def cache_salt(self, namespace: str) -> str:
        return derive_cache_salt(self.secret, namespace)

    def key_for(
        self, prompt: str | Sequence[Message] | Sequence[int], namespace: str | None
    ) -> bytes:
        return affinity_key(prompt, depth=self.depth, skip=self.skip, namespace=namespace)

    def body(
        self,
        base: Mapping[str, Any],
        model: str | None,
        namespace: str | None,
        extra_body: Mapping[str, Any] | None,
        params: Mapping[str, Any],
        stream: bool,
    ) -> dict[str, Any]:
        """model, then the base fields, then params, then ``extra_body`` (which wins)."""
        body: dict[str, Any] = {}
        if (model or self.model) is not None:
            body["model"] = model or self.model
        body.update(base)
        body.update(params)
        body.update(extra_body or {})
        if namespace is not None:
            body.setdefault("cache_salt", self.cache_salt(namespace))
        if stream:
            body["stream"] = True
            options = dict(body.get("stream_options") or {})
            options.setdefault("include_usage", True)
            body["stream_options"] = options
        else:  # vLLM rejects stream_options on a non-streaming request (HTTP 400)
            body.pop("stream", None)
            body.pop("stream_options", None)
        return body

    def chat(self, messages: Sequence[Message], g: Generation) -> Call:
        """A ``/chat/completions`` call, routed by its messages."""
        msgs = [dict(m) for m in messages]
        body = self.body({"messages": msgs}, g.model, g.namespace, g.extra_body, g.params, g.stream)
        key = _as_key(g.affinity) or self.key_for(msgs, g.namespace)
        call = Call("POST", "chat/completions", body=body, key=key, stream=g.stream)
        session = g.session or _as_str(g.affinity)
        return self.route(call, msgs, g.namespace, body.get("tools"), session)

    def completion(self, prompt: str, g: Generation) -> Call:
        """A ``/completions`` call, routed by its text."""
        body = self.body({"prompt": prompt}, g.model, g.namespace, g.extra_body, g.params, g.stream)
        key = _as_key(g.affinity) or self.key_for(prompt, g.namespace)
        call = Call("POST", "completions", body=body, key=key, stream=g.stream)
        return self.route(call, prompt, g.namespace, None, g.session or _as_str(g.affinity))

    def tokenize(
        self,
        prompt: str | Sequence[Message],
        model: str | None,
        add_special: bool | None,
        chat: Mapping[str, Any] | None = None,
    ) -> Call:
        """``/tokenize``; ``chat`` holds the chat-only fields that change the rendered
        prompt (``tools``, ``chat_template_kwargs``, ``add_generation_prompt``, ...)."""
        body: dict[str, Any] = {}
        if (model or self.model) is not None:
            body["model"] = model or self.model
        if isinstance(prompt, str):
            body["prompt"] = prompt
        else:
            body["messages"] = [dict(m) for m in prompt]
            body.update({k: v for k, v in (chat or {}).items() if v is not None})
        if add_special is not None:
            body["add_special_tokens"] = add_special
        return Call("POST", "tokenize", root=True, body=body)

    def warm(self, ep: Endpoint, prefix: Prefix, model: str | None, namespace: str | None) -> Call:
        """A 1-token request for ``prefix``, pinned to ``ep`` (no failover, usage not
        recorded: a warm-up is not traffic)."""
        params = {"max_tokens": 1, "temperature": 0.0}
        g = Generation(model, namespace, params=params)
        call = self.completion(prefix, g) if isinstance(prefix, str) else self.chat(prefix, g)
        call.key, call.pinned, call.record = None, ep, False
        return call


def _as_key(value: str | bytes | None) -> bytes | None:
    return value.encode("utf-8") if isinstance(value, str) else value


def _as_str(value: str | bytes | None) -> str | None:
    return value.hex() if isinstance(value, bytes) else value
