"""``AgentCache``: a LangChain ``BaseCache`` over the core's ``LayeredCache``.

Use it globally (``set_llm_cache(AgentCache())``) or per model (``ChatOpenAI(cache=...)``).
"""

from __future__ import annotations

import inspect
import itertools
import logging
import os
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, Generation

from agent_cache import (
    NOT_STORED,
    AStreamed,
    CacheHit,
    CachePolicy,
    ConfigurationError,
    Fetched,
    LayeredCache,
    SerializationError,
    Streamed,
    default_cache,
)
from agent_cache._names import reject_unknown
from agent_cache.markers import hit_info
from langchain_agent_cache._chat import (
    ENDPOINT_FIELDS,
    mark_coalesced,
    mark_hit,
    mark_miss,
    model_identity,
    replay_chunks,
    split_prompt,
    temperature_of,
)
from langchain_agent_cache._codec import Uncacheable, decode_generations, encode_generations

__all__ = ["AgentCache", "CachedResult", "FetchedResult", "Sampling"]

log = logging.getLogger("agent_cache.langchain")

Sampling = Literal["cache", "skip", "n_samples"]
_SAMPLING = ("cache", "skip", "n_samples")
_RECORD_VERSION = 1
_S = TypeVar("_S")
_T = TypeVar("_T")
#: Context key of an ``n_samples`` answer's slot (slot 0 is the unsampled entry's key).
SAMPLE_KEY = "agent_cache_sample"
# The slots that this context's ``lookup`` misses chose, for the ``update`` that follows
# (LangChain's BaseCache calls lookup, the model, then update, in one context).
_MISSED_SLOTS: ContextVar[dict[tuple[str, str], int] | None] = ContextVar(
    "agent_cache_missed_slots", default=None
)


@dataclass(frozen=True)
class CachedResult:
    """A hit: the generations to serve and where they came from (layer, score, key)."""

    generations: list[Generation]
    hit: CacheHit


@dataclass(frozen=True)
class FetchedResult:
    """What :meth:`AgentCache.fetch_result` returns.

    Attributes:
        generations: what to return to LangChain (hits and coalesced answers are marked
            in ``response_metadata["agent_cache"]`` and report zero usage).
        hit: the entry served, ``None`` when the model was called (here or by a
            concurrent identical request).
        computed: this call ran the model (the one miss that costs tokens).
    """

    generations: list[Generation]
    hit: CacheHit | None
    computed: bool


@dataclass(frozen=True)
class _Plan:
    question: str
    context: dict[str, Any] | None
    llm_string: str  # the model identity the core keys on
    mode: str  # "cache" | "skip" | "n_samples" for this call
    slot: int = 0  # the n_samples slot this call reads and writes

    def policy(self, given: CachePolicy) -> CachePolicy:
        """The core policy of this call: a skipped sampled call neither reads nor writes."""
        return "bypass" if self.mode == "skip" else given

    def key(self, cache: AgentCache) -> dict[str, Any]:
        """The core's lookup arguments of this call in ``cache``'s namespace."""
        return {
            "prompt": self.question,
            "llm_string": self.llm_string,
            "namespace": cache.namespace,
            "context": self.context,
        }


def _worth_storing(generations: Sequence[Generation]) -> bool:
    """False for empty answers (no text, no tool calls): those are failures, not answers."""
    for gen in generations:
        if gen.text.strip():
            return True
        if isinstance(gen, ChatGeneration) and isinstance(gen.message, AIMessage):
            msg = gen.message
            if (
                msg.tool_calls
                or msg.invalid_tool_calls
                or msg.additional_kwargs
                or (isinstance(msg.content, list) and msg.content)
            ):
                return True
    return False


def _copy(chunk: ChatGenerationChunk, update: dict[str, Any] | None = None) -> ChatGenerationChunk:
    """A chunk with a message of its own (``update`` applied to the message)."""
    return ChatGenerationChunk(
        message=chunk.message.model_copy(update=update or {}),
        generation_info=chunk.generation_info,
    )


def _slotted(context: dict[str, Any] | None, slot: int) -> dict[str, Any] | None:
    """The scope of one ``n_samples`` slot: slot 0 is the unsampled scope itself."""
    return context if slot == 0 else {**(context or {}), SAMPLE_KEY: slot}


def _joined(chunks: list[ChatGenerationChunk]) -> list[Generation]:
    """A finished stream's generations (none for an empty stream: not stored)."""
    return list(generate_from_stream(iter(chunks)).generations) if chunks else []


