"""Opening a SQLite file safely when many processes and threads create it at once.

Switching a file to WAL takes an exclusive lock that SQLite's busy timeout does not wait
for (a connection that already read the file cannot upgrade while others read it), so
processes that opened one new path together got ``database is locked`` from
``PRAGMA journal_mode = WAL``. The first-open sequence (journal-mode switch and schema) is
therefore run under :func:`first_open_lock`: a POSIX record lock on a sibling file
(plus a lock between the threads of this process, since record locks are
per process), and :func:`retry_locked` retries it with backoff on ``database is locked``
as a second line of defence (and the only one where ``fcntl`` is missing or the lock file
cannot be created).

The fast path (a file already in WAL, with its schema) takes neither. The lock file is
``<db>-open.lock``, not ``<db>.lock``: SQLite's ``unix-dotfile`` VFS uses that name as its
own lock. It is never removed (removing a lock file races with its next taker).

Record locks (``lockf``) rather than ``flock``: a child forked while this process held
the lock does not inherit it, so the lock is never held by a process that does not know
it has it. The per-path thread locks are recreated in a forked child (a lock another
thread held at fork time would stay held forever there).
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: retries only
    fcntl = None  # type: ignore[assignment]

__all__ = ["first_open_lock", "is_locked_error", "lock_path", "retry_locked"]

T = TypeVar("T")

#: How long to wait for another process's first open before going on without the lock.
LOCK_WAIT_S = 10.0
#: How long :func:`retry_locked` keeps retrying ``database is locked``.
RETRY_S = 10.0

_guard = threading.Lock()
_thread_locks: dict[str, threading.Lock] = {}


def _after_fork_in_child() -> None:
    global _guard, _thread_locks
    _guard = threading.Lock()
    _thread_locks = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def lock_path(db: Path) -> Path:
    """The sibling lock file of ``db``: ``<db>-open.lock`` (kept: removing it would race)."""
    return Path(f"{db}-open.lock")


def _thread_lock(key: str) -> threading.Lock:
    with _guard:
        lock = _thread_locks.get(key)
        if lock is None:
            lock = _thread_locks[key] = threading.Lock()
        return lock


@contextmanager
def first_open_lock(db: Path, wait: float = LOCK_WAIT_S) -> Iterator[bool]:
    """Hold the first-open lock of ``db``; yield whether the cross-process lock was taken.

    Never fails for the lock's sake: without ``fcntl``, with a lock file that cannot be
    created, or after ``wait`` seconds behind another process, it yields ``False`` and
    the caller relies on :func:`retry_locked`.
    """
    target = lock_path(db)
    key = os.path.realpath(target)
    local = _thread_lock(key)
    deadline = time.monotonic() + wait
    if not local.acquire(timeout=max(wait, 0.0)):
        yield False
        return
    try:
        fd = _open_lock_file(target)
        if fd is None:
            yield False
            return
        try:
            held = _lock(fd, deadline)
            try:
                yield held
            finally:
                if held:
                    _unlock(fd)
        finally:
            os.close(fd)
    finally:
        local.release()


def _open_lock_file(target: Path) -> int | None:
    if fcntl is None:  # pragma: no cover - Windows
        return None
    try:
        return os.open(target, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError:  # a read-only folder, ...: retries only
        return None


def _lock(fd: int, deadline: float) -> bool:
    assert fcntl is not None
    pause = 0.001
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:  # held by another process (EACCES / EAGAIN), or unsupported
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.02)


def _unlock(fd: int) -> None:
    assert fcntl is not None
    with contextlib.suppress(OSError):  # closing the descriptor releases it anyway
        fcntl.lockf(fd, fcntl.LOCK_UN)


def is_locked_error(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's ``database is locked`` / ``busy`` (worth retrying)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def retry_locked(
    fn: Callable[[], T],
    *,
    budget: float = RETRY_S,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``fn()``, retried with jittered exponential backoff while it raises
    ``database is locked`` and ``budget`` seconds have not passed (then the error)."""
    deadline = time.monotonic() + budget
    pause = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not is_locked_error(exc) or time.monotonic() + pause > deadline:
                raise
        sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.25)
