"""Fork safety: a child forked while the parent's threads are inside cache calls works.

``os.fork()`` copies one thread and every lock as it was: a lock a parent thread held at
that instant stays held forever in the child, and so does any mutex *inside SQLite*
(its file-locking and open paths) that a thread held there. Two tools:

* :func:`after_fork_in_child` registers an object (weakly) whose method runs in every
  forked child: it renews its locks (:func:`fresh`) and drops what belonged to the
  parent's threads (connections, waiters, flights, worker threads).
* :data:`sqlite_gate`: every SQLite call of this library runs inside
  ``sqlite_gate.inside()``; before a fork the forking thread waits (at most
  :data:`FORK_WAIT_S`) until no other thread is inside SQLite and holds new entries
  back until the fork is done, so no SQLite mutex is copied held.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["FORK_WAIT_S", "after_fork_in_child", "fresh", "sqlite_gate"]

log = logging.getLogger("agent_cache")

#: The longest a fork waits for SQLite calls of other threads to finish (a call waits at
#: most its busy timeout); past it the fork goes on (and the child may hang as before).
FORK_WAIT_S = 30.0

L = TypeVar("L")
_LOCK_TYPE = type(threading.Lock())
_RLOCK_TYPE = type(threading.RLock())


def fresh(lock: L) -> L:
    """A new, unheld lock of the same kind as ``lock`` (Lock, RLock or Condition)."""
    if isinstance(lock, threading.Condition):
        return threading.Condition(fresh(lock._lock))  # type: ignore[attr-defined,return-value]
    if isinstance(lock, _RLOCK_TYPE):
        return threading.RLock()  # type: ignore[return-value]
    if isinstance(lock, _LOCK_TYPE):
        return threading.Lock()  # type: ignore[return-value]
    return lock


_hooks: dict[int, tuple[weakref.ref[Any], Callable[[Any], None]]] = {}


def after_fork_in_child(obj: Any, hook: Callable[[Any], None]) -> None:
    """Run ``hook(obj)`` in every child forked while ``obj`` is alive."""
    key = id(obj)

    def gone(_ref: weakref.ref[Any], key: int = key) -> None:
        entry = _hooks.get(key)
        if entry is not None and entry[0] is _ref:
            _hooks.pop(key, None)

    _hooks[key] = (weakref.ref(obj, gone), hook)


def renew_locks(*names: str) -> Callable[[Any], None]:
    """A hook that renews the locks named ``names`` of its object."""

    def hook(obj: Any) -> None:
        for name in names:
            setattr(obj, name, fresh(getattr(obj, name)))

    return hook


class _Gate:
    """Threads inside SQLite, counted; a fork waits for none (but its own) to be inside."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._inside = 0
        self._forking = False
        self._depth = threading.local()

    @contextmanager
    def inside(self) -> Iterator[None]:
        depth = getattr(self._depth, "n", 0)
        if depth:  # nested: already counted
            self._depth.n = depth + 1
            try:
                yield
            finally:
                self._depth.n -= 1
            return
        with self._cond:
            while self._forking:
                self._cond.wait()
            self._inside += 1
        self._depth.n = 1
        try:
            yield
        finally:
            self._depth.n = 0
            with self._cond:
                self._inside -= 1
                if self._inside <= 0:
                    self._cond.notify_all()

    def before_fork(self) -> None:
        self._cond.acquire()  # held across the fork: nobody enters meanwhile
        self._forking = True
        own = 1 if getattr(self._depth, "n", 0) else 0
        deadline = time.monotonic() + FORK_WAIT_S
        while self._inside > own:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning(
                    "agent-cache: fork() while %d threads are still inside SQLite after "
                    "%.0f s; the child may hang",
                    self._inside - own,
                    FORK_WAIT_S,
                )
                break
            self._cond.wait(left)

    def after_fork_in_parent(self) -> None:
        self._forking = False
        self._cond.notify_all()
        self._cond.release()

    def after_fork_in_child(self) -> None:
        own = getattr(self._depth, "n", 0)
        self._cond = threading.Condition(threading.Lock())
        self._inside = 1 if own else 0
        self._forking = False


sqlite_gate = _Gate()


def _in_child() -> None:
    sqlite_gate.after_fork_in_child()
    for ref, hook in list(_hooks.values()):
        obj = ref()
        if obj is None:
            continue
        try:
            hook(obj)
        except Exception:  # one object's reset must not stop the others'
            log.exception("agent-cache: resetting %r after fork failed", type(obj).__name__)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=sqlite_gate.before_fork,
        after_in_parent=sqlite_gate.after_fork_in_parent,
        after_in_child=_in_child,
    )
