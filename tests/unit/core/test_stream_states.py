"""Streams as a state machine (``agent_cache._stream``): the transition table refuses
what a recording's state does not take, a reader's step is a function of the state, and
``fetch_stream``'s codec treats an unreadable stored stream as a miss, once, in the core."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agent_cache import NOT_STORED, LayeredCache
from agent_cache._stream import (
    _TRANSITIONS,
    Event,
    IllegalTransition,
    State,
    Step,
    step,
    transition,
)
from agent_cache.testing import HashEmbedder

Q = "How do I reset my password?"
WORDS = ["Open ", "the ", "account ", "page."]


def _cache() -> LayeredCache:
    return LayeredCache(path=None, embedder=HashEmbedder())


# ---------------------------------------------------------------------- the table
def test_an_ended_stream_takes_no_event() -> None:
    for ended, event in itertools.product((State.DONE, State.FAILED, State.ABANDONED), Event):
        with pytest.raises(IllegalTransition, match=ended.value):
            transition(ended, event)


def test_the_table_is_the_only_way_between_states() -> None:
    for state, event in itertools.product(State, Event):
        if (state, event) in _TRANSITIONS:
            assert transition(state, event) is _TRANSITIONS[state, event]
        else:
            with pytest.raises(IllegalTransition):
                transition(state, event)
    # a chunk, an end or a failure only comes from the one pull in flight
    assert transition(State.IDLE, Event.CLAIM) is State.PULLING
    assert transition(State.PULLING, Event.CHUNK) is State.IDLE
    for event in (Event.CHUNK, Event.END, Event.FAIL, Event.CLAIM):
        with pytest.raises(IllegalTransition):
            transition(State.IDLE if event is not Event.CLAIM else State.PULLING, event)


def test_a_recording_refuses_an_illegal_event_and_keeps_its_state() -> None:
    cache = _cache()
    got = cache.fetch_stream(Q, lambda: iter(WORDS), join="".join)
    assert list(got) == WORDS
    rec = got._cur.rec
    assert rec is not None and rec.state is State.DONE
    with pytest.raises(IllegalTransition):
        rec.fire(Event.CHUNK)
    assert rec.state is State.DONE and rec.chunks == WORDS


def test_a_readers_step_follows_the_state() -> None:
    def at(state: State, **kw: bool) -> Step:
        args = {"unread": False, "first": True, "driver": True, "timed_out": False, **kw}
        return step(state, **args)

    assert at(State.DONE, unread=True) is Step.CHUNK  # recorded chunks before the end
    assert at(State.FAILED, unread=True) is Step.CHUNK
    assert at(State.IDLE) is Step.PULL
    assert at(State.IDLE, driver=False) is Step.WAIT
    assert at(State.PULLING) is Step.WAIT
    assert at(State.PULLING, timed_out=True) is Step.ALONE
    assert at(State.PULLING, timed_out=True, first=False) is Step.WAIT
    assert at(State.DONE) is Step.STOP
    assert at(State.FAILED, first=False) is Step.RAISE
    assert at(State.ABANDONED) is Step.REJOIN
    assert at(State.ABANDONED, first=False) is Step.LOST


# ---------------------------------------------------------------------- the codec
def encode(text: str) -> Any:
    return {"v": 1, "text": text} if text.strip() else NOT_STORED


def decode(payload: Any) -> str:
    if not isinstance(payload, dict) or payload.get("v") != 1:
        raise ValueError(f"not a v1 answer: {payload!r}")
    return str(payload["text"])


class Model:
    def __init__(self) -> None:
        self.calls = 0

    def stream(self) -> Iterator[str]:
        self.calls += 1
        yield from WORDS

    async def astream(self) -> AsyncIterator[str]:
        self.calls += 1
        for word in WORDS:
            yield word


def test_an_unreadable_stored_stream_is_computed_once_and_stored_anew() -> None:
    cache, model = _cache(), Model()
    cache.store(Q, {"v": 0, "text": "an older writer's answer"})
    codec: dict[str, Any] = {"join": "".join, "encode": encode, "decode": decode}
    got = cache.fetch_stream(Q, model.stream, **codec)
    assert not got.served and got.hit is None
    assert list(got) == WORDS and got.value == "".join(WORDS) and model.calls == 1
    hit = cache.lookup(Q)
    assert hit is not None and hit.response == {"v": 1, "text": "".join(WORDS)}
    counters = cache.stats().counters
    assert counters["decode_errors"] == 1 and cache.stats().evicted == 1
    again = cache.fetch_stream(Q, model.stream, **codec)
    assert again.served and again.hit is not None and again.value == "".join(WORDS)
    assert list(again) == [] and model.calls == 1


def test_an_unreadable_stored_stream_is_computed_once_async() -> None:
    cache, model = _cache(), Model()
    cache.store(Q, "plain text from before the codec")
    codec: dict[str, Any] = {"join": "".join, "encode": encode, "decode": decode}

    async def go() -> tuple[list[str], Any]:
        got = await cache.afetch_stream(Q, model.astream, **codec)
        chunks = [c async for c in got]
        again = await cache.afetch_stream(Q, model.astream, **codec)
        return chunks, again

    chunks, again = asyncio.run(go())
    assert chunks == WORDS and model.calls == 1
    assert again.served and again.value == "".join(WORDS)
    hit = cache.lookup(Q)
    assert hit is not None and hit.response == {"v": 1, "text": "".join(WORDS)}


def test_encode_not_stored_keeps_a_stream_out_of_the_cache() -> None:
    cache = _cache()
    blank = ["  ", " "]
    got = cache.fetch_stream(Q, lambda: iter(blank), join="".join, encode=encode, decode=decode)
    assert list(got) == blank and got.value == "   "
    assert cache.lookup(Q) is None and cache.stats().counters["not_stored"] == 1