async def _achain(
    head: Iterable[_T], stream: AsyncIterable[_S], each: Callable[[_S], _T]
) -> AsyncIterator[_T]:
    """``itertools.chain(head, map(each, stream))`` over an async ``stream``: the one
    async loop of :meth:`AgentCache.astream_result` (what it yields is decided by the
    sync helpers its sync twin uses)."""
    for item in head:
        yield item
    async for got in stream:
        yield each(got)


def _alisted(
    compute: Callable[[], Awaitable[Sequence[Generation]]],
) -> Callable[[], Awaitable[list[Generation]]]:
    """``compute``'s generations as a list (what the core stores), on the async path."""

    async def listed() -> list[Generation]:
        return list(await compute())

    return listed


def _tokens(generations: Sequence[Generation]) -> dict[str, int] | None:
    """The usage the model reported (``usage_metadata``), input and output apart."""
    spent = {"input": 0, "output": 0}
    for gen in generations:
        if isinstance(gen, ChatGeneration) and isinstance(gen.message, AIMessage):
            usage = gen.message.usage_metadata
            if usage:
                spent["input"] += int(usage.get("input_tokens", 0))
                spent["output"] += int(usage.get("output_tokens", 0))
    return spent if spent["input"] or spent["output"] else None


#: The ``LayeredCache`` arguments ``AgentCache(**layered)`` passes on.
_LAYERED_ARGS = frozenset(inspect.signature(LayeredCache.__init__).parameters) - {"self"}


