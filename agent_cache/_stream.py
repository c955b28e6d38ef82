"""Streams through the cache: one model stream for all concurrent identical misses.

:meth:`LayeredCache.fetch_stream` / :meth:`~LayeredCache.afetch_stream` look the request
up like :meth:`~LayeredCache.fetch` (same key, policy, stats, codec). A hit is returned at
once (:attr:`Streamed.hit`; nothing to iterate: the caller replays :attr:`Streamed.value`,
``decode(hit.response)`` with a codec; a payload ``decode`` rejects is evicted and the
request streams as a miss). On a miss the caller joins this process's *recording* for the
key, or opens it:

- a recording holds the chunks of one model stream (``start_stream()``, called once, by
  whichever reader pulls first); every reader (threads and asyncio tasks alike) yields
  them from the start, live, as they arrive: concurrent identical misses make one model
  call and see the same chunks;
- any reader that can drive the stream pulls the next chunk when nobody else does (a
  sync stream: any thread; an async one: any task on the event loop it was started in),
  so a reader that stops early (``break``, ``close()``, cancellation) leaves the rest to
  the others; an async pull runs as a task of its own, so a cancelled reader does not
  break the stream for the others;
- when the stream ends normally, ``join(chunks)`` is the value (``None``: not stored),
  stored once by the fetch path's write-back (:meth:`Fetcher.settle_flow`: ``encode``,
  policy, TTL, tags, quotas, negative entries, the model call's usage); then the flight
  is released;
- when the stream raises, nothing is stored and every reader gets the same exception
  (one failing call, not N); when every reader that could drive it has left, the stream is
  closed, nothing is stored and the flight is released. A reader left behind (one that
  could not drive it) starts its own call if it has yielded nothing yet, else gets
  :class:`StreamAbandoned`;
- a reader that waited ``singleflight_timeout`` seconds for a first chunk gives up on the
  others and streams on its own (degrade, never hang).

Written as a state machine (like h11's ``_state.py``): a recording's :class:`State`
changes only by an :class:`Event` the table :data:`_TRANSITIONS` allows, a reader's
next :class:`Step` is a pure function of it (:func:`step`), and what a reader and a pull
do is written once, as flows (:mod:`agent_cache._flow`) whose waits and pulls are ops: the
sync and async drivers only run them.

A streamed miss takes a model slot (``max_model_calls``) for the whole stream; without
one it raises :class:`~agent_cache.degrade.Overloaded` (a namespace fallback is a whole
answer, not a stream: streams do not use it). ``policy="bypass"`` streams straight from
the model, reads and writes nothing. Coalescing is per process: other processes sharing
the store each stream once (the store's cross-process lease is for whole answers), and
refresh-ahead does not run on streamed hits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import inspect
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from typing import Any, ClassVar, Final, Generic, TypeVar

from agent_cache import _fork
from agent_cache import _io as io
from agent_cache._fetch import Fetcher, Plan
from agent_cache._flow import Flow, run_async, run_sync
from agent_cache._hits import CacheHit
from agent_cache._lookup import Reader
from agent_cache.degrade import Overloaded, Ticket
from agent_cache.errors import BackendError

__all__ = ["AStreamed", "StreamAbandoned", "Streamed", "Streams"]

log = logging.getLogger("agent_cache")
C = TypeVar("C")
Join = Callable[[list[Any]], Any]
Own = tuple[Plan, Callable[[], Any], Join]  # a request's plan, start_stream and join


class StreamAbandoned(BackendError):
    """The stream this reader was following was closed by the readers that drove it
    before it ended, after this reader had yielded some of it."""


class IllegalTransition(RuntimeError):
    """An event the recording's state does not take (a bug here, never a caller's)."""


# ---------------------------------------------------------------------- the state machine
class State(enum.Enum):
    """Where a recording's model stream is."""

    IDLE = "idle"  # open, nobody pulling the next chunk
    PULLING = "pulling"  # open, one reader pulls the next chunk
    DONE = "done"  # ended normally: joined, stored
    FAILED = "failed"  # raised: every reader gets the exception
    ABANDONED = "abandoned"  # closed before its end: nobody left to drive it


