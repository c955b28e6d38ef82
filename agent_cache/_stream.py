"""Streams through the cache: one model stream for all concurrent identical misses.

:meth:`LayeredCache.fetch_stream` / :meth:`~LayeredCache.afetch_stream` look the request
up like :meth:`~LayeredCache.fetch` (same key, policy, stats). A hit is returned at once
(:attr:`Streamed.hit`; nothing to iterate: the caller replays ``hit.response``). On a
miss the caller joins this process's *recording* for the key, or opens it:

- a recording holds the chunks of one model stream (``start_stream()``, called once, by
  whichever reader pulls first); every reader (threads and asyncio tasks alike) yields
  them from the start, live, as they arrive: concurrent identical misses make one model
  call and see the same chunks;
- any reader that can drive the stream pulls the next chunk when nobody else does (a
  sync stream: any thread; an async one: any task on the event loop it was started in),
  so a reader that stops early (``break``, ``close()``, cancellation) leaves the rest to
  the others; an async pull runs as a task of its own, so a cancelled reader does not
  break the stream for the others;
- when the stream ends normally, ``join(chunks)`` gives the JSON value to store (``None``:
  not stored) and the fetch path's write-back stores it once (:meth:`Fetcher.settle_flow`:
  policy, TTL, tags, quotas, negative entries, the model call's usage); then the flight
  is released;
- when the stream raises, nothing is stored and every reader gets the same exception
  (one failing call, not N); when every reader that could drive it has left, the stream is
  closed, nothing is stored and the flight is released. A reader left behind (one that
  could not drive it) starts its own call if it has yielded nothing yet, else gets
  :class:`StreamAbandoned`;
- a reader that waited ``singleflight_timeout`` seconds for a first chunk gives up on the
  others and streams on its own (degrade, never hang).

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
import inspect
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from typing import Any, Generic, TypeVar

from agent_cache import _fork
from agent_cache._fetch import Fetcher, Plan
from agent_cache._flow import run_async, run_sync
from agent_cache._hits import CacheHit
from agent_cache._lookup import Reader
from agent_cache.degrade import Overloaded, Ticket
from agent_cache.errors import BackendError

__all__ = ["AStreamed", "StreamAbandoned", "Streamed", "Streams"]

log = logging.getLogger("agent_cache")
C = TypeVar("C")
Join = Callable[[list[Any]], Any]


class StreamAbandoned(BackendError):
    """The stream this reader was following was closed by the readers that drove it
    before it ended, after this reader had yielded some of it."""


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _Recording:
    """One model stream and the readers that follow it (see the module docstring)."""

    def __init__(self, plan: Plan, start: Callable[[], Any], join: Join, *, kind: str) -> None:
        self.plan, self.start, self.join, self.kind = plan, start, join, kind
        self.loop: asyncio.AbstractEventLoop | None = (
            asyncio.get_running_loop() if kind == "async" else None
        )
        self.cond = threading.Condition()
        self.chunks: list[Any] = []
        self.state = "open"  # "open" | "done" | "failed" | "abandoned"
        self.error: BaseException | None = None
        self.value: Any = None
        self.source: Any = None
        self.starter: object | None = None  # the reader that called start_stream()
        self.ticket: Ticket | None = None
        self.started = 0.0
        self.pulling = False
        self.drivers = 0  # readers present that can pull
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def can_drive(self, kind: str) -> bool:
        if kind != self.kind:
            return False
        if kind == "sync":
            return True
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def changed(self) -> None:
        """Wake every reader (call with ``cond`` held)."""
        self.cond.notify_all()
        waiters, self.waiters = self.waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_resolve, fut)

    def next_step(self, i: int, driver: bool) -> str:
        """What reader at position ``i`` does now (call with ``cond`` held)."""
        if i < len(self.chunks):
            return "chunk"
        if self.state != "open":
            return self.state
        if driver and not self.pulling:
            self.pulling = True
            return "pull"
        return "wait"


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
        while True:
            mark = self._ended_count(plan.flight_key)
            hit = run_sync(self._reader.read_flow(plan.req, plan.policy, plan.llm_string))
            got = self._open(plan, start, join, hit, "sync", mark)
            if got is not None:
                return got  # type: ignore[return-value]

    async def afetch(self, plan: Plan, start: Callable[[], Any], join: Join) -> AStreamed[Any]:
        while True:
            mark = self._ended_count(plan.flight_key)
            hit = await run_async(self._reader.read_flow(plan.req, plan.policy, plan.llm_string))
            got = self._open(plan, start, join, hit, "async", mark)
            if got is not None:
                return got  # type: ignore[return-value]

    def _ended_count(self, key: str) -> int:
        with self._lock:
            return self._ended.get(key, 0)

    def _open(
        self,
        plan: Plan,
        start: Callable[[], Any],
        join: Join,
        hit: CacheHit | None,
        kind: str,
        mark: int,
    ) -> Streamed[Any] | AStreamed[Any] | None:
        """The reader's stream; None when a recording of the key ended (stored) after
        ``mark`` was taken and none is open: the lookup is to be run again."""
        make = Streamed if kind == "sync" else AStreamed
        own = (plan, start, join)
        if hit is not None:
            return make(self, None, own, hit=hit, value=hit.response)
        found, negative = (
            (False, None)
            if plan.policy == "bypass"
            else self._fetcher._negative_hit(plan.flight_key)
        )
        if found:
            return make(self, None, own, value=negative, served=True)
        rec = self._recording(plan, start, join, kind, mark)
        return None if rec is None else make(self, rec, own)

    def _recording(
        self, plan: Plan, start: Callable[[], Any], join: Join, kind: str, mark: int | None
    ) -> _Recording | None:
        """The open recording of the key, joined, or a new one. None (``mark`` given): one
        ended since ``mark`` was taken and none is open, so the lookup is to be rerun."""
        if plan.policy == "bypass":  # neither read nor write: a recording of its own
            return _Recording(dataclasses.replace(plan, policy="no_store"), start, join, kind=kind)
        with self._lock:
            rec = self._flights.get(plan.flight_key)
            if rec is None or rec.state != "open":
                ended = self._ended.get(plan.flight_key, 0)
                if mark is not None and plan.policy != "refresh" and ended != mark:
                    return None  # one ended (and stored) since this reader's lookup
                rec = self._flights[plan.flight_key] = _Recording(plan, start, join, kind=kind)
            return rec

    def _solo(self, plan: Plan, start: Callable[[], Any], join: Join, kind: str) -> _Recording:
        """A recording nobody else joins (a reader that gave up waiting)."""
        return _Recording(plan, start, join, kind=kind)

    def _unregister(self, rec: _Recording) -> None:
        with self._lock:
            if self._flights.get(rec.plan.flight_key) is rec:
                del self._flights[rec.plan.flight_key]

    # ------------------------------------------------------------------ endings
    def _joined(self, rec: _Recording) -> Any:
        try:
            return rec.join(list(rec.chunks))
        except Exception as exc:  # the chunks were served; only the write is lost
            log.warning("agent-cache could not join a streamed answer (not stored): %s", exc)
            return None

    def _unsettled(self, exc: Exception) -> None:
        self._fetcher._stats.incr("errors")
        log.warning("agent-cache could not record a streamed answer (served anyway): %s", exc)

    def _end(self, rec: _Recording, state: str, error: BaseException | None = None) -> None:
        self._unregister(rec)
        if state == "done":
            key = rec.plan.flight_key
            with self._lock:
                self._ended[key] = self._ended.pop(key, 0) + 1  # newest last
                if len(self._ended) > _ENDED_KEPT:
                    del self._ended[next(iter(self._ended))]  # a reset count: one re-read
        with rec.cond:
            rec.state, rec.error, rec.pulling = state, error, False
            rec.changed()

    def _release_sync(self, rec: _Recording) -> None:
        ticket, rec.ticket = rec.ticket, None
        if ticket is not None and ticket.token:
            self._fetcher.gate.release(ticket)

    async def _release_async(self, rec: _Recording) -> None:
        ticket, rec.ticket = rec.ticket, None
        if ticket is not None and ticket.token:
            await asyncio.to_thread(self._fetcher.gate.release, ticket)

    def _abandon(self, rec: _Recording) -> None:
        """No reader can drive ``rec`` any more: close its stream, store nothing."""
        source, rec.source = rec.source, None
        self._end(rec, "abandoned")
        loop = rec.loop
        if rec.kind == "async" and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.spawn, self._aclose_source(rec, source))
            return
        self._release_sync(rec)
        close = getattr(source, "close", None)
        try:
            if close is not None:
                close()
        except Exception as exc:
            log.debug("agent-cache: closing an abandoned stream failed: %s", exc)

    async def _aclose_source(self, rec: _Recording, source: Any) -> None:
        await self._release_async(rec)
        aclose = getattr(source, "aclose", None)
        try:
            if aclose is not None:
                await aclose()
        except Exception as exc:
            log.debug("agent-cache: closing an abandoned stream failed: %s", exc)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)  # kept until done (the loop holds tasks weakly)
        task.add_done_callback(self._tasks.discard)
        return task

    def leave(self, rec: _Recording, driver: bool) -> None:
        with rec.cond:
            if driver:
                rec.drivers -= 1
            orphan = rec.state == "open" and rec.drivers <= 0 and not rec.pulling
            if not orphan:
                rec.changed()  # a non-driver left behind is woken to see it
        if orphan:
            self._abandon(rec)

    # ------------------------------------------------------------------ pulls
    def pull_sync(self, rec: _Recording, who: object) -> None:
        """One chunk into ``rec`` (or its end), from this thread; never raises."""
        try:
            if rec.source is None:
                rec.ticket = ticket = run_sync(self._fetcher.gate.admit_flow())
                if not ticket.ok:
                    raise self._overloaded(rec)
                rec.starter, rec.started = who, time.perf_counter()
                rec.source = iter(rec.start())
            chunk = next(rec.source)
        except StopIteration:
            self._release_sync(rec)
            rec.value = value = self._joined(rec)
            try:
                run_sync(self._fetcher.settle_flow(rec.plan, rec.started, value, joined=True))
            except Exception as exc:  # the answer was streamed; only its record is lost
                self._unsettled(exc)
            finally:
                self._end(rec, "done")
        except BaseException as exc:
            self._release_sync(rec)
            self._end(rec, "failed", exc)
        else:
            with rec.cond:
                rec.chunks.append(chunk)
                rec.pulling = False
                rec.changed()
        self._check_orphan(rec)

    async def pull_async(self, rec: _Recording, who: object) -> None:
        """Async twin of :meth:`pull_sync`, run as a task of its own (see the module
        docstring); a cancelled pull abandons the stream."""
        try:
            if rec.source is None:
                rec.ticket = ticket = await run_async(self._fetcher.gate.admit_flow())
                if not ticket.ok:
                    raise self._overloaded(rec)
                rec.starter, rec.started = who, time.perf_counter()
                source = rec.start()
                if inspect.isawaitable(source):
                    source = await source
                rec.source = source.__aiter__()
            chunk = await rec.source.__anext__()
        except StopAsyncIteration:
            await self._release_async(rec)
            rec.value = value = self._joined(rec)
            try:
                await run_async(
                    self._fetcher.settle_flow(rec.plan, rec.started, value, joined=True)
                )
            except Exception as exc:
                self._unsettled(exc)
            finally:
                self._end(rec, "done")
        except asyncio.CancelledError:
            self._abandon(rec)
            return
        except BaseException as exc:
            await self._release_async(rec)
            self._end(rec, "failed", exc)
        else:
            with rec.cond:
                rec.chunks.append(chunk)
                rec.pulling = False
                rec.changed()
        self._check_orphan(rec)

    def _check_orphan(self, rec: _Recording) -> None:
        with rec.cond:
            orphan = rec.state == "open" and rec.drivers <= 0 and not rec.pulling
        if orphan:
            self._abandon(rec)

    def _overloaded(self, rec: _Recording) -> Overloaded:
        gate = self._fetcher.gate
        self._fetcher._stats.incr("overloaded")
        return Overloaded(
            f"no model call slot within {gate.wait} s (max_model_calls={gate.limit}, "
            f"shared_model_calls={gate.shared_limit}, model_queue={gate.queue}) for a "
            f"stream in {rec.plan.req.namespace!r}",
            layer="model",
        )

    def coalesced(self, rec: _Recording) -> None:
        self._fetcher._stats.incr("coalesced", namespace=rec.plan.req.namespace)


def _settle(step: str, i: int, rec: _Recording) -> bool | None:
    """What a reader at position ``i`` does on a ``step`` that is neither a chunk nor a
    pull (the decision shared by the sync and async readers): ``True``, the stream has
    ended; ``False``, start a stream of its own (the one it followed was abandoned, or
    stayed silent past the timeout, before its first chunk); ``None``, look again.
    Raises what ended the stream otherwise."""
    if step == "done":
        return True
    if step == "failed":
        assert rec.error is not None
        raise rec.error
    if i > 0 and step == "abandoned":
        raise StreamAbandoned(
            "the stream this request followed was closed before it ended", layer="model"
        )
    if i == 0 and step in ("abandoned", "wait"):
        return False
    return None


class _Cursor:
    """One reader's place in a recording (what its reading generator holds, so that a
    dropped :class:`Streamed` is freed, and closed, at once)."""

    def __init__(
        self, streams: Streams, rec: _Recording | None, own: tuple[Plan, Callable[[], Any], Join]
    ) -> None:
        self.streams = streams
        self.rec = rec
        self.own = own  # this request's plan, start_stream and join (if it must call)

    def _own_recording(self, step: str, kind: str) -> tuple[_Recording, bool]:
        """The recording this reader turns to when the one it followed gave it nothing
        (``step``: ``"wait"``, silent past the timeout: one nobody else joins;
        ``"abandoned"``: the request's flight), joined; and whether it drives it."""
        streams = self.streams
        rec = (
            streams._solo(*self.own, kind)
            if step == "wait"
            else streams._recording(*self.own, kind, None)
        )
        assert rec is not None  # without a mark there is always one
        self.rec = rec
        driver = rec.can_drive(kind)
        with rec.cond:
            rec.drivers += 1
        return rec, driver

    def follow(self) -> Generator[Any, None, None]:
        rec = self.rec
        assert rec is not None
        streams = self.streams
        driver = rec.can_drive("sync")
        with rec.cond:
            if driver:
                rec.drivers += 1
        i = 0
        try:
            while True:
                with rec.cond:
                    step = rec.next_step(i, driver)
                    waited = False
                    while step == "wait" and not waited:
                        waited = not rec.cond.wait(streams.timeout)
                        step = rec.next_step(i, driver)
                    item: Any = rec.chunks[i] if step == "chunk" else None
                if step == "chunk":
                    i += 1
                    yield item
                elif step == "pull":
                    streams.pull_sync(rec, self)
                else:
                    ended = _settle(step, i, rec)
                    if ended:
                        return
                    if ended is False:  # start our own
                        streams.leave(rec, driver)
                        driver = False
                        rec, driver = self._own_recording(step, "sync")
        finally:
            streams.leave(rec, driver)

    async def afollow(self) -> AsyncIterator[Any]:
        rec = self.rec
        assert rec is not None
        streams = self.streams
        loop = asyncio.get_running_loop()
        driver = rec.can_drive("async")
        with rec.cond:
            if driver:
                rec.drivers += 1
        i = 0
        try:
            while True:
                fut: asyncio.Future[None] | None = None
                with rec.cond:
                    step = rec.next_step(i, driver)
                    if step == "wait":
                        fut = loop.create_future()
                        rec.waiters.append((loop, fut))
                    item: Any = rec.chunks[i] if step == "chunk" else None
                if fut is not None:
                    try:
                        await asyncio.wait_for(fut, streams.timeout)
                        continue
                    except TimeoutError:
                        if i > 0:
                            continue
                if step == "chunk":
                    i += 1
                    yield item
                elif step == "pull":
                    await asyncio.shield(streams.spawn(streams.pull_async(rec, self)))
                else:
                    ended = _settle(step, i, rec)
                    if ended:
                        return
                    if ended is False:  # start our own
                        streams.leave(rec, driver)
                        driver = False
                        rec, driver = self._own_recording(step, "async")
        finally:
            streams.leave(rec, driver)


class _Reader:
    """What :class:`Streamed` and :class:`AStreamed` share: the outcome attributes."""

    def __init__(
        self,
        streams: Streams,
        rec: _Recording | None,
        own: tuple[Plan, Callable[[], Any], Join],
        *,
        hit: CacheHit | None = None,
        value: Any = None,
        served: bool = False,
    ) -> None:
        self._streams = streams
        self._cur = _Cursor(streams, rec, own)
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
        """The served value, or once a recorded stream has ended the joined value
        (``join(chunks)``); ``None`` before."""
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
        hit: the entry served (replay ``hit.response``); ``None`` on a miss.
    """

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
