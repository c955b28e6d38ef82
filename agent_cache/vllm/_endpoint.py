"""One vLLM replica as the router sees it: its URLs, circuit breaker and counters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx

from agent_cache.errors import ConfigurationError

__all__ = ["CircuitBreaker", "Endpoint", "EndpointStats", "split_base_url"]

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


def split_base_url(base_url: str) -> tuple[str, str]:
    """``(api base, server root)`` of an OpenAI base URL.

    vLLM serves ``/health``, ``/metrics`` and ``/tokenize`` at the server root, not under
    ``/v1``.

    Example:
        >>> split_base_url("http://gpu-1:8000/v1/")
        ('http://gpu-1:8000/v1', 'http://gpu-1:8000')
    """
    url = httpx.URL(base_url.strip())
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError(f"endpoint must be an http(s) URL, not {base_url!r}")
    base = str(url.copy_with(query=None, fragment=None)).rstrip("/")
    path = url.path.rstrip("/")
    root_path = path[: -len("/v1")] if path.endswith("/v1") else path
    root = str(url.copy_with(path=root_path or "/", query=None, fragment=None)).rstrip("/")
    return base, root


class CircuitBreaker:
    """Closed -> open after ``threshold`` consecutive failures -> half-open after
    ``reset_timeout`` seconds (one trial request) -> closed on success, open on failure.

    Not locked: the router calls it under its own lock.

    Example:
        >>> now = [0.0]
        >>> b = CircuitBreaker(threshold=2, reset_timeout=5, clock=lambda: now[0])
        >>> b.failure(); b.failure(); b.available()
        False
        >>> now[0] = 6; b.available()
        True
    """

    def __init__(self, threshold: int, reset_timeout: float, clock: Callable[[], float]) -> None:
        if threshold < 1 or reset_timeout < 0:
            raise ConfigurationError("breaker threshold must be >= 1, reset_timeout >= 0")
        self.threshold = threshold
        self.reset_timeout = reset_timeout
        self._clock = clock
        self.state = CLOSED
        self.failures = 0
        self.opened_at = 0.0

    def available(self) -> bool:
        """Whether a request may be sent now (closed, or open long enough for a trial)."""
        if self.state == CLOSED:
            return True
        if self.state == OPEN:
            return self._clock() - self.opened_at >= self.reset_timeout
        return False  # half-open: the one trial request is in flight

    def acquire(self) -> None:
        """Mark a request as sent; an open breaker past its timeout becomes half-open."""
        if self.state == OPEN:
            self.state = HALF_OPEN

    def success(self) -> bool:
        """Record a success; True when this closed a breaker that was open."""
        recovered = self.state != CLOSED
        self.state, self.failures = CLOSED, 0
        return recovered

    def failure(self) -> None:
        """Record a failure; opens the breaker at the threshold or after a failed trial."""
        self.failures += 1
        if self.state == HALF_OPEN or self.failures >= self.threshold:
            self.state, self.opened_at = OPEN, self._clock()

    def trip(self) -> None:
        """Open now (a failed health check)."""
        self.state, self.opened_at = OPEN, self._clock()
        self.failures = max(self.failures, self.threshold)


@dataclass(frozen=True)
class EndpointStats:
    """Counters of one endpoint (a snapshot).

    Attributes:
        url: The endpoint's OpenAI base URL.
        requests: HTTP attempts sent to it.
        failures: Attempts that failed (connection error, timeout, 429 or 5xx).
        prompt_tokens: Prompt tokens it reported in ``usage``.
        cached_tokens: Prompt tokens it served from its prefix cache
            (``usage.prompt_tokens_details.cached_tokens``; null or missing counts 0).
        in_flight: Requests running on it now.
        state: Its circuit breaker: ``"closed"``, ``"open"`` or ``"half_open"``.
        chars_per_token: The router's characters-per-token estimate when the snapshot
            was taken (one for all its endpoints; see ``VllmRouter(chars_per_token=)``).
    """

    url: str
    requests: int
    failures: int
    prompt_tokens: int
    cached_tokens: int
    in_flight: int
    state: str
    chars_per_token: float = 4.0

    @property
    def cached_share(self) -> float:
        """``cached_tokens / prompt_tokens`` (0.0 before any usage)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class Endpoint:
    """Mutable state of one replica (guarded by the router's lock)."""

    def __init__(self, base_url: str, breaker: CircuitBreaker) -> None:
        self.base_url, self.root_url = split_base_url(base_url)
        self.api_path = httpx.URL(self.base_url).path.rstrip("/")
        self.breaker = breaker
        self.requests = 0
        self.failures = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.in_flight = 0
        self.needs_warmup = False

    def url_for(self, path: str, *, root: bool = False) -> str:
        """Absolute URL of ``path`` under the API base (or the server root)."""
        return (self.root_url if root else self.base_url) + "/" + path.lstrip("/")

    def snapshot(self, chars_per_token: float = 4.0) -> EndpointStats:
        return EndpointStats(
            url=self.base_url,
            requests=self.requests,
            failures=self.failures,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            in_flight=self.in_flight,
            state=self.breaker.state,
            chars_per_token=chars_per_token,
        )