class Event(enum.Enum):
    """What happens to a recording."""

    CLAIM = "claim"  # a reader that can drive it takes the next pull
    CHUNK = "chunk"  # the pull brought a chunk
    END = "end"  # the pull found the end of the stream
    FAIL = "fail"  # the pull raised (or found no model slot)
    ABANDON = "abandon"  # the last reader that could drive it left, or its pull was cancelled


#: The transitions a recording takes; any other is :class:`IllegalTransition`.
_TRANSITIONS: Final[dict[tuple[State, Event], State]] = {
    (State.IDLE, Event.CLAIM): State.PULLING,
    (State.IDLE, Event.ABANDON): State.ABANDONED,
    (State.PULLING, Event.CHUNK): State.IDLE,
    (State.PULLING, Event.END): State.DONE,
    (State.PULLING, Event.FAIL): State.FAILED,
    (State.PULLING, Event.ABANDON): State.ABANDONED,
}


def transition(state: State, event: Event) -> State:
    """The state after ``event``; raises :class:`IllegalTransition` for one ``state``
    does not take (an ended stream takes nothing)."""
    try:
        return _TRANSITIONS[state, event]
    except KeyError:
        raise IllegalTransition(f"a {state.value} stream cannot take {event.value!r}") from None


class Step(enum.Enum):
    """What one reader does next."""

    CHUNK = "chunk"  # yield the next recorded chunk
    PULL = "pull"  # pull the next chunk (it has claimed the pull)
    WAIT = "wait"  # wait for the recording to change, then look again
    STOP = "stop"  # the stream ended and every chunk was yielded
    RAISE = "raise"  # raise what ended the stream
    LOST = "lost"  # abandoned after some chunks: StreamAbandoned
    REJOIN = "rejoin"  # abandoned before a first chunk: the request's flight, again
    ALONE = "alone"  # silent past the timeout before a first chunk: a stream of its own


#: A reader's step once its recording has ended: (before a first chunk, after one).
_AFTER_END: Final[dict[State, tuple[Step, Step]]] = {
    State.DONE: (Step.STOP, Step.STOP),
    State.FAILED: (Step.RAISE, Step.RAISE),
    State.ABANDONED: (Step.REJOIN, Step.LOST),
}


def step(state: State, *, unread: bool, first: bool, driver: bool, timed_out: bool) -> Step:
    """A reader's next step: ``unread``, a recorded chunk it has not yielded; ``first``,
    it has yielded none; ``driver``, it can pull; ``timed_out``, it waited
    ``singleflight_timeout`` for a change that did not come."""
    if unread:
        return Step.CHUNK
    if state in _AFTER_END:
        return _AFTER_END[state][0 if first else 1]
    if state is State.IDLE and driver:
        return Step.PULL
    return Step.ALONE if timed_out and first else Step.WAIT


class Kind(enum.Enum):
    """A stream's (or a reader's) driver."""

    SYNC = "sync"
    ASYNC = "async"


def _do(target: Any, method: str, *args: Any) -> Flow[Any]:
    """The step ``target.method(*args)``: the async driver awaits ``target.a<method>``
    when there is one (every step of this module is taken here)."""
    return io.call_twin(getattr(target, method), io.twin(target, "a" + method), *args)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _Wake:
    """One waiting reader's wake-up (the target of its wait op): an event for a thread,
    a future for a task (set from any thread)."""

    def __init__(self, kind: Kind) -> None:
        self.event = threading.Event()
        self.loop = asyncio.get_running_loop() if kind is Kind.ASYNC else None
        self.fut: asyncio.Future[None] | None = (
            None if self.loop is None else self.loop.create_future()
        )

    def set(self) -> None:
        if self.loop is None or self.fut is None:
            self.event.set()
        else:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                self.loop.call_soon_threadsafe(_resolve, self.fut)

    def woken(self, timeout: float) -> bool:
        return self.event.wait(timeout)

    async def awoken(self, timeout: float) -> bool:
        assert self.fut is not None
        try:
            await asyncio.wait_for(self.fut, timeout)
        except TimeoutError:
            return False
        return True


