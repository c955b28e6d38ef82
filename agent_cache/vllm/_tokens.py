"""Token ids from the servers' own ``/tokenize`` for KV-event matching (internal).

KV events key blocks by the engine's token ids. Without a caller-supplied tokenizer the
router asks vLLM: ``POST /tokenize`` (at the server root) with the same chat fields the
request carries, so the ids are the engine's exactly. It asks once per new prefix:

* a chat of several messages: the messages before the last, rendered without a
  generation prompt (``add_generation_prompt: false``); with chat templates that close
  each turn with a special token this is a prefix of the request's own rendering, and
  the next turn of a conversation finds it cached. Only these prefix blocks are
  matched (the last message's blocks are new to every replica anyway);
* a single-message chat or a text prompt: the whole prompt (a repeat is free).

Answers are cached (least recently used first out, bounded in entries and tokens). A
server that cannot tokenize (an error, an old release) is not asked again for
:data:`RETRY_AFTER` seconds; the calls meanwhile route by the prefix tree.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_cache.vllm._dispatch import Call

__all__ = ["RETRY_AFTER", "ServerTokens", "TokenizePlan"]

log = logging.getLogger("agent_cache.vllm")

#: Seconds before a server whose ``/tokenize`` failed is asked again.
RETRY_AFTER = 30.0
#: Request fields that change how vLLM renders a chat (sent along to ``/tokenize``).
_CHAT_FIELDS = ("tools", "chat_template", "chat_template_kwargs", "documents")


@dataclass
class TokenizePlan:
    """The ``/tokenize`` call that gives ``call`` its token ids."""

    key: bytes
    call: Call
    partial: bool  # the ids are of a prefix of the prompt only


class ServerTokens:
    """The cache of ``/tokenize`` answers (thread-safe).

    Args:
        clock: Monotonic clock (for the retry pause after a failure).
        max_entries: Answers kept.
        max_tokens: Token ids kept over all answers.
    """

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        max_entries: int = 1024,
        max_tokens: int = 4_000_000,
    ) -> None:
        self._clock = clock
        self.max_entries = max_entries
        self.max_tokens = max_tokens
        self._cache: OrderedDict[bytes, tuple[list[int], bool]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._paused_until = 0.0
        self.calls = 0  # /tokenize calls made
        self.hits = 0  # answers served from the cache
        self.failures = 0

    def __len__(self) -> int:
        return len(self._cache)

    def plan(self, call: Call) -> TokenizePlan | None:
        """Fill ``call.tokens`` from the cache, or the ``/tokenize`` call to make (None:
        nothing to do, or the server is not asked now)."""
        body = call.body
        if body is None or call.tokens is not None or call.blocks is None:
            return None
        tok: dict[str, Any] = {}
        if body.get("model") is not None:
            tok["model"] = body["model"]
        partial = False
        messages = body.get("messages")
        prompt = body.get("prompt")
        if call.path.endswith("chat/completions") and isinstance(messages, list) and messages:
            tok.update({k: body[k] for k in _CHAT_FIELDS if body.get(k) is not None})
            if len(messages) > 1:
                tok["messages"] = messages[:-1]
                tok["add_generation_prompt"] = False
                partial = True
            else:
                tok["messages"] = messages
                for k in ("add_generation_prompt", "continue_final_message"):
                    if body.get(k) is not None:
                        tok[k] = body[k]
        elif call.path.endswith("completions") and isinstance(prompt, str):
            tok["prompt"] = prompt
            if body.get("add_special_tokens") is not None:
                tok["add_special_tokens"] = body["add_special_tokens"]
        else:
            return None
        key = hashlib.sha256(
            json.dumps(tok, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8")
        ).digest()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                call.tokens, call.tokens_partial = list(hit[0]), hit[1]
                return None
            if self._clock() < self._paused_until:
                return None
        return TokenizePlan(key, Call("POST", "tokenize", root=True, body=tok), partial)

    def done(self, plan: TokenizePlan, call: Call, tokens: list[int]) -> None:
        """The server answered ``plan``: cache the ids and give them to ``call``."""
        call.tokens, call.tokens_partial = list(tokens), plan.partial
        with self._lock:
            self.calls += 1
            if plan.key not in self._cache:
                self._held += len(tokens)
            self._cache[plan.key] = (tokens, plan.partial)
            self._cache.move_to_end(plan.key)
            while self._cache and (
                len(self._cache) > self.max_entries or self._held > self.max_tokens
            ):
                _, (old, _p) = self._cache.popitem(last=False)
                self._held -= len(old)

    def failed(self, exc: BaseException) -> None:
        """``/tokenize`` failed: route by the tree for :data:`RETRY_AFTER` seconds."""
        with self._lock:
            self.failures += 1
            self._paused_until = self._clock() + RETRY_AFTER
        log.warning("/tokenize failed (%s): KV-event matching paused for %.0f s", exc, RETRY_AFTER)
