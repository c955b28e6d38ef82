"""The one request path of ``CachedLLM``, shared by its eight entry points.

A :class:`Request` decides everything about one call (its key, the core's outcome, the
response and the events) and hands each I/O step (the core's fetch, the wrapped LLM's
call) out as a function of no arguments: :meth:`Request.whole` for a whole answer,
:meth:`Request.streamed` for a stream. :func:`drive` runs the steps now for the sync
entry points, :func:`adrive` awaits them for the async ones, so sync and async share one
body each way; a :class:`Mode` holds the little that differs (the methods' ``a`` prefix,
the error guard, the stream wrappers). What differs between chat and completion is the
API's spec (:mod:`._apis`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar, cast

import llama_index.core.instrumentation as instrument
from llama_index.llms.agent_cache import _codec, _structured
from llama_index.llms.agent_cache._apis import (
    CHAT,
    Api,
    afollowed,
    amissed_marks,
    followed,
    missed_marks,
    reported,
)
from llama_index.llms.agent_cache.events import CacheHitEvent, CacheMissEvent
from llama_index.llms.agent_cache.question import Scope

from agent_cache import (
    NOT_STORED,
    AgentCacheError,
    CacheHit,
    ConfigurationError,
    Fetched,
    SerializationError,
)
from agent_cache.markers import hit_info
from agent_cache.policy import request_policy

if TYPE_CHECKING:
    from llama_index.llms.agent_cache.base import CachedLLM

__all__ = ["ASYNC", "HINT", "SYNC", "Mode", "Request", "adrive", "dispatcher", "drive"]

log = logging.getLogger("agent_cache.llama_index")
#: ``CachedLLM``'s dispatcher (named after ``base``, where it has always lived).
dispatcher = instrument.get_dispatcher("llama_index.llms.agent_cache.base")  # type: ignore[attr-defined]
#: The question found in the template arguments of the enclosing predict/stream call.
HINT: ContextVar[str | None] = ContextVar("agent_cache_question_hint", default=None)
#: ``llm.chat(messages, agent_cache="bypass")``: the request's cache policy (never passed on).
_POLICY_KWARG = "agent_cache"
#: The core policy of a request inside a structured call, whose write waits for the parse
#: (``refresh``: the core's ``bypass``, a model call that neither reads nor writes).
_DEFERRED = {"use": "no_store", "no_store": "no_store", "refresh": "bypass", "bypass": "bypass"}
#: One I/O step: its result (sync entry points) or an awaitable of it (async ones).
Step: TypeAlias = Callable[[], Any]
R = TypeVar("R")
T = TypeVar("T")


@contextlib.contextmanager
def _skipped() -> Iterator[None]:
    """A request the cache refuses (e.g. a prompt over ``max_prompt_bytes``) goes to the
    wrapped LLM: logged, never raised."""
    try:
        yield
    except AgentCacheError as exc:
        log.warning("agent-cache skipped: %s", exc)


def _guard(step: Step) -> Any:
    """A core call's result; ``None`` when the cache refused it."""
    with _skipped():
        return step()
    return None


async def _aguard(step: Step) -> Any:
    with _skipped():
        return await step()
    return None


async def _then(pending: Awaitable[Any], use: Callable[[Any], T]) -> T:
    return use(await pending)


def _announced(replay: Iterator[Any], done: Callable[[Any], None]) -> Generator[Any, None, None]:
    """A replay that announces the hit (``done(last)``) once it has run to its end."""
    last = None
    for last in replay:
        yield last
    if last is not None:
        done(last)


async def _aannounced(replay: Iterator[Any], done: Callable[[Any], None]) -> AsyncGenerator[Any]:
    for response in _announced(replay, done):
        yield response


@dataclass(frozen=True)
class Mode:
    """What differs between the sync and the async entry points: the prefix of the
    wrapped LLM's and the core's methods (``chat``/``achat``, ``fetch``/``afetch``), the
    guard of a core call the cache may refuse, ``then(result, use)`` (``use`` applied to
    a step's result once it is there), and the stream wrappers."""

    prefix: str
    guard: Callable[[Step], Any]
    then: Callable[[Any, Callable[[Any], Any]], Any]
    marks: Callable[[Any], Any]
    announce: Callable[[Iterator[Any], Callable[[Any], None]], Any]
    follow: Callable[[Any], Any]


SYNC = Mode("", _guard, lambda result, use: use(result), missed_marks, _announced, followed)
ASYNC = Mode("a", _aguard, _then, amissed_marks, _aannounced, afollowed)