#: What a source's ``next`` returns at the end of its stream (and a reader's at its own).
_END: Final = object()


class _Source:
    """A recording's model stream as ops: ``open``/``next``/``close`` for the sync
    driver, their ``a`` twins for the async one."""

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start = start
        self._it: Any = None

    def open(self) -> None:
        self._it = iter(self._start())

    async def aopen(self) -> None:
        source = self._start()
        if inspect.isawaitable(source):
            source = await source
        self._it = source.__aiter__()

    def next(self) -> Any:
        return next(self._it, _END)

    async def anext(self) -> Any:
        try:
            return await self._it.__anext__()
        except StopAsyncIteration:
            return _END

    def close(self) -> None:
        close = getattr(self._it, "close", None)
        if close is not None:
            close()

    async def aclose(self) -> None:
        aclose = getattr(self._it, "aclose", None)
        if aclose is not None:
            await aclose()


class _Recording:
    """One model stream and the readers that follow it (see the module docstring); its
    fields change under ``lock``."""

    def __init__(self, plan: Plan, start: Callable[[], Any], join: Join, *, kind: Kind) -> None:
        self.plan, self.start, self.join, self.kind = plan, start, join, kind
        self.loop: asyncio.AbstractEventLoop | None = (
            asyncio.get_running_loop() if kind is Kind.ASYNC else None
        )
        self.lock = threading.Lock()
        self.state = State.IDLE
        self.chunks: list[Any] = []
        self.error: BaseException | None = None
        self.value: Any = None
        self.source: _Source | None = None
        self.starter: object | None = None  # the reader that called start_stream()
        self.ticket: Ticket | None = None
        self.started = 0.0
        self.drivers = 0  # readers present that can pull
        self.waiters: list[_Wake] = []

    @property
    def open(self) -> bool:
        return self.state in (State.IDLE, State.PULLING)

    def can_drive(self, kind: Kind) -> bool:
        if kind is not self.kind:
            return False
        if kind is Kind.SYNC:
            return True
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def changed(self) -> None:
        """Wake every waiting reader."""
        waiters, self.waiters = self.waiters, []
        for wake in waiters:
            wake.set()

    def fire(self, event: Event, error: BaseException | None = None) -> None:
        """Take ``event``: the next state (:data:`_TRANSITIONS`), every reader woken."""
        self.state = transition(self.state, event)
        self.error = error if error is not None else self.error
        if event is not Event.CLAIM:
            self.changed()

    def next_step(self, i: int, driver: bool, timed_out: bool) -> Step:
        """The step of the reader at position ``i`` (a pull it gets is claimed)."""
        got = step(
            self.state, unread=i < len(self.chunks), first=i == 0, driver=driver,
            timed_out=timed_out,
        )  # fmt: skip
        if got is Step.PULL:
            self.fire(Event.CLAIM)
        return got

    def waiter(self, kind: Kind) -> _Wake:
        """A wake-up for a reader of ``kind`` at the recording's next change."""
        wake = _Wake(kind)
        self.waiters.append(wake)
        return wake

    def orphaned(self) -> bool:
        """Abandoned if open, nobody pulling and no reader left that can pull."""
        if self.state is State.IDLE and self.drivers <= 0:
            self.fire(Event.ABANDON)
            return True
        return False


#: How many flight keys :class:`Streams` remembers a count of ended recordings for.
_ENDED_KEPT = 4096