class AgentCache(BaseCache):
    """A LangChain LLM cache backed by the layered exact + semantic cache.

    Every generation is stored (chat generations with ``tool_calls``, structured output
    and ``usage_metadata`` intact) as JSON via ``langchain_core.load``, never pickle. For
    chat prompts the semantic layer embeds only the last human message; the system
    prompt, earlier turns, tool results and ``llm_string`` (model, bound tools,
    temperature, stop) form the scope, an exact filter, so the same follow-up question in
    two different conversations is a miss, not a wrong hit.

    Args:
        cache: the core cache to use, or a directory (``AgentCache(".agent_cache")``: the
            process's shared cache there, :func:`agent_cache.default_cache`). ``None``
            with no ``**layered`` or only ``path=`` is that shared cache too; other
            ``**layered`` arguments build a cache of this object's own.
        namespace: the core namespace (own threshold, version and invalidation).
        sampling: what to do when the call samples (temperature > 0): ``"cache"`` (the
            default: cache as usual), ``"skip"`` (neither read nor write), or
            ``"n_samples"`` (keep ``n_samples`` answers in as many slots, each sampled
            request taking the next slot in turn: a miss until every slot holds an
            answer, then a rotation among them, so self-consistency keeps its
            diversity). Both go through the core's ``fetch`` like any request: a skipped
            call is the core's ``"bypass"``, a slot is one entry (one lookup a request).
        n_samples: how many answers ``"n_samples"`` keeps.
        ttl: seconds an entry stays valid (``None``: the core's TTL policy).
        tags: tags on every entry, for ``LayeredCache.invalidate``.
        mark_hits: put the marker of :mod:`agent_cache.markers` in
            ``response_metadata["agent_cache"]`` of the chat messages returned through
            this cache (hits, and misses on the ``fetch_result``/``stream_result`` path)
            and report zero ``usage_metadata`` for served ones.
        ignore_fields: constructor fields of a serialized model left out of its identity
            (default: endpoint URL, API keys, timeouts, retries, HTTP clients), so replicas
            of one model behind different URLs share entries. ``frozenset()`` keeps all.
        **layered: arguments for a new ``LayeredCache`` (``path``, ``reranker``, ...)
            when ``cache`` is not given.

    Example (sets LangChain's global cache, kept in ``.agent_cache``)::

        from langchain_core.globals import set_llm_cache
        set_llm_cache(AgentCache(path=".agent_cache"))
    """

    def __init__(
        self,
        cache: LayeredCache | str | os.PathLike[str] | None = None,
        *,
        namespace: str = "default",
        sampling: Sampling = "cache",
        n_samples: int = 3,
        ttl: float | None = None,
        tags: Sequence[str] = (),
        mark_hits: bool = True,
        ignore_fields: frozenset[str] = ENDPOINT_FIELDS,
        **layered: Any,
    ) -> None:
        own = set(inspect.signature(AgentCache.__init__).parameters) - {"self", "layered"}
        reject_unknown("AgentCache", layered, _LAYERED_ARGS | own)
        if cache is not None and layered:
            raise ConfigurationError("pass either cache= or LayeredCache arguments, not both")
        if sampling not in _SAMPLING:
            raise ConfigurationError(f"sampling must be one of {_SAMPLING}, not {sampling!r}")
        if n_samples < 1:
            raise ConfigurationError("n_samples must be >= 1")
        self._owns = False
        if isinstance(cache, str | os.PathLike):  # AgentCache(".agent_cache")
            cache = default_cache(cache)
        elif cache is None and set(layered) <= {"path"} and layered.get("path", "") is not None:
            # AgentCache() / AgentCache(path=...): the process's one cache for that directory,
            # the same object every adapter's default uses (one database, one model)
            cache = default_cache(layered.get("path"))
        elif cache is None:
            cache, self._owns = LayeredCache(**layered), True
        if not isinstance(cache, LayeredCache):
            raise ConfigurationError(
                f"cache must be a LayeredCache or a directory path, not {type(cache).__name__}"
            )
        self.layered: LayeredCache = cache
        self.namespace = namespace
        self.sampling = sampling
        self.n_samples = n_samples
        self.ttl = ttl
        self.tags = tuple(tags)
        self.mark_hits = mark_hits
        self.ignore_fields = frozenset(ignore_fields)
        self._turn = itertools.count()  # the n_samples slots, taken in turn

    def __repr__(self) -> str:
        # Stable on purpose: LangChain puts a model's repr, with its cache, into the
        # llm_string, so an address in it would change every entry's key per process.
        return f"AgentCache(namespace={self.namespace!r}, sampling={self.sampling!r})"

    # ------------------------------------------------------------------ pure helpers
    def _plan(self, prompt: str, llm_string: str, slot: int | None = None) -> _Plan:
        """The core request of one call; an ``n_samples`` call takes ``slot``, else the
        next slot in turn."""
        split = split_prompt(prompt)
        temperature = temperature_of(llm_string)
        sampled = temperature is not None and temperature > 0
        mode = self.sampling if sampled else "cache"
        if mode == "n_samples":
            slot = next(self._turn) % self.n_samples if slot is None else slot
        else:
            slot = 0
        identity = model_identity(llm_string, self.ignore_fields)
        return _Plan(split.question, _slotted(split.context, slot), identity, mode, slot)

    def _result(self, hit: CacheHit | None) -> CachedResult | None:
        if hit is None:
            return None
        try:
            generations = decode_generations(self._samples(hit.response, hit.key)[0])
        except (SerializationError, KeyError, TypeError, ValueError) as exc:
            log.warning("agent-cache: unreadable LLM entry %s served as a miss: %s", hit.key, exc)
            return None
        if self.mark_hits:
            generations = mark_hit(generations, hit)
        return CachedResult(generations, hit)

    @staticmethod
    def _samples(record: Any, key: str | None = None) -> list[Any]:
        if not isinstance(record, Mapping) or record.get("v") != _RECORD_VERSION:
            raise SerializationError("not an LLM entry written by AgentCache", key=key)
        # "samples": the former n_samples record (its first answer is served)
        return list(record.get("samples") or [record["generations"]])

    def _decode(self, record: Any) -> list[Generation]:
        """A stored record as generations (raises on one this cache did not write: the
        core then evicts it and calls the model)."""
        return decode_generations(self._samples(record)[0])

    def _encoder(self, plan: _Plan) -> Callable[[Sequence[Generation]], Any]:
        """The record to store for a model call's generations, or ``NOT_STORED``."""

        def encode(generations: Sequence[Generation]) -> Any:
            record = self._record(generations, plan)
            return NOT_STORED if record is None else record

        return encode

    @staticmethod
    def _record(generations: Sequence[Generation], plan: _Plan) -> dict[str, Any] | None:
        if plan.mode == "skip" or not _worth_storing(generations):
            return None
        try:
            encoded = encode_generations(generations)
        except Uncacheable as exc:
            log.warning("agent-cache: LLM result not cached: %s", exc)
            return None
        return {"v": _RECORD_VERSION, "generations": encoded}

    # ------------------------------------------------------------------ richer lookups
    def lookup_result(self, prompt: str, llm_string: str) -> CachedResult | None:
        """Like :meth:`lookup`, with the :class:`~agent_cache.CacheHit` (layer, score)."""
        plan = self._plan(prompt, llm_string)
        hit = None if plan.mode == "skip" else self.layered.lookup(**plan.key(self))
        return self._looked_up(prompt, llm_string, plan, hit)

    async def alookup_result(self, prompt: str, llm_string: str) -> CachedResult | None:
        """Async twin of :meth:`lookup_result`."""
        plan = self._plan(prompt, llm_string)
        hit = None if plan.mode == "skip" else await self.layered.alookup(**plan.key(self))
        return self._looked_up(prompt, llm_string, plan, hit)

    def _looked_up(
        self, prompt: str, llm_string: str, plan: _Plan, hit: CacheHit | None
    ) -> CachedResult | None:
        """A lookup's result (``hit``: ``None`` for a miss or a skipped sampled call); an
        ``n_samples`` miss leaves its slot to the ``update`` that follows in this context."""
        found = self._result(hit)
        if found is None and plan.mode == "n_samples":
            missed = _MISSED_SLOTS.get()
            if missed is None or len(missed) > 256:  # bounded: a lookup may have no update
                missed = {}
                _MISSED_SLOTS.set(missed)
            missed[(prompt, llm_string)] = plan.slot
        return found

    def _update_plan(self, prompt: str, llm_string: str) -> _Plan:
        """The plan of an ``update``: the slot its ``lookup`` missed, if any."""
        missed = _MISSED_SLOTS.get()
        slot = None if missed is None else missed.pop((prompt, llm_string), None)
        return self._plan(prompt, llm_string, slot)

    # ------------------------------------------------------------------ one request path
    def fetch_result(
        self,
        prompt: str,
        llm_string: str,
        compute: Callable[[], Sequence[Generation]],
        *,
        policy: CachePolicy = "use",
    ) -> FetchedResult:
        """The cached generations, or ``compute()``'s, through the core's
        :meth:`~agent_cache.LayeredCache.fetch`: concurrent identical misses make one
        model call, the usage is recorded once, ``policy`` is the core's.

        Example (``model_call`` calls the model)::

            got = cache.fetch_result(prompt, llm_string, lambda: model_call())
            got.hit is None and got.computed  # a miss, paid for once
        """
        fetch = self._fetch_args(prompt, llm_string, policy)
        return self._fetched(self.layered.fetch(compute=lambda: list(compute()), **fetch))

    async def afetch_result(
        self,
        prompt: str,
        llm_string: str,
        compute: Callable[[], Awaitable[Sequence[Generation]]],
        *,
        policy: CachePolicy = "use",
    ) -> FetchedResult:
        """Async twin of :meth:`fetch_result`."""
        fetch = self._fetch_args(prompt, llm_string, policy)
        return self._fetched(await self.layered.afetch(compute=_alisted(compute), **fetch))

    def _fetch_args(self, prompt: str, llm_string: str, policy: CachePolicy) -> dict[str, Any]:
        """``LayeredCache.fetch``'s arguments for a request, but its ``compute``."""
        plan = self._plan(prompt, llm_string)
        return {
            **plan.key(self), **self._write_args(), "policy": plan.policy(policy),
            "tokens": _tokens, "encode": self._encoder(plan), "decode": self._decode,
        }  # fmt: skip

    def _write_args(self) -> dict[str, Any]:
        return {"ttl": self.ttl, "tags": self.tags}

    def _fetched(self, got: Fetched) -> FetchedResult:
        """The generations for a core outcome, marked where they were not computed here
        (a hit, or a concurrent identical call's answer)."""
        generations: list[Generation] = got.value
        if got.computed:
            return FetchedResult(
                mark_miss(generations) if self.mark_hits else generations, None, True
            )
        if got.hit is not None:
            marked = mark_hit(generations, got.hit) if self.mark_hits else generations
            return FetchedResult(marked, got.hit, False)
        return FetchedResult(
            mark_coalesced(generations) if self.mark_hits else generations, None, False
        )

    # ------------------------------------------------------------------ streams
    def stream_result(
        self,
        prompt: str,
        llm_string: str,
        start_stream: Callable[[], Iterable[ChatGenerationChunk]],
        *,
        policy: CachePolicy = "use",
    ) -> Iterator[ChatGenerationChunk]:
        """The chunks to stream for a request, through the core's
        :meth:`~agent_cache.LayeredCache.fetch_stream`: a hit replayed (marked, zero
        usage), or ``start_stream()``'s chunks, one model stream for all concurrent
        identical requests (those that follow another's stream are marked coalesced
        and report zero usage); stored once the stream has ended.

        Example (``start`` starts the model's stream)::

            for chunk in cache.stream_result(prompt, llm_string, start):
                print(chunk.text, end="")
        """
        with self._fetch_stream(prompt, llm_string, start_stream, policy) as got:
            yield from itertools.chain(self._replay(got), map(self._reading(got), got))

    async def astream_result(
        self,
        prompt: str,
        llm_string: str,
        start_stream: Callable[[], AsyncIterator[ChatGenerationChunk]],
        *,
        policy: CachePolicy = "use",
    ) -> AsyncIterator[ChatGenerationChunk]:
        """Async twin of :meth:`stream_result`."""
        async with await self._afetch_stream(prompt, llm_string, start_stream, policy) as got:
            async for chunk in _achain(self._replay(got), got, self._reading(got)):
                yield chunk

    def _fetch_stream(
        self, prompt: str, llm_string: str, start: Callable[[], Any], policy: CachePolicy
    ) -> Streamed[Any]:
        """The core's stream outcome for a request (closed when the reader is done: a
        consumer that stops early leaves the stream to the others)."""
        return self.layered.fetch_stream(**self._stream_args(prompt, llm_string, start, policy))

    def _afetch_stream(
        self, prompt: str, llm_string: str, start: Callable[[], Any], policy: CachePolicy
    ) -> Awaitable[AStreamed[Any]]:
        return self.layered.afetch_stream(**self._stream_args(prompt, llm_string, start, policy))

    def _stream_args(
        self, prompt: str, llm_string: str, start: Callable[[], Any], policy: CachePolicy
    ) -> dict[str, Any]:
        """``fetch_stream``'s arguments: :meth:`fetch_result`'s, a finished stream's chunks
        joined into its generations (a record the codec cannot read is a miss, in the
        core)."""
        return {
            **self._fetch_args(prompt, llm_string, policy),
            "start_stream": start,
            "join": _joined,
        }

    def _served(self, got: Any) -> list[Generation]:
        """The generations of a served stream outcome (a hit, decoded by the core, or a
        negative entry), marked."""
        generations: list[Generation] = got.value
        if not self.mark_hits:
            return generations
        return mark_coalesced(generations) if got.hit is None else mark_hit(generations, got.hit)

    def _replay(self, got: Any) -> Iterator[ChatGenerationChunk]:
        """A served outcome's chunks (its answer replayed, marked); none for a stream to
        read (which, served, iterates nothing)."""
        return replay_chunks(self._served(got)[0]) if got.served else iter(())

    def _reading(self, got: Any) -> Callable[[ChatGenerationChunk], ChatGenerationChunk]:
        """This reader's copy of each chunk ``got`` streams (:meth:`_streamed`), the
        first one marked; ``got.coalesced`` is read per chunk (known once one is read)."""
        read = itertools.count()
        return lambda chunk: self._streamed(chunk, got.coalesced, next(read) == 0)

    def _streamed(
        self, chunk: ChatGenerationChunk, coalesced: bool, first: bool
    ) -> ChatGenerationChunk:
        """This reader's copy of a recorded chunk (LangChain sets run ids on what it
        streams), its first one marked a miss; a follower's reports no usage and says it
        was coalesced."""
        if not self.mark_hits:
            return _copy(chunk)
        update: dict[str, Any] = {"usage_metadata": None} if coalesced else {}
        if first:  # one chunk only: merging chunks joins equal strings
            info = hit_info(coalesced=coalesced)
            update["response_metadata"] = {**chunk.message.response_metadata, "agent_cache": info}
        return _copy(chunk, update)

    # ------------------------------------------------------------------ BaseCache
    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """The stored generations for ``prompt`` under ``llm_string``, or ``None``."""
        found = self.lookup_result(prompt, llm_string)
        return None if found is None else found.generations

    async def alookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """Async twin of :meth:`lookup`."""
        found = await self.alookup_result(prompt, llm_string)
        return None if found is None else found.generations

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Store every generation of a model call (not stored: empty or unserializable;
        a skipped sampled call); an ``n_samples`` call fills the slot its lookup missed."""
        args = self._store_args(prompt, llm_string, return_val)
        if args is not None:
            self.layered.store(**args)

    async def aupdate(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Async twin of :meth:`update`."""
        args = self._store_args(prompt, llm_string, return_val)
        if args is not None:
            await self.layered.astore(**args)

    def _store_args(
        self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE
    ) -> dict[str, Any] | None:
        plan = self._update_plan(prompt, llm_string)
        record = self._record(return_val, plan)
        if record is None:
            return None
        return {
            **plan.key(self), **self._write_args(), "response": record,
            "tokens": _tokens(return_val),
            "exact": False,  # the codec's payload: its decoder restores the generations
        }  # fmt: skip

    def clear(self, **kwargs: Any) -> None:
        """Remove this cache's entries (``namespace=`` another one, or ``None`` for all)."""
        self.layered.clear(namespace=kwargs.get("namespace", self.namespace))

    async def aclear(self, **kwargs: Any) -> None:
        """Async twin of :meth:`clear`."""
        await self.layered.aclear(namespace=kwargs.get("namespace", self.namespace))

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the core cache if this object created it (never one passed in)."""
        if self._owns:
            self.layered.close()

    def __enter__(self) -> AgentCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