def _resume(steps: Generator[Step, Any, Any], result: Any) -> tuple[Step | None, Any]:
    """The body's next step, or ``None`` and what it returned."""
    try:
        return steps.send(result), None
    except StopIteration as done:
        return None, done.value


def drive(steps: Generator[Step, Any, T]) -> T:
    """Run a body's steps now (a sync entry point: a step returns its result)."""
    step, value = _resume(steps, None)
    while step is not None:
        step, value = _resume(steps, step())
    return cast(T, value)


async def adrive(steps: Generator[Step, Any, T]) -> T:
    """Run a body's steps, each awaited (an async entry point)."""
    step, value = _resume(steps, None)
    while step is not None:
        step, value = _resume(steps, await step())
    return cast(T, value)


@dataclass(frozen=True)
class _Call:
    scope: Scope
    llm_string: str


class Request(Generic[R]):
    """One call of ``owner``'s ``api`` (``args``: the messages or the prompt); the
    request's policy is popped from ``kwargs`` (never passed on), the rest go to the
    wrapped LLM. ``call`` is ``None`` when the request bypasses the cache."""

    def __init__(
        self, owner: CachedLLM, api: Api[R], args: Any, kwargs: dict[str, Any], mode: Mode
    ) -> None:
        self.owner, self.api, self.args, self.kwargs, self.mode = owner, api, args, kwargs, mode
        self.policy = request_policy(kwargs.pop(_POLICY_KWARG, None))
        self.call = None if self.policy == "bypass" else self._keyed()

    def _keyed(self) -> _Call | None:
        """The lookup key; ``None`` (bypass) for unkeyable kwargs, no text to key on or a
        bad input."""
        owner, api = self.owner, self.api
        try:
            identity = _codec.llm_string(api.name, owner.llm, owner.llm_string, self.kwargs)
            hint, extractor = HINT.get(), owner._extractor
            if api is CHAT:
                scope = extractor.scope_messages(self.args, hint)
            else:
                scope = extractor.scope_prompt(self.args or "", hint)
        except ConfigurationError as exc:
            log.debug("agent-cache: %s call bypasses the cache: %s", api.name, exc)
            return None
        return _Call(scope, identity)

    # ------------------------------------------------------------------ the two bodies
    def whole(self) -> Generator[Step, Any, R]:
        """One whole answer: the core's fetch, and the wrapped LLM's call on a miss or
        when the cache refuses the request."""
        ask = self._asker("")
        if self.call is not None:
            fetch, args = self._core("fetch"), self._fetch_args(self.call, ask)
            found = self._outcome(self.call, (yield self._guarded(lambda: fetch(**args))))
            if found is not None:
                return found
        answer: R = yield ask
        return answer

    # The wrapped LLM streams through the wrapper's callback manager (a miss is counted
    # once, by its own decorator); a replayed hit fires no callback event (zero tokens),
    # only the dispatcher's start/end events once the replay has run. Concurrent
    # identical streamed misses share one model stream (``LayeredCache.fetch_stream``),
    # stored once it has run to its end.
    def streamed(self) -> Generator[Step, Any, Any]:
        """A streamed request: a replay, or the model's stream read with the other
        identical requests; the wrapped LLM's own stream when the cache refuses it."""
        open_ = self._asker("stream_")
        if self.call is None:
            return (yield open_)
        fetch = self._stream_args(self.call, lambda: self.mode.then(open_(), self.mode.marks))
        fetch_stream = self._core("fetch_stream")
        got = yield self._guarded(lambda: fetch_stream(**fetch))
        if got is None:
            return (yield open_)
        replay = self._replay(self.call, got)
        if replay is not None:
            return self.mode.announce(replay, self._announce_hit)
        return self.mode.follow(got)

    # ------------------------------------------------------------------ steps
    def _asker(self, kind: str) -> Step:
        """The wrapped LLM's call (``chat``, ``astream_complete``, ...) for this request."""
        name = self.mode.prefix + kind + self.api.name
        return lambda: getattr(self.owner._silent_inner(), name)(self.args, **self.kwargs)

    def _core(self, name: str) -> Callable[..., Any]:
        return getattr(self.owner.cache, self.mode.prefix + name)  # type: ignore[no-any-return]

    def _guarded(self, step: Step) -> Step:
        return functools.partial(self.mode.guard, step)

    # ------------------------------------------------------------------ core arguments
    def _lookup_args(self, call: _Call) -> dict[str, Any]:
        return {
            "prompt": call.scope.question,
            "llm_string": call.llm_string,
            "namespace": self.owner.namespace,
            "context": call.scope.context,
        }

    def _write_args(self, call: _Call, policy: str, tokens: Callable[[Any], Any]) -> dict[str, Any]:
        owner = self.owner
        where = {**self._lookup_args(call), "ttl": owner.ttl, "tags": owner.tags}
        return {**where, "policy": policy, "tokens": tokens}

    def _paid_tokens(self, response: Any) -> Any:
        """What the model reported for one paid response (and the KV-layer numbers)."""
        total, prompt_tokens, cached = _codec.usage(response)
        if prompt_tokens is not None:
            self.owner.cache.record_model_usage(prompt_tokens, cached)
        return reported(total, prompt_tokens)

    def _fetch_args(self, call: _Call, ask: Step) -> dict[str, Any]:
        """``fetch``'s arguments (``ask``: the wrapped LLM's call); inside a structured
        call the write waits for the parse (the policy the core gets is then
        :data:`_DEFERRED`'s)."""
        core = self.policy if _structured.current() is None else _DEFERRED[self.policy]
        args = self._write_args(call, core, self._paid_tokens)
        return {**args, "encode": self.api.encode, "decode": self.api.decode, "compute": ask}

    def _stream_args(self, call: _Call, start: Step) -> dict[str, Any]:
        """``fetch_stream``'s arguments: the finished stream's payload (``api.final``;
        none: not stored), a stored one it cannot replay a miss (``decode`` raises: the
        core asks the model again), its last response's usage as the tokens (and the
        KV-layer numbers)."""
        paid: list[Any] = []

        def join(chunks: list[Any]) -> Any:
            if not chunks:
                return None
            paid.append(chunks[-1])
            return self.api.final(chunks)

        def readable(payload: Any) -> Any:
            if self.api.read(payload) is None:
                raise SerializationError(f"not a stored {self.api.name} answer")
            return payload

        def tokens(_payload: Any) -> Any:  # the stream's usage rides on its last response
            return self._paid_tokens(paid[0]) if paid else None

        args = self._write_args(call, self.policy, tokens)
        codec = {"encode": lambda p: NOT_STORED if p is None else p, "decode": readable}
        return {**args, **codec, "start_stream": start, "join": join}

    # ------------------------------------------------------------------ outcomes
    def _served(self, call: _Call, hit: CacheHit) -> dict[str, Any]:
        """Announce a served hit; returns what goes in ``additional_kwargs``."""
        dispatcher.event(
            CacheHitEvent(
                layer=hit.layer,
                score=hit.score,
                key=hit.key,
                question=call.scope.question,
                matched_prompt=hit.matched_prompt,
                namespace=self.owner.namespace,
            )
        )
        return {"agent_cache": hit_info(hit)}

    def _missed(self, call: _Call) -> None:
        dispatcher.event(
            CacheMissEvent(question=call.scope.question, namespace=self.owner.namespace)
        )

    def _announce_hit(self, response: Any) -> None:
        """The start/end events a wrapped call would have sent, for a served hit (no
        callback-manager event: token counters count a hit as zero)."""
        owner = self.owner
        payload = owner.to_payload() if hasattr(owner, "to_payload") else {}
        for event in self.api.events(payload, self.args, response):
            dispatcher.event(event)

    def _outcome(self, call: _Call, got: Fetched | None) -> R | None:
        """The response for a core outcome; ``None``: call the wrapped LLM here. Inside a
        structured call, what was served (evicted if the parse fails) and what to store
        (once it succeeds) are remembered."""
        if got is None:
            return None
        pending = _structured.current()
        if pending is not None:
            where = {**self._lookup_args(call), "ttl": self.owner.ttl, "tags": self.owner.tags}
            pending.record(got, self.policy, self.api.encode, where)
        response = got.value
        if not isinstance(response, self.api.kind):
            return None
        if got.computed:
            self._missed(call)
            response.additional_kwargs["agent_cache"] = hit_info()  # type: ignore[attr-defined]
            return response
        if got.hit is not None:  # a fresh object, decoded from the entry
            served = self.api.rebuild(response, self._served(call, got.hit), False)
            self._announce_hit(served)
            return served
        # the concurrent caller's answer: a copy of its own
        return self.api.rebuild(response, {"agent_cache": hit_info(coalesced=True)}, True)

    def _replay(self, call: _Call, got: Any) -> Iterator[Any] | None:
        """The replay of a served stream outcome (a hit the core found readable, or a
        concurrent request's answer); ``None`` (a miss announced) when the model's
        stream is to be read."""
        if not got.served:
            self._missed(call)
            return None
        hit, item = got.hit, self.api.read(got.value)
        if hit is None:
            return self.api.replay(item, {"agent_cache": hit_info(coalesced=True)})
        return self.api.replay(item, self._served(call, hit))