class Streams:
    """The stream path of one cache: the recordings in flight, keyed like fetch's."""

    def __init__(self, reader: Reader, fetcher: Fetcher) -> None:
        self._reader = reader
        self._fetcher = fetcher
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))
        self._flights: dict[str, _Recording] = {}
        # per flight key, how many of its recordings have ended done (stored): a reader
        # whose lookup ran while one ended reads again instead of starting a stream
        self._ended: dict[str, int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def timeout(self) -> float:
        return self._fetcher.flight.timeout

    def in_flight(self) -> int:
        with self._lock:
            return len(self._flights)

    # ------------------------------------------------------------------ entry points
    def fetch(self, plan: Plan, start: Callable[[], Any], join: Join) -> Streamed[Any]:
        got = run_sync(self._fetch_flow((plan, start, join), Kind.SYNC))
        return got  # type: ignore[return-value]

    async def afetch(self, plan: Plan, start: Callable[[], Any], join: Join) -> AStreamed[Any]:
        got = await run_async(self._fetch_flow((plan, start, join), Kind.ASYNC))
        return got  # type: ignore[return-value]

    def _fetch_flow(self, own: Own, kind: Kind) -> Flow[Streamed[Any] | AStreamed[Any]]:
        """The reader's outcome: served, or a stream (started or joined); looked up again
        when a recording of the key ended (stored) while the lookup ran."""
        plan = own[0]
        while True:
            mark = self._ended_count(plan.flight_key)
            served = yield from self._served_flow(plan)
            got = self._open(own, served, mark, kind)
            if got is not None:
                return got

    def _served_flow(self, plan: Plan) -> Flow[tuple[bool, CacheHit | None, Any]]:
        """What the request is served without a stream: ``(True, hit, value)``, a hit
        (decoded; one ``decode`` rejects is evicted, a miss), or ``(True, None, value)``,
        a negative entry (not under ``bypass``); ``(False, None, None)``: a miss."""
        hit = yield from self._reader.read_flow(plan.req, plan.policy, plan.llm_string)
        if hit is not None:
            ok, value = yield from self._fetcher.decoded_flow(plan, hit)
            if ok:
                return True, hit, value
        if plan.policy == "bypass":
            return False, None, None
        found, value = self._fetcher.negative_hit(plan.flight_key)
        return found, None, value

    def _ended_count(self, key: str) -> int:
        with self._lock:
            return self._ended.get(key, 0)

    def _open(
        self, own: Own, served: tuple[bool, CacheHit | None, Any], mark: int, kind: Kind = Kind.SYNC
    ) -> Streamed[Any] | AStreamed[Any] | None:
        """The reader's stream; None when a recording of the key ended (stored) after
        ``mark`` was taken and none is open: the lookup is to be run again."""
        make = Streamed if kind is Kind.SYNC else AStreamed
        found, hit, value = served
        if found:
            return make(self, None, own, hit=hit, value=value, served=True)
        rec = self._recording(*own, kind, mark)
        return None if rec is None else make(self, rec, own)

    def _recording(
        self, plan: Plan, start: Callable[[], Any], join: Join, kind: Kind, mark: int | None
    ) -> _Recording | None:
        """The open recording of the key, joined, or a new one. None (``mark`` given): one
        ended since ``mark`` was taken and none is open, so the lookup is to be rerun."""
        if plan.policy == "bypass":  # neither read nor write: a recording of its own
            return _Recording(dataclasses.replace(plan, policy="no_store"), start, join, kind=kind)
        with self._lock:
            rec = self._flights.get(plan.flight_key)
            if rec is None or not rec.open:
                ended = self._ended.get(plan.flight_key, 0)
                if mark is not None and plan.policy != "refresh" and ended != mark:
                    return None  # one ended (and stored) since this reader's lookup
                rec = self._flights[plan.flight_key] = _Recording(plan, start, join, kind=kind)
            return rec

    def _solo(self, plan: Plan, start: Callable[[], Any], join: Join, kind: Kind) -> _Recording:
        """A recording nobody else joins (a reader that gave up waiting)."""
        return _Recording(plan, start, join, kind=kind)

    def _unregister(self, rec: _Recording, *, done: bool = False) -> None:
        """``rec`` out of the flights; ``done`` (it stored its answer): counted, under the
        same lock, for the readers whose lookup ran before the write."""
        key = rec.plan.flight_key
        with self._lock:
            if self._flights.get(key) is rec:
                del self._flights[key]
            if done:
                self._ended[key] = self._ended.pop(key, 0) + 1  # newest last
                if len(self._ended) > _ENDED_KEPT:
                    del self._ended[next(iter(self._ended))]  # a reset count: one re-read

    # ------------------------------------------------------------------ pulls
    def pull(self, rec: _Recording, who: object) -> None:
        """The sync driver's pull: in the reader's thread."""
        run_sync(self.pull_flow(rec, who))

    async def apull(self, rec: _Recording, who: object) -> None:
        """The async driver's pull: a task of its own, shielded (a cancelled reader
        leaves it to end for the others)."""
        await asyncio.shield(self.spawn(run_async(self.pull_flow(rec, who))))

    def pull_flow(self, rec: _Recording, who: object) -> Flow[None]:
        """One chunk into ``rec``, or its end, by the reader ``who`` that claimed the pull;
        never raises. A cancelled (async) pull abandons the stream."""
        try:
            chunk = yield from self._next_flow(rec, who)
        except BaseException as exc:
            if rec.kind is Kind.ASYNC and isinstance(exc, asyncio.CancelledError):
                with rec.lock:
                    rec.fire(Event.ABANDON)
                self._close(rec)
                return
            try:
                yield from self._release_flow(rec)
            finally:
                self._unregister(rec)
                with rec.lock:
                    rec.fire(Event.FAIL, exc)
        else:
            if chunk is _END:
                yield from self._finish_flow(rec)
            else:
                with rec.lock:
                    rec.chunks.append(chunk)
                    rec.fire(Event.CHUNK)
        self.leave(rec, False)

    def _next_flow(self, rec: _Recording, who: object) -> Flow[Any]:
        """The next chunk of ``rec``'s model stream (:data:`_END` at its end); the first
        pull waits for a model slot and opens the stream."""
        if rec.source is None:
            rec.ticket = ticket = yield from self._fetcher.gate.admit_flow()
            if not ticket.ok:
                raise self._overloaded(rec)
            rec.starter, rec.started = who, time.perf_counter()
            rec.source = _Source(rec.start)
            yield from _do(rec.source, "open")
        return (yield from _do(rec.source, "next"))

    def _finish_flow(self, rec: _Recording) -> Flow[None]:
        """The stream's end: its model slot released, its chunks joined and stored (the
        fetch path's write-back), its readers told."""
        yield from self._release_flow(rec)
        rec.value = value = self._joined(rec)
        try:
            yield from self._fetcher.settle_flow(rec.plan, rec.started, value, joined=True)
        except Exception as exc:  # the answer was streamed; only its record is lost
            self._fetcher.count("errors")
            log.warning("agent-cache could not record a streamed answer (served anyway): %s", exc)
        finally:
            self._unregister(rec, done=True)
            with rec.lock:
                rec.fire(Event.END)

    def _joined(self, rec: _Recording) -> Any:
        try:
            return rec.join(list(rec.chunks))
        except Exception as exc:  # the chunks were served; only the write is lost
            log.warning("agent-cache could not join a streamed answer (not stored): %s", exc)
            return None

    def _release_flow(self, rec: _Recording) -> Flow[None]:
        ticket, rec.ticket = rec.ticket, None
        if ticket is not None and ticket.token:
            yield from _do(self._fetcher.gate, "release", ticket)

    def _overloaded(self, rec: _Recording) -> Overloaded:
        gate = self._fetcher.gate
        self._fetcher.count("overloaded")
        return Overloaded(
            f"no model call slot within {gate.wait} s (max_model_calls={gate.limit}, "
            f"shared_model_calls={gate.shared_limit}, model_queue={gate.queue}) for a "
            f"stream in {rec.plan.req.namespace!r}",
            layer="model",
        )

    # ------------------------------------------------------------------ leaving
    def leave(self, rec: _Recording, driver: bool) -> None:
        """A reader leaves ``rec`` (``driver``: one that could pull), or a pull of it
        ended: a recording nobody can drive any more is abandoned and closed."""
        with rec.lock:
            if driver:
                rec.drivers -= 1
            orphan = rec.orphaned()
            if not orphan:
                rec.changed()  # a non-driver left behind is woken to see it
        if orphan:
            self._close(rec)

    def _close(self, rec: _Recording) -> None:
        """An abandoned recording out of the flights, its model slot released and its
        stream closed (by a task on its event loop for an async one, while it runs)."""
        self._unregister(rec)
        source, rec.source = rec.source, None
        loop = rec.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._spawn_flow, self._close_flow(rec, source))
        else:
            run_sync(self._close_flow(rec, source))

    def _close_flow(self, rec: _Recording, source: _Source | None) -> Flow[None]:
        yield from self._release_flow(rec)
        try:
            if source is not None:
                yield from _do(source, "close")
        except Exception as exc:
            log.debug("agent-cache: closing an abandoned stream failed: %s", exc)

    def _spawn_flow(self, flow: Flow[Any]) -> None:
        self.spawn(run_async(flow))

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)  # kept until done (the loop holds tasks weakly)
        task.add_done_callback(self._tasks.discard)
        return task

    def coalesced(self, rec: _Recording) -> None:
        self._fetcher.count("coalesced", namespace=rec.plan.req.namespace)


