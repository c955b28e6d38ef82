"""Replay a request log through a cache: what each layer would save, how often it would
be wrong (``agent-cache replay LOG.jsonl``).

Each line of the log is one request, in one of two forms:

- **OpenAI-style**: ``{"request": {"model", "messages", ...params}, "response":
  {"choices": [{"message": {"content"}}], "usage": {...}}}`` (a chat completion as
  logged by a proxy or the OpenAI SDK);
- **simple**: ``{"prompt": "..."`` or ``"messages": [...]``, ``"model": "..."``,
  ``"params": {...}``, ``"response": "..."``, ``"tokens": 120`` or
  ``{"prompt_tokens": .., "completion_tokens": ..}``, optional ``"timestamp"`` (epoch
  seconds or ISO 8601) and ``"namespace"``}.

For messages, the question is the last user turn; the system prompt and earlier turns
are the scope (``context``), as the adapters do. The model and its parameters are the
model identity.

Every request is looked up first. A hit is judged against the answer the log records,
by meaning (:meth:`agent_cache.judging.AnswerJudge.agree_flow`): a disagreement is an
estimated wrong hit. In ``"live"`` mode a hit is served, so its logged answer is not
stored (what the cache would hold had it been on); in ``"shadow"`` mode every logged
answer is stored (what a shadow deployment would build). Either way the cache is never
asked to call a model: the log's answers stand in for it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from agent_cache._flow import run_sync
from agent_cache.errors import ConfigurationError
from agent_cache.judging import AnswerJudge, Pending
from agent_cache.savings import Usage, usage_from
from agent_cache.stats import CacheStats, _percentile

__all__ = ["LogRecord", "ReplayReport", "read_log", "replay"]

Mode = Literal["shadow", "live"]


@dataclass(frozen=True)
class LogRecord:
    """One logged request: question, scope, model identity, answer, usage, time."""

    prompt: str
    response: Any
    llm_string: str = ""
    namespace: str = "default"
    context: Any = None
    usage: Usage | None = None
    timestamp: float | None = None


@dataclass
class ReplayReport:
    """What a replay found. ``as_dict()`` is what ``--json`` prints."""

    mode: str
    requests: int = 0
    exact_hits: int = 0
    template_hits: int = 0
    semantic_hits: int = 0
    misses: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    tokens_saved: int = 0
    tokens_saved_by_kind: dict[str, int] = field(default_factory=dict)
    cost_saved: float = 0.0
    estimated_wrong_hits: int = 0
    wrong_by_layer: dict[str, int] = field(default_factory=dict)
    undecided_hits: int = 0
    logged_tokens: int = 0
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    stats: CacheStats | None = field(default=None, repr=False)

    @property
    def hits(self) -> int:
        return self.exact_hits + self.template_hits + self.semantic_hits

    def as_dict(self) -> dict[str, Any]:
        judged = self.hits - self.undecided_hits
        return {
            "mode": self.mode,
            "requests": self.requests,
            "exact_hits": self.exact_hits,
            "template_hits": self.template_hits,
            "semantic_hits": self.semantic_hits,
            "misses": self.misses,
            "hit_rate": self.hits / self.requests if self.requests else 0.0,
            "pass_through_rate": self.misses / self.requests if self.requests else 0.0,
            "refused": dict(self.refused),
            "tokens_saved": self.tokens_saved,
            "tokens_saved_by_kind": dict(self.tokens_saved_by_kind),
            "tokens_saved_rate": (
                self.tokens_saved / self.logged_tokens if self.logged_tokens else None
            ),
            "cost_saved": self.cost_saved,
            "estimated_wrong_hits": self.estimated_wrong_hits,
            "estimated_wrong_rate": self.estimated_wrong_hits / judged if judged else None,
            "wrong_by_layer": dict(self.wrong_by_layer),
            "undecided_hits": self.undecided_hits,
            "latency_ms": dict(self.latency_ms),
        }

    def __str__(self) -> str:
        d = self.as_dict()
        wrong = d["estimated_wrong_rate"]
        lines = [
            f"replayed {self.requests} requests ({self.mode})",
            f"  hits: exact {self.exact_hits}, template {self.template_hits}, "
            f"semantic {self.semantic_hits}  ({d['hit_rate']:.1%}); misses {self.misses} "
            f"(pass-through {d['pass_through_rate']:.1%})",
            f"  estimated wrong hits: {self.estimated_wrong_hits}"
            + (f" ({wrong:.1%} of judged hits)" if wrong is not None else "")
            + (f", {self.undecided_hits} undecided" if self.undecided_hits else ""),
            f"  tokens saved: {self.tokens_saved}"
            + (f" of {self.logged_tokens} logged" if self.logged_tokens else "")
            + (f"; money saved {self.cost_saved:.4f}" if self.cost_saved else ""),
        ]
        if self.refused:
            lines.append("  candidates refused: " + ", ".join(f"{k} {v}" for k, v in
                                                    sorted(self.refused.items())))  # fmt: skip
        p50, p95 = self.latency_ms.get("p50"), self.latency_ms.get("p95")
        if p50 is not None and p95 is not None:
            lines.append(f"  lookup latency p50 / p95: {p50:.2f} / {p95:.2f} ms")
        return "\n".join(lines)


# ---------------------------------------------------------------------- reading logs
def _timestamp(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise ConfigurationError(f"timestamp must be epoch seconds or ISO 8601, not {value!r}")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def _split(messages: Any) -> tuple[str, Any]:
    if not isinstance(messages, list) or not messages:
        raise ConfigurationError("messages must be a non-empty list")
    users = [i for i, m in enumerate(messages)
             if isinstance(m, Mapping) and m.get("role") == "user"]  # fmt: skip
    last_user = users[-1] if users else None
    if last_user is None:
        raise ConfigurationError("messages have no user turn")
    before = [{"role": m.get("role"), "content": _text(m.get("content"))}
              for m in messages[:last_user]]  # fmt: skip
    return _text(messages[last_user].get("content")), (before or None)


def _identity(model: Any, params: Mapping[str, Any]) -> str:
    kept = {k: v for k, v in sorted(params.items())
            if k not in ("messages", "model", "stream", "user", "stream_options")}  # fmt: skip
    return f"{model or ''}|{json.dumps(kept, sort_keys=True, default=str)}"


def parse_record(row: Mapping[str, Any]) -> LogRecord:
    """One log line (either form) as a :class:`LogRecord`."""
    namespace = str(row.get("namespace") or "default")
    ts = _timestamp(row.get("timestamp"))
    if isinstance(row.get("request"), Mapping):  # OpenAI-style
        req, resp = row["request"], row.get("response") or {}
        question, context = _split(req.get("messages"))
        choices = resp.get("choices") or [{}]
        message = choices[0].get("message") or {}
        answer = _text(message.get("content", choices[0].get("text")))
        return LogRecord(question, answer, _identity(req.get("model"), req), namespace,
                         context, usage_from(resp.get("usage")), ts)  # fmt: skip
    params = row.get("params") or {}
    if not isinstance(params, Mapping):
        raise ConfigurationError("params must be an object")
    if "prompt" in row:
        question, context = str(row["prompt"]), row.get("context")
    else:
        question, context = _split(row.get("messages"))
    if "response" not in row:
        raise ConfigurationError("a record needs a 'response'")
    return LogRecord(question, row["response"], _identity(row.get("model"), params), namespace,
                     context, usage_from(row.get("tokens") or row.get("usage")), ts)  # fmt: skip


def read_log(path: str | os.PathLike[str]) -> Iterator[LogRecord]:
    """The records of a JSONL request log; a bad line is a ``ConfigurationError`` naming it."""
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, Mapping):
                    raise ConfigurationError("not a JSON object")
                yield parse_record(row)
            except (ValueError, ConfigurationError) as exc:
                raise ConfigurationError(f"{path}:{n}: {exc}") from exc


# ---------------------------------------------------------------------- replaying
def _bar(total: int | None, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # no progress bar without tqdm (agent-cache[cli])
        return None
    return tqdm(total=total, unit="req", desc="replay", leave=False)


def replay(
    records: Iterable[LogRecord],
    cache: Any,
    *,
    mode: Mode = "shadow",
    judge: AnswerJudge | None = None,
    progress: bool = False,
    total: int | None = None,
    on_record: Callable[[LogRecord], None] | None = None,
) -> ReplayReport:
    """Replay ``records`` through ``cache`` (a :class:`~agent_cache.LayeredCache` that
    serves, i.e. not in shadow mode) and report what it would have done.

    Example:
        >>> import json, os, tempfile
        >>> from agent_cache import LayeredCache
        >>> from agent_cache.replay import read_log, replay
        >>> from agent_cache.testing import HashEmbedder
        >>> log = os.path.join(tempfile.mkdtemp(), "requests.jsonl")
        >>> rows = [{"prompt": "What is RAG?", "response": "Retrieval-augmented generation."},
        ...         {"prompt": "what is rag?", "response": "Retrieval-augmented generation."}]
        >>> with open(log, "w") as fh:
        ...     for row in rows:
        ...         print(json.dumps(row), file=fh)
        >>> report = replay(read_log(log), LayeredCache(path=None, embedder=HashEmbedder()))
        >>> report.as_dict()["exact_hits"], report.as_dict()["misses"]
        (1, 1)
    """
    if mode not in ("shadow", "live"):
        raise ConfigurationError(f"mode must be 'shadow' or 'live', not {mode!r}")
    if getattr(cache, "shadow", False):
        raise ConfigurationError("replay needs a cache that serves (shadow=False)")
    judge = judge or AnswerJudge()
    report = ReplayReport(mode)
    before = cache.stats()
    bar = _bar(total, progress)
    latencies: list[float] = []
    wall = cache.recorder.clock
    now: list[float | None] = [None]
    cache.recorder.clock = lambda: now[0] if now[0] is not None else wall()  # log time
    try:
        for rec in records:
            now[0] = rec.timestamp
            if on_record is not None:
                on_record(rec)
            _replay_one(rec, cache, report, judge, mode, latencies)
            if bar is not None:
                bar.update(1)
    finally:
        cache.recorder.clock = wall
        if bar is not None:
            bar.close()
    _report_savings(report, before, cache.stats(), latencies)
    return report


def _replay_one(
    rec: LogRecord,
    cache: Any,
    report: ReplayReport,
    judge: AnswerJudge,
    mode: Mode,
    latencies: list[float],
) -> None:
    """Look one record up (its latency into ``latencies``), judge a hit against the
    logged answer, store it where due."""
    report.requests += 1
    report.logged_tokens += rec.usage.tokens if rec.usage else 0
    hit = cache.lookup(rec.prompt, rec.llm_string, rec.namespace, context=rec.context)
    latencies.append(cache.recorder.last_ms)
    if hit is None:
        report.misses += 1
    else:
        setattr(report, f"{hit.layer}_hits", getattr(report, f"{hit.layer}_hits") + 1)
        similarity = hit.similarity if hit.similarity is not None else 1.0
        pending = Pending(rec.namespace, rec.prompt, hit.matched_prompt, hit.response,
                          similarity, "replay")  # fmt: skip
        agree = run_sync(judge.agree_flow(pending, rec.response, cache.embedder))
        if hit.layer == "semantic":
            cache.recorder.judged(rec.namespace, "replay", similarity, agree)
        if agree is None:
            report.undecided_hits += 1
        elif not agree:
            report.estimated_wrong_hits += 1
            report.wrong_by_layer[hit.layer] = report.wrong_by_layer.get(hit.layer, 0) + 1
    if hit is None or mode == "shadow":
        cache.store(rec.prompt, rec.response, rec.llm_string, rec.namespace,
                    context=rec.context, tokens=rec.usage)  # fmt: skip


def _report_savings(report: ReplayReport, before: Any, after: Any, latencies: list[float]) -> None:
    """What the replay saved: the cache's stats after it less those before, latencies."""
    report.tokens_saved = after.tokens_saved - before.tokens_saved
    report.tokens_saved_by_kind = {
        k: v - before.tokens.get(k, 0) for k, v in after.tokens.items()
        if v - before.tokens.get(k, 0)
    }  # fmt: skip
    report.cost_saved = after.cost_saved - before.cost_saved
    report.refused = {k: v - before.refused.get(k, 0) for k, v in after.refused.items()
                      if v - before.refused.get(k, 0)}  # fmt: skip
    report.latency_ms = {"p50": _percentile(latencies, 0.5), "p95": _percentile(latencies, 0.95),
                         "p99": _percentile(latencies, 0.99)}  # fmt: skip
    report.stats = after
