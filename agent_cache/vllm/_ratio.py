"""Characters per token: set by the user, or learned from the replicas' ``usage``.

The router measures prompts in characters (its prefix blocks are character windows)
but the replicas count tokens: their KV capacity, their prefill. A fixed 4.0 is off by
40 % for some tokenizers (SmolLM2 gives ~5.7 characters a token on RAG prompts), and a
wrong ratio makes the prefix tree forget blocks the replicas still hold (or remember
blocks they dropped). Unless told the ratio, the router learns it from its own
traffic: every answered call's ``usage.prompt_tokens`` against the characters of the
prompt it sent, as a ratio of sums over the last ``window`` calls (a long prompt
weighs more than a short one, as it does in the cache).

Example:
    >>> ratio = CharsPerToken()
    >>> ratio.value
    4.0
    >>> ratio.observe(6_000, 1_000)
    True
    >>> ratio.value
    6.0
    >>> CharsPerToken(5.0).observe(6_000, 1_000)  # a ratio the user set stays
    False
"""

from __future__ import annotations

import threading
from collections import deque

from agent_cache.errors import ConfigurationError

__all__ = ["CharsPerToken"]

#: The starting estimate (English text with a BPE tokenizer), and the range any
#: estimate stays in: below 1 a "character" is not text (CJK is about 1-1.5), above 12
#: the prompt held something the router does not see as characters (images, ...).
DEFAULT, LOWEST, HIGHEST = 4.0, 1.0, 12.0


class CharsPerToken:
    """The current characters-per-token estimate (thread-safe).

    Args:
        fixed: A ratio to keep (no learning); None: start at 4.0 and learn.
        window: Calls the learned ratio is taken over (the most recent).
        min_tokens: Prompts shorter than this many tokens are ignored (the chat
            template's own tokens would dominate them).
    """

    def __init__(
        self, fixed: float | None = None, *, window: int = 256, min_tokens: int = 32
    ) -> None:
        if fixed is not None and not fixed > 0:
            raise ConfigurationError(f"chars_per_token must be > 0 or None, not {fixed!r}")
        if window < 1 or min_tokens < 1:
            raise ConfigurationError("window and min_tokens must be >= 1")
        self.learned = fixed is None
        self._value = DEFAULT if fixed is None else float(fixed)
        self._samples: deque[tuple[int, int]] = deque()
        self._window = window
        self._min_tokens = min_tokens
        self._chars = 0
        self._tokens = 0
        self._lock = threading.Lock()

    @property
    def value(self) -> float:
        """Characters per token now."""
        return self._value

    @property
    def samples(self) -> int:
        """Calls the learned ratio rests on now (0: still the starting 4.0)."""
        return len(self._samples)

    def observe(self, chars: int, tokens: int) -> bool:
        """Take one answered call: its prompt's ``chars`` and ``usage.prompt_tokens``.

        Ignored when the ratio is fixed, the prompt is shorter than ``min_tokens``, or
        the call's own ratio is outside [1, 12] (not text the router sees). Returns
        whether the estimate changed.
        """
        if not self.learned or tokens < self._min_tokens or chars <= 0:
            return False
        if not LOWEST <= chars / tokens <= HIGHEST:
            return False
        with self._lock:
            self._samples.append((chars, tokens))
            self._chars += chars
            self._tokens += tokens
            while len(self._samples) > self._window:
                c, t = self._samples.popleft()
                self._chars -= c
                self._tokens -= t
            new = min(HIGHEST, max(LOWEST, self._chars / self._tokens))
            changed = new != self._value
            self._value = new
            return changed