class _Cursor:
    """One reader's place in a recording (what its reading generator holds, so that a
    dropped :class:`Streamed` is freed, and closed, at once)."""

    def __init__(self, streams: Streams, rec: _Recording | None, own: Own, kind: Kind) -> None:
        self.streams = streams
        self.rec = rec
        self.own = own  # this request's plan, start_stream and join (if it must call)
        self.kind = kind
        self.driver = False  # whether it can pull ``rec`` (counted in ``rec.drivers``)
        self.i = 0  # how many chunks it has yielded

    @property
    def live(self) -> _Recording:
        assert self.rec is not None
        return self.rec

    def enter(self) -> None:
        rec = self.live
        self.driver = rec.can_drive(self.kind)
        if self.driver:
            with rec.lock:
                rec.drivers += 1

    def next_flow(self) -> Flow[Any]:
        """This reader's next chunk (:data:`_END` once the stream has ended for it),
        written once for both drivers: the pulls and waits it needs are its ops."""
        timed_out = False
        while True:
            rec = self.live
            with rec.lock:
                got = rec.next_step(self.i, self.driver, timed_out)
                wake = rec.waiter(self.kind) if got is Step.WAIT else None
            if got is Step.CHUNK:
                self.i += 1
                return rec.chunks[self.i - 1]
            timed_out = False
            if got is Step.PULL:
                yield from _do(self.streams, "pull", rec, self)
            elif wake is not None:
                timed_out = not (yield from _do(wake, "woken", self.streams.timeout))
            elif not self.turn(got):
                return _END

    def turn(self, got: Step) -> bool:
        """After an ending step: ``False``, the stream has ended for this reader; ``True``,
        it turned to a recording of its own (:attr:`Step.ALONE`: one nobody else joins;
        :attr:`Step.REJOIN`: the request's flight). Raises what ended the stream else."""
        rec, streams = self.live, self.streams
        if got is Step.STOP:
            return False
        if got is Step.RAISE:
            assert rec.error is not None
            raise rec.error
        if got is Step.LOST:
            raise StreamAbandoned(
                "the stream this request followed was closed before it ended", layer="model"
            )
        streams.leave(rec, self.driver)
        self.driver = False
        if got is Step.ALONE:
            self.rec = streams._solo(*self.own, self.kind)
        else:
            self.rec = streams._recording(*self.own, self.kind, None)
        self.enter()
        return True

    def follow(self) -> Generator[Any, None, None]:
        """The sync driver: each next chunk one flow, run in the reader's thread."""
        self.enter()
        try:
            while (chunk := run_sync(self.next_flow())) is not _END:
                yield chunk
        finally:
            self.streams.leave(self.live, self.driver)

    async def afollow(self) -> AsyncIterator[Any]:
        """The async driver: the same flows, awaited (a pull runs as a task of its own)."""
        self.enter()
        try:
            while (chunk := await run_async(self.next_flow())) is not _END:
                yield chunk
        finally:
            self.streams.leave(self.live, self.driver)


