"""A circuit breaker per shared backend (a Redis server, a Chroma server).

A backend that is down or stalled makes every call wait for its timeout. After
``failures`` consecutive failures the breaker *opens*: calls fail at once with a
:class:`~agent_cache.errors.BackendError` (``circuit_open = True``), which the cache
serves as a miss, without touching the network. After ``reset_after`` seconds it lets
one call through (*half-open*): if the backend answers, the breaker closes and traffic
resumes; if not, it opens for another ``reset_after`` seconds. So a dead server costs
one timeout per ``reset_after`` seconds, not one per request, and the application
recovers by itself when the server is back.

The caller's own mistakes (``ConfigurationError``, ``SerializationError``) say nothing
about the backend and are neither failures nor successes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from agent_cache import _fork
from agent_cache.errors import BackendError, ConfigurationError, SerializationError

__all__ = ["CircuitBreaker"]

log = logging.getLogger("agent_cache")

State = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    """Closed → open after ``failures`` consecutive failures → half-open after
    ``reset_after`` s (one probe) → closed on success, open again on failure.

    Thread-safe; ``clock`` is injectable (tests advance a fake one).

    Example:
        >>> now = [0.0]
        >>> b = CircuitBreaker("redis", failures=1, reset_after=5.0, clock=lambda: now[0])
        >>> b.failure(); b.state
        'open'
        >>> b.allow(), (now.__setitem__(0, 6.0), b.allow())[1], b.allow()  # one probe
        (False, True, False)
        >>> b.success(); b.state
        'closed'
    """

    def __init__(
        self,
        name: str,
        *,
        failures: int = 3,
        reset_after: float = 5.0,
        layer: str | None = None,
        endpoint: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failures < 1:
            raise ConfigurationError(f"failures must be >= 1, got {failures}")
        if not reset_after > 0:
            raise ConfigurationError(f"reset_after must be > 0 seconds, got {reset_after!r}")
        self.name = name
        self.failures = failures
        self.reset_after = float(reset_after)
        self.layer = layer
        self.endpoint = endpoint
        self._clock = clock
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))
        self._state: State = "closed"
        self._consecutive = 0
        self._opened_at = 0.0
        self._probing = False
        self.opened = 0  # times the breaker opened (for stats and tests)
        self.rejected = 0  # calls refused while open

    @property
    def state(self) -> State:
        with self._lock:
            return self._state

    def allow(self) -> bool:
        """May a call go to the backend now? (In half-open state: only the one probe.)"""
        with self._lock:
            if self._state == "closed":
                return True
            if self._state == "open" and self._clock() - self._opened_at >= self.reset_after:
                self._state = "half_open"
                self._probing = False
            if self._state == "half_open" and not self._probing:
                self._probing = True
                return True
            self.rejected += 1
            return False

    def success(self) -> None:
        with self._lock:
            was = self._state
            self._state, self._consecutive, self._probing = "closed", 0, False
        if was != "closed":
            log.warning("agent-cache: %s answers again, circuit closed", self.name)

    def failure(self) -> None:
        with self._lock:
            self._consecutive += 1
            if self._state == "half_open" or (
                self._state == "closed" and self._consecutive >= self.failures
            ):
                first = self._state == "closed"
                self._state, self._opened_at, self._probing = "open", self._clock(), False
                self.opened += 1
            else:
                return
        if first:
            log.warning(
                "agent-cache: %s failed %d times in a row, circuit open: its calls are "
                "misses for the next %.1f s",
                self.name,
                self.failures,
                self.reset_after,
            )

    def _release(self) -> None:
        with self._lock:
            self._probing = False

    def rejection(self) -> BackendError:
        exc = BackendError(
            f"{self.name} circuit open (failing backend, retried in {self.reset_after} s)",
            layer=self.layer,
            endpoint=self.endpoint,
        )
        exc.circuit_open = True  # type: ignore[attr-defined]
        return exc

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Run the body as one backend call: refused at once while open, and its outcome
        recorded (any exception but the caller's own bad input is a failure)."""
        if not self.allow():
            raise self.rejection()
        try:
            yield
        except (ConfigurationError, SerializationError):
            self._release()
            raise
        except Exception as exc:
            if getattr(exc, "answered", False):  # the backend answered (e.g. WRONGTYPE)
                self.success()
            elif getattr(exc, "fatal", False):
                self._release()
            else:
                self.failure()
            raise
        except BaseException:
            self._release()
            raise
        else:
            self.success()
