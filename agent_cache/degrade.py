"""Degradation: what the cache does when misses would flood the model.

- :class:`ModelGate`: at most ``limit`` model calls at once in this process, and at
  most ``shared_limit`` in the whole deployment (slots in Redis, when the exact layer
  is Redis and it answers; otherwise the process limit alone holds), with a bounded
  queue: a caller past ``queue`` waiters, or one that waited ``wait`` seconds, is not
  admitted, and gets the namespace's fallback answer or an ``Overloaded`` error.
- :class:`NegativeCache`: for a few seconds, a prompt whose answer was empty or a
  refusal gets that same answer again without a model call, so a flood of one junk
  prompt costs one call, not thousands (per process; opt-in).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agent_cache import _fork
from agent_cache import _io as io
from agent_cache._flow import Flow, run_sync
from agent_cache.errors import BackendError, ConfigurationError
from agent_cache.policy import is_cacheable

__all__ = ["ModelGate", "NegativeCache", "Overloaded", "Ticket", "looks_refused"]

_POLL_S = 0.02
_REFUSAL = re.compile(
    r"^\s*(i['’]m sorry|i am sorry|sorry, (but )?i|i can(no|['’])t|i cannot|i won['’]t|"
    r"i am unable|i['’]m unable|i['’]m not able|as an ai)\b",
    re.IGNORECASE,
)


class Overloaded(BackendError):
    """No model call slot was free within the wait, and the namespace has no fallback."""


def looks_refused(value: Any) -> bool:
    """Empty answers, errors and short refusals ("I'm sorry, I can't ...").

    Example:
        >>> looks_refused(""), looks_refused("I'm sorry, I can't help."), looks_refused("42")
        (True, True, False)
    """
    if not is_cacheable(value):
        return True
    text = (
        value
        if isinstance(value, str)
        else (value.get("text", value.get("content")) if isinstance(value, dict) else None)
    )
    return isinstance(text, str) and len(text) < 300 and bool(_REFUSAL.match(text))


class NegativeCache:
    """A short-lived, bounded, per-process memory of prompts that got no real answer."""

    def __init__(
        self, ttl: float, *, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not ttl > 0:
            raise ConfigurationError(f"negative_ttl must be > 0 seconds, got {ttl!r}")
        self.ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))
        self._items: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    def get(self, key: str) -> tuple[bool, Any]:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return False, None
            if item[0] <= self._clock():
                del self._items[key]
                return False, None
            return True, item[1]

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._items[key] = (self._clock() + self.ttl, value)
            self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)


@dataclass(frozen=True)
class Ticket:
    """One caller's admission: ``ok`` when it may call the model; the slots it holds."""

    token: str
    local: bool
    ok: bool


class ModelGate:
    """Admission for model calls: a per-process limit, an optional deployment-wide one,
    and a bounded queue.

    Args:
        limit: model calls at once in this process (``None``: no process limit).
        shared_limit: model calls at once in the deployment, counted in the store
            returned by ``store()`` when it has ``acquire_slot`` (Redis) and answers.
        queue: callers that may wait for a slot; the next one is refused at once.
        wait: seconds a caller waits for a slot before it is refused.
        slot_ttl: a shared slot whose holder died is freed after this many seconds.

    Example:
        >>> gate = ModelGate(limit=1, queue=0, wait=0.0)
        >>> with gate.admit() as ok1:
        ...     with gate.admit() as ok2:
        ...         (ok1, ok2)
        (True, False)
    """

    def __init__(
        self,
        limit: int | None,
        *,
        shared_limit: int | None = None,
        queue: int = 64,
        wait: float = 30.0,
        slot_ttl: float = 120.0,
        store: Callable[[], Any] = lambda: None,
        name: str = "model",
        on_error: Callable[[Exception, str], None] = lambda exc, what: None,
    ) -> None:
        for label, value in (("max_model_calls", limit), ("shared_model_calls", shared_limit)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigurationError(f"{label} must be an int >= 1 or None, got {value!r}")
        if queue < 0 or wait < 0:
            raise ConfigurationError("model_queue and model_wait must be >= 0")
        self.limit, self.shared_limit = limit, shared_limit
        self.queue, self.wait, self.slot_ttl = queue, wait, slot_ttl
        self._store, self._name, self._on_error = store, name, on_error
        self._sem = threading.BoundedSemaphore(limit) if limit is not None else None
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))
        self._waiting = 0

    @property
    def active(self) -> bool:
        return self.limit is not None or self.shared_limit is not None

    # -- one attempt, shared by the sync and async loops ---------------------------------
    def try_slots(self, token: str, have_local: bool) -> tuple[bool, bool]:
        """One attempt at the slots: (local slot held, all slots held)."""
        if not have_local and self._sem is not None:
            have_local = self._sem.acquire(blocking=False)
            if not have_local:
                return False, False
        return have_local, self._try_shared(token)

    def _try_shared(self, token: str) -> bool:
        if self.shared_limit is None:
            return True
        store = self._store()
        acquire = getattr(store, "acquire_slot", None)
        if acquire is None:
            return True
        try:
            return bool(acquire(self._name, token, self.shared_limit, self.slot_ttl))
        except Exception as exc:  # the shared store is down: the process limit holds
            self._on_error(exc, "model slot")
            return True

    def _release(self, token: str, local: bool, shared: bool) -> None:
        if local and self._sem is not None:
            self._sem.release()
        if shared and self.shared_limit is not None:
            release = getattr(self._store(), "release_slot", None)
            if release is not None:
                try:
                    release(self._name, token)
                except Exception as exc:
                    self._on_error(exc, "model slot")

    def _enter_queue(self) -> bool:
        with self._lock:
            if self._waiting >= self.queue:
                return False
            self._waiting += 1
            return True

    def _leave_queue(self) -> None:
        with self._lock:
            self._waiting -= 1

    def admit_flow(self) -> Flow[Ticket]:
        """Wait (at most ``wait`` s, in a queue of at most ``queue``) for a slot; the
        ticket says whether the call may go to the model. Release it with
        :meth:`release` (every ticket, admitted or not)."""
        if not self.active:
            return Ticket("", False, True)
        token = uuid.uuid4().hex
        local, ok = yield from io.call(self.try_slots, token, False)
        queued = False
        if not ok:
            queued = self._enter_queue()
            deadline = time.monotonic() + self.wait
            while queued and not ok and time.monotonic() < deadline:
                yield from io.sleep(_POLL_S)
                local, ok = yield from io.call(self.try_slots, token, local)
            if queued:
                self._leave_queue()
        return Ticket(token, local, ok)

    def release(self, ticket: Ticket) -> None:
        if ticket.token:
            self._release(ticket.token, ticket.local, ticket.ok)

    @contextmanager
    def admit(self) -> Iterator[bool]:
        """``True`` inside when the call may go to the model."""
        ticket = run_sync(self.admit_flow())
        try:
            yield ticket.ok
        finally:
            self.release(ticket)