class _Reader:
    """What :class:`Streamed` and :class:`AStreamed` share: the outcome attributes."""

    _kind: ClassVar[Kind]

    def __init__(
        self,
        streams: Streams,
        rec: _Recording | None,
        own: Own,
        *,
        hit: CacheHit | None = None,
        value: Any = None,
        served: bool = False,
    ) -> None:
        self._streams = streams
        self._cur = _Cursor(streams, rec, own, self._kind)
        self.hit = hit
        self._value = value
        self._served = served or hit is not None
        self._counted = False
        self._started = False

    @property
    def served(self) -> bool:
        """Nothing to iterate: the answer is :attr:`value` (a hit, or a short-lived
        negative entry); replay it, at zero tokens."""
        return self._served

    @property
    def value(self) -> Any:
        """The served value (a hit's payload, decoded with ``decode``), or once a
        recorded stream has ended the joined value (``join(chunks)``); ``None`` before."""
        rec = self._cur.rec
        return self._value if rec is None else rec.value

    @property
    def computed(self) -> bool:
        """This reader started the model's stream (the one miss paid for); ``False``
        for a hit and for a reader that follows another's stream. Known once the first
        chunk has been yielded."""
        return self._cur.rec is not None and self._cur.rec.starter is self._cur

    @property
    def coalesced(self) -> bool:
        """This reader follows a concurrent identical stream (cost it nothing). Known
        once the first chunk has been yielded."""
        rec = self._cur.rec
        return rec is not None and rec.starter is not None and rec.starter is not self._cur

    def _unread(self) -> bool:
        """Leave the recording if never read (the reading generator's ``finally``
        won't run then); True when it was not."""
        if self._started or self._cur.rec is None:
            return False
        self._streams.leave(self._cur.rec, False)
        return True

    def _first(self) -> None:
        if not self._counted:
            self._counted = True
            if self.coalesced and self._cur.rec is not None:
                self._streams.coalesced(self._cur.rec)


