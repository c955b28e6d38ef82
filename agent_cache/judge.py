"""The application's own model as a judge, asked only where the semantic layer is unsure.

``LayeredCache(judge=model)`` (off by default) asks ``model`` one short question when the
best candidate of a lookup is close but not servable: its cosine sits in a band just
below the namespace's threshold, or the difference analysis refused it only for an
unexplained word substitution (a synonym it does not know, an abbreviation). Nothing the
analysis refuses for a reason it understands (numbers, dates, negation, opposites,
modality, ...) ever reaches the judge. The question::

    Do these two requests ask for the same answer? Reply with yes or no.
    Request A: ...
    Request B: ...

at temperature 0 and a few output tokens. Only a reply starting with "yes" serves; a
failure, a timeout or anything else is a miss. Verdicts are cached per pair (in this
process), so a pair costs one call; at most ``max_share`` of the lookups are judged.
Counters (asked, yes, no, cached, failed, capped), latency and tokens are in
:meth:`Judge.stats` and in ``LayeredCache.stats().counters`` (``judge:*``).

The model can be a callable ``prompt -> str``, a LangChain chat model or LLM
(``invoke``), a LlamaIndex LLM (``complete``) or a :class:`~agent_cache.vllm.VllmRouter`
(``chat``): the same path the application already uses.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import threading
import time
from collections import OrderedDict
from typing import Any

from agent_cache._flow import Flow, run_async, run_sync
from agent_cache._io import call_twin
from agent_cache.errors import ConfigurationError

__all__ = ["PROMPT", "Judge", "judge_from"]

PROMPT = (
    "Do these two requests ask for the same answer? Reply with yes or no.\n"
    "Request A: {a}\nRequest B: {b}\nAnswer:"
)


def _text(reply: Any) -> str:
    if isinstance(reply, str):
        return reply
    for attr in ("content", "text"):  # LangChain message, LlamaIndex CompletionResponse
        value = getattr(reply, attr, None)
        if isinstance(value, str):
            return value
    if isinstance(reply, dict):  # an OpenAI-compatible chat completion (VllmRouter)
        try:
            return str(reply["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            return ""
    return str(reply)


def _caller(model: Any, max_tokens: int) -> Any:
    """A ``prompt -> reply`` function over the model's own API."""
    if hasattr(model, "chat") and hasattr(model, "endpoints"):  # VllmRouter
        return lambda prompt: model.chat(
            [{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0.0
        )
    if hasattr(model, "complete") and not hasattr(model, "invoke"):  # LlamaIndex LLM
        return lambda prompt: model.complete(prompt)
    if hasattr(model, "invoke"):  # LangChain
        bound = model
        bind = getattr(model, "bind", None)
        if callable(bind):
            try:
                bound = bind(temperature=0, max_tokens=max_tokens)
            except Exception:  # a model that takes no such arguments
                bound = model
        return lambda prompt: bound.invoke(prompt)
    if callable(model):
        return model
    raise ConfigurationError(
        f"judge must be a callable, a LangChain model, a LlamaIndex LLM or a VllmRouter, "
        f"not {type(model).__name__}"
    )


class Judge:
    """Ask ``model`` whether two requests want the same answer (see the module docstring).

    Args:
        model: the judge (a callable ``prompt -> str`` or a framework model).
        band: how far below the threshold a candidate may be and still be judged.
        max_share: at most this share of the lookups it is shown are judged.
        timeout: seconds to wait for one verdict (then it is a miss).
        max_tokens: output tokens asked for.
        cache_size: pairs whose verdict is remembered.

    Example:
        >>> judge = Judge(lambda prompt: "yes")
        >>> judge.ask("How do I end my plan?", "How do I cancel my subscription?")
        True
        >>> judge.ask("How do I end my plan?", "How do I cancel my subscription?")  # cached
        True
        >>> judge.stats()["asked"], judge.stats()["cached"]
        (1, 1)
    """

    def __init__(
        self,
        model: Any,
        *,
        band: float = 0.08,
        max_share: float = 0.2,
        timeout: float = 5.0,
        max_tokens: int = 3,
        cache_size: int = 4096,
    ) -> None:
        if not 0 <= band <= 0.5:
            raise ConfigurationError(f"judge band must be in [0, 0.5], got {band}")
        if not 0 < max_share <= 1:
            raise ConfigurationError(f"judge max_share must be in (0, 1], got {max_share}")
        if timeout <= 0 or max_tokens < 1 or cache_size < 0:
            raise ConfigurationError("judge timeout must be > 0, max_tokens >= 1, cache_size >= 0")
        self.model = model
        self.band = band
        self.max_share = max_share
        self.timeout = timeout
        self.max_tokens = max_tokens
        self._call = _caller(model, max_tokens)
        self._verdicts: OrderedDict[str, bool] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._counts = dict.fromkeys(
            ("seen", "asked", "yes", "no", "cached", "failed", "capped"), 0
        )
        self._latency_ms: list[float] = []
        self._reply_chars = 0

    # ------------------------------------------------------------------ decisions
    def consider(self) -> None:
        """Count one lookup the judge could be asked about (the base of ``max_share``)."""
        with self._lock:
            self._counts["seen"] += 1

    def ask(self, query: str, candidate: str) -> bool:
        """The verdict for the pair: True only for a "yes" (cached per pair)."""
        return run_sync(self._ask(query, candidate))

    async def aask(self, query: str, candidate: str) -> bool:
        """Async twin of :meth:`ask` (the call runs in a worker thread)."""
        return await run_async(self._ask(query, candidate))

    def _ask(self, query: str, candidate: str) -> Flow[bool]:
        """:meth:`ask` and :meth:`aask`, written once; only the wait for the model differs
        (:meth:`_reply`, :meth:`_areply`)."""
        key, known = self._begin(query, candidate)
        if known is not None:
            return known
        started = time.perf_counter()
        prompt = PROMPT.format(a=query, b=candidate)
        try:
            reply = yield from call_twin(self._reply, self._areply, prompt)
        except Exception:  # a timeout or a failing model: a miss, counted
            return self._failed()
        return self._settle(key, _text(reply), started)

    def _reply(self, prompt: str) -> Any:
        """The model's reply, waited for at most ``timeout`` seconds (in the judge's thread)."""
        return self._executor().submit(self._call, prompt).result(timeout=self.timeout)

    async def _areply(self, prompt: str) -> Any:
        return await asyncio.wait_for(asyncio.to_thread(self._call, prompt), self.timeout)

    # ------------------------------------------------------------------ reporting
    def stats(self) -> dict[str, float]:
        """Counters, the share of lookups judged, p50/p95 latency (ms) and reply size."""
        with self._lock:
            out: dict[str, float] = dict(self._counts)
            lat = sorted(self._latency_ms)
        out["share"] = out["asked"] / out["seen"] if out["seen"] else 0.0
        out["p50_ms"] = lat[len(lat) // 2] if lat else 0.0
        out["p95_ms"] = lat[min(len(lat) - 1, int(len(lat) * 0.95))] if lat else 0.0
        out["reply_chars"] = float(self._reply_chars)
        return out

    def close(self) -> None:
        """Stop the worker thread (started on the first question)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ internals
    def _cached(self, query: str, candidate: str) -> tuple[str, bool | None]:
        a, b = sorted((" ".join(query.split()), " ".join(candidate.split())))
        key = hashlib.sha256(f"{a}\x00{b}".encode()).hexdigest()
        with self._lock:
            found = self._verdicts.get(key)
            if found is not None:
                self._verdicts.move_to_end(key)
                self._counts["cached"] += 1
        return key, found

    def _begin(self, query: str, candidate: str) -> tuple[str, bool | None]:
        """The pair's key, and its verdict when no call is needed: the cached one, or
        False over the share of lookups judged; None: ask the model."""
        key, cached = self._cached(query, candidate)
        if cached is not None:
            return key, cached
        return key, (None if self._admit() else False)

    def _failed(self) -> bool:
        with self._lock:
            self._counts["failed"] += 1
        return False

    def _admit(self) -> bool:
        with self._lock:
            seen = self._counts["seen"]  # 0: used on its own, not behind a cache: no cap
            allowed = seen == 0 or self._counts["asked"] < self.max_share * seen
            self._counts["asked" if allowed else "capped"] += 1
        return allowed

    def _settle(self, key: str, reply: str, started: float) -> bool:
        verdict = reply.strip().lower().lstrip("\"'*([ ").startswith("yes")
        with self._lock:
            self._latency_ms.append((time.perf_counter() - started) * 1000)
            del self._latency_ms[:-1024]
            self._reply_chars += len(reply)
            self._counts["yes" if verdict else "no"] += 1
            if self._cache_size:
                self._verdicts[key] = verdict
                while len(self._verdicts) > self._cache_size:
                    self._verdicts.popitem(last=False)
        return verdict

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix="agent-cache-judge"
                )
            return self._pool


def judge_from(spec: Any) -> Judge | None:
    """``None`` stays off; a :class:`Judge` is used as it is; anything else is wrapped."""
    if spec is None or spec is False:
        return None
    return spec if isinstance(spec, Judge) else Judge(spec)