class Streamed(_Reader, Generic[C]):
    """What :meth:`LayeredCache.fetch_stream` returns: an iterator of the model's chunks
    (empty when :attr:`served`), with where they came from. A reader that stops early
    should ``close()`` it (or use it as a context manager); one that is dropped is
    closed when it is freed.

    Attributes:
        hit: the entry served (replay :attr:`value`, ``hit.response`` as decoded);
            ``None`` on a miss.
    """

    _kind = Kind.SYNC

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gen: Generator[C, None, None] | None = (
            None if self._cur.rec is None else self._cur.follow()
        )

    def __iter__(self) -> Iterator[C]:
        return self

    def __next__(self) -> C:
        if self._gen is None:
            raise StopIteration
        self._started = True
        chunk = next(self._gen)
        self._first()
        return chunk

    def close(self) -> None:
        """Stop reading (the others, if any, go on without this reader)."""
        gen, self._gen = self._gen, None
        if gen is not None and not self._unread():
            gen.close()

    def __enter__(self) -> Streamed[C]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()


class AStreamed(_Reader, Generic[C]):
    """Async twin of :class:`Streamed` (``async for``; ``aclose()``)."""

    _kind = Kind.ASYNC

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gen: Any = None if self._cur.rec is None else self._cur.afollow()

    def __aiter__(self) -> AsyncIterator[C]:
        return self

    async def __anext__(self) -> C:
        if self._gen is None:
            raise StopAsyncIteration
        self._started = True
        chunk: C = await self._gen.__anext__()
        self._first()
        return chunk

    async def aclose(self) -> None:
        """Stop reading (the others, if any, go on without this reader)."""
        gen, self._gen = self._gen, None
        if gen is not None and not self._unread():
            await gen.aclose()

    async def __aenter__(self) -> AStreamed[C]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        gen, self._gen = self._gen, None
        if gen is not None:
            with contextlib.suppress(Exception):  # interpreter shutdown
                self._unread()
