"""Replica routing under concurrency: RAG, multi-turn chat and agent streams.

A discrete-event model of N vLLM replicas, each with its own prefix cache (the
simulator, vLLM V1's rules, generated blocks cached) of a given capacity. Requests arrive
over time and overlap: a RAG request is a session of one turn; a chat's next turn arrives
a think time after the previous answer; an agent's next step arrives a tool latency after
its tool call, with the tool's result appended. Each replica runs prefills one at a time,
first come first served (vLLM schedules FCFS and does not reorder for cache hits); a
prefill takes the time the H200 anchor gives for its uncached and cached tokens, then the
answer decodes (a fixed time per token, batched, not blocking prefills).

Routers see what a deployed one would: their own in-flight counts; ``/metrics`` (running,
waiting, KV usage) read every second; for KV events, the blocks a replica announced once
its prefill ran. The contenders are :class:`~agent_cache.vllm.VllmRouter`'s own policies
driven through :meth:`VllmRouter.pick`, plus round-robin and an oracle that reads every
replica's cache exactly.
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_cache.prompt import PrefixCacheSimulator
from agent_cache.vllm import LoadMetrics, VllmRouter
from agent_cache.vllm._dispatch import Call
from agent_cache.vllm.prefix_tree import render_for_prefix

__all__ = [
    "CONTENDERS",
    "Session",
    "Turn",
    "agent_sessions",
    "chat_sessions",
    "fanout_sessions",
    "long_rag_sessions",
    "mean_full_prefill_s",
    "measured_chars_per_token",
    "pooled_cache_share",
    "prefill_ms",
    "rag_sessions",
    "run_stream",
]

Message = dict[str, str]
Tokens = Callable[[Sequence[Message]], list[int]]

#: Prefill time (ms) = A + B x uncached tokens + C x prompt tokens, fitted to the H200
#: anchor (8B Llama shape, bf16): 8,192 tokens 257 ms, with 7,936 cached 46 ms; 4,096
#: tokens 122 ms, with 3,840 cached 27 ms (fits within 6 %).
PREFILL_A, PREFILL_B, PREFILL_C = 1.2, 0.02659, 0.004639
DECODE_MS_PER_TOKEN = 12.0
SCRAPE_S = 1.0
EVENT_LAG_S = 0.02

CONTENDERS = (
    "round-robin",
    "least-loaded",
    "affinity (v0.1)",
    "prefix tree",
    "prefix tree + load",
    "KV events + load",
    "KV events + speculative + load",
    "oracle cache + load",
)
#: Seconds a speculative entry lives in the ``"KV events + speculative + load"`` router.
SPECULATIVE_TTL_S = 5.0


def prefill_ms(prompt: int, cached: int) -> float:
    """Modelled prefill time of one request (ms).

    Example:
        >>> round(prefill_ms(8192, 0)), round(prefill_ms(8192, 7936))
        (257, 46)
    """
    return PREFILL_A + PREFILL_B * (prompt - cached) + PREFILL_C * prompt


@dataclass
class Turn:
    """One request: the messages sent and the answer the model gives."""

    messages: list[Message]
    answer: str
    delay_after: float = 0.0  # seconds before the session's next turn arrives


@dataclass
class Session:
    """A conversation, an agent run, or one RAG request; turns are sent in order."""

    name: str
    start: float
    turns: list[Turn] = field(default_factory=list)


# ---------------------------------------------------------------------------- streams
def _words(rng: random.Random, vocab: Sequence[str], lo: int, hi: int) -> str:
    return " ".join(rng.choice(vocab) for _ in range(rng.randint(lo, hi)))


def rag_sessions(
    messages: Sequence[list[Message]], rate: float, rng: random.Random, answer_words: int = 36
) -> list[Session]:
    """RAG requests as one-turn sessions arriving as a Poisson stream of ``rate``/s."""
    t, out = 0.0, []
    vocab = "the a policy refund order within days customer document rule".split()
    for i, m in enumerate(messages):
        t += rng.expovariate(rate)
        out.append(
            Session(f"rag-{i}", t, [Turn(list(m), _words(rng, vocab, answer_words, answer_words))])
        )
    return out


def chat_sessions(
    n: int, rate: float, rng: random.Random, system: str, vocab: Sequence[str]
) -> list[Session]:
    """Multi-turn chats: 3 to 8 turns of 30-80 words, answers of 40-120 words, a think
    time of 4 s on average between an answer and the next question."""
    t, out = 0.0, []
    for c in range(n):
        t += rng.expovariate(rate)
        msgs: list[Message] = [{"role": "system", "content": system}]
        turns = []
        for k in range(rng.randint(3, 8)):
            msgs = [*msgs, {"role": "user", "content": f"({c}.{k}) " + _words(rng, vocab, 30, 80)}]
            answer = _words(rng, vocab, 40, 120)
            turns.append(Turn(list(msgs), answer, rng.expovariate(1 / 4.0)))
            msgs = [*msgs, {"role": "assistant", "content": answer}]
        out.append(Session(f"chat-{c}", t, turns))
    return out


def agent_sessions(
    n: int, rate: float, rng: random.Random, system: str, vocab: Sequence[str]
) -> list[Session]:
    """Agent runs: a tool-using system prompt, a task, then 4 to 10 steps, each a tool
    call the model writes and the tool's result (150-450 words) appended, the next step
    arriving after the tool's latency (0.5 s on average)."""
    tools = (
        "Tools (JSON schema): search(query: string) -> documents; "
        "fetch(url: string) -> page text; calculator(expression: string) -> number; "
        "sql(query: string) -> rows. Call one tool per step as "
        '{"tool": NAME, "arguments": {...}}; answer with {"final": TEXT} when done. '
    ) * 3
    t, out = 0.0, []
    for a in range(n):
        t += rng.expovariate(rate)
        msgs: list[Message] = [
            {"role": "system", "content": system + " " + tools},
            {"role": "user", "content": f"Task {a}: " + _words(rng, vocab, 20, 50)},
        ]
        turns = []
        for k in range(rng.randint(4, 10)):
            call = (
                '{"tool": "' + rng.choice(["search", "fetch", "sql", "calculator"]) + '", '
                '"arguments": {"query": "' + _words(rng, vocab, 4, 10) + '"}}'
            )
            turns.append(Turn(list(msgs), call, rng.expovariate(1 / 0.5)))
            result = f"Result {a}.{k}: " + _words(rng, vocab, 150, 450)
            msgs = [
                *msgs,
                {"role": "assistant", "content": call},
                {"role": "tool", "content": result},
            ]
        out.append(Session(f"agent-{a}", t, turns))
    return out


def fanout_sessions(
    groups: int,
    rate: float,
    rng: random.Random,
    system: str,
    vocab: Sequence[str],
    *,
    agents: int = 8,
    context_words: int = 3000,
    steps: int = 3,
    gap_s: float = 0.002,
) -> list[Session]:
    """A concurrent fan-out: groups arrive as a Poisson stream of ``rate``/s; each
    brings a new shared context (``context_words`` words no other group has) and
    ``agents`` agents that start back to back (``gap_s`` apart: the burst is sent before
    the first prefill ends), each then running ``steps`` steps of a tool call and its
    result (60-160 words) appended, 0.5 s mean tool latency."""
    t, out = 0.0, []
    for g in range(groups):
        t += rng.expovariate(rate)
        context = " ".join(
            f"{rng.choice(vocab)}{g}x{rng.randrange(97)}" for _ in range(context_words)
        )
        for a in range(agents):
            msgs: list[Message] = [
                {"role": "system", "content": system},
                {"role": "user", "content": f"Shared context {g}:\n{context}"},
                {"role": "user", "content": f"Agent {g}.{a}: " + _words(rng, vocab, 10, 30)},
            ]
            turns = []
            for k in range(steps):
                call = '{"tool": "search", "arguments": {"q": "' + _words(rng, vocab, 3, 8) + '"}}'
                turns.append(Turn(list(msgs), call, rng.expovariate(1 / 0.5)))
                result = f"Result {g}.{a}.{k}: " + _words(rng, vocab, 60, 160)
                msgs = [
                    *msgs,
                    {"role": "assistant", "content": call},
                    {"role": "tool", "content": result},
                ]
            out.append(Session(f"fan-{g}-{a}", t + a * gap_s, turns))
    return out


def long_rag_sessions(
    requests: int,
    rate: float,
    rng: random.Random,
    vocab: Sequence[str],
    *,
    corpora: int = 12,
    lo_words: int = 16_000,
    hi_words: int = 32_000,
) -> list[Session]:
    """Long-context RAG: one-turn requests (Poisson, ``rate``/s), each a long context
    (one of ``corpora``, ``lo_words``-``hi_words`` words, Zipf(1.0) popularity) and a
    question of its own."""
    texts = [
        " ".join(
            f"{rng.choice(vocab)}{c}y{rng.randrange(89)}"
            for _ in range(rng.randint(lo_words, hi_words))
        )
        for c in range(corpora)
    ]
    weights = [1.0 / (k + 1) for k in range(corpora)]
    t, out = 0.0, []
    for i in range(requests):
        t += rng.expovariate(rate)
        c = rng.choices(range(corpora), weights)[0]
        msgs: list[Message] = [
            {"role": "system", "content": "Answer from the document."},
            {
                "role": "user",
                "content": f"Document {c}:\n{texts[c]}\n\nQuestion {i}: "
                + _words(rng, vocab, 8, 20),
            },
        ]
        out.append(Session(f"long-{i}", t, [Turn(msgs, _words(rng, vocab, 20, 40))]))
    return out


# ---------------------------------------------------------------------------- model
@dataclass
class _Replica:
    sim: PrefixCacheSimulator
    free_at: float = 0.0
    queued: list[float] = field(default_factory=list)  # prefill start times ahead
    decoding: list[float] = field(default_factory=list)  # finish times
    requests: int = 0
    prefill_tokens: int = 0


class _Contender:
    """Routes through a :class:`VllmRouter` policy (or round-robin, or the oracle)."""

    def __init__(
        self,
        name: str,
        n: int,
        capacity: int,
        tokens: Tokens,
        clock: list[float],
        chars_per_token: float | None,
    ) -> None:
        self.name = name
        self.n = n
        self.urls = [f"http://replica-{i}:8000/v1" for i in range(n)]
        self._rr = 0
        self.router: VllmRouter | None = None
        common: dict[str, Any] = {
            "clock": lambda: clock[0],
            "metrics_interval": None,
            "capacity_tokens": (capacity - 1) * 16,
            "chars_per_token": chars_per_token,
        }
        if name == "least-loaded":
            self.router = VllmRouter(self.urls, policy="least_loaded", **common)
        elif name == "affinity (v0.1)":
            self.router = VllmRouter(self.urls, policy="affinity", **common)
        elif name == "prefix tree":
            self.router = VllmRouter(self.urls, policy="prefix", load_weight=0.0, **common)
        elif name in ("prefix tree + load", "oracle cache + load"):
            self.router = VllmRouter(self.urls, policy="prefix", **common)
        elif name.startswith("KV events"):
            # addresses make every replica watched; pick() never connects them
            self.router = VllmRouter(
                self.urls,
                policy="prefix",
                kv_events=[f"tcp://replica-{i}:5557" for i in range(n)],
                kv_speculative_ttl=SPECULATIVE_TTL_S if "speculative" in name else 0.0,
                tokenizer=lambda m: tokens(m),  # type: ignore[arg-type]
                **common,
            )
        self.uses_metrics = name in (
            "least-loaded",
            "prefix tree + load",
            "KV events + load",
            "KV events + speculative + load",
            "oracle cache + load",
        )
        self.seq = [0] * n  # each replica's event sequence (a restart starts it again)

    def pick(
        self, msgs: list[Message], session: str | None, reps: list[_Replica], toks: list[int]
    ) -> int:
        if self.router is None:
            self._rr += 1
            return (self._rr - 1) % self.n
        if self.name == "oracle cache + load":
            d = self.router._d
            call = self.router._calls.route(Call("POST", ""), msgs, None, None, session)
            assert call.blocks is not None
            cached = [float(r.sim.lookup(toks)) for r in reps]
            with d.lock:
                i = d.chooser.rank(
                    range(self.n),
                    call.blocks,
                    block_tokens=call.block_tokens,
                    prompt_tokens=float(len(toks)),
                    session=session,
                    cached_tokens=cached,
                )[0]
                d.chooser.assign(
                    i,
                    call.blocks,
                    session=session,
                    prompt_tokens=len(toks),
                    uncached_tokens=len(toks) - cached[i],
                )
            d.observe_prompt(len(render_for_prefix(msgs)), len(toks))
            return i
        url = self.router.pick(msgs, session_id=session)
        assert url is not None
        # the answer's usage.prompt_tokens, as a deployed router learns from it
        self.router._d.observe_prompt(len(render_for_prefix(msgs)), len(toks))
        return self.urls.index(url)

    def started(self, i: int, done: bool) -> None:
        if self.router is not None:
            self.router._d.replayed(i, done=done)

    def observe(self, i: int, rep: _Replica, now: float) -> None:
        if self.router is None or not self.uses_metrics:
            return
        cap = rep.sim.capacity_blocks or 1
        m = LoadMetrics(
            running=float(sum(1 for f in rep.decoding if f > now)),
            waiting=float(sum(1 for s in rep.queued if s > now)),
            kv_usage=rep.sim.used_blocks / max(1, cap - 1),
        )
        self.router._d.chooser.observe(i, m, now)

    def events(self, i: int, batch: list[tuple[object, ...]]) -> None:
        index = self.router._d.kv_index if self.router is not None else None
        if index is None:
            return
        events: list[dict[str, Any]] = []
        for e in batch:
            if e[0] == "stored":
                _, h, parent, block = e
                events.append(
                    {
                        "type": "BlockStored",
                        "block_hashes": [h],
                        "parent_block_hash": parent,
                        "token_ids": list(block),  # type: ignore[call-overload]
                        "block_size": 16,
                    }
                )
            elif e[0] == "removed":
                events.append({"type": "BlockRemoved", "block_hashes": [e[1]]})
        index.apply_batch(i, events, seq=self.seq[i])
        self.seq[i] += 1


def _outputs(tokens: Tokens, msgs: list[Message], answer: str, prompt: list[int]) -> list[int]:
    """The answer's token ids as the next turn's template renders them (answer, end tag):
    the rendered conversation with the answer, past the prompt."""
    full = tokens([*msgs, {"role": "assistant", "content": answer}])
    # the ChatML render of a finished conversation ends "<|im_end|>\n" + the next
    # generation prompt; keep the part that extends the prompt token for token
    if full[: len(prompt)] == prompt:
        return full[len(prompt) : len(prompt) + max(1, len(full) - len(prompt) - 3)]
    return []


def measured_chars_per_token(sessions: Sequence[Session], tokens: Tokens) -> float:
    """Characters of the router's rendering per prompt token, over the stream.

    What a deployment reads off its own traffic (characters sent over
    ``usage.prompt_tokens``) and passes as ``VllmRouter(chars_per_token=...)``: the
    router turns its character blocks and the replicas' capacity in tokens into each
    other with it, so a wrong ratio makes its prefix tree forget blocks too early or too
    late (SmolLM2's tokenizer gives ~5.7 characters a token on these prompts, not the
    default 4.0).
    """
    chars = sum(len(render_for_prefix(t.messages)) for s in sessions for t in s.turns)
    toks = sum(len(tokens(t.messages)) for s in sessions for t in s.turns)
    return chars / toks if toks else 4.0


def pooled_cache_share(
    sessions: Sequence[Session], *, capacity_blocks: int, tokens: Tokens
) -> float:
    """Cached-token share of the stream on one cache of ``capacity_blocks``: the
    reference for routing over replicas whose capacities add up to it (turns in the
    order they would arrive with no queueing)."""
    arrivals: list[tuple[float, int, Turn]] = []
    seq = 0
    for s in sessions:
        t = s.start
        for turn in s.turns:
            arrivals.append((t, seq, turn))
            seq += 1
            t += turn.delay_after + len(turn.answer.split()) * DECODE_MS_PER_TOKEN / 1000.0
    arrivals.sort(key=lambda a: (a[0], a[1]))
    sim = PrefixCacheSimulator(16, capacity_blocks)
    for _, _, turn in arrivals:
        toks = tokens(turn.messages)
        out = _outputs(tokens, turn.messages, turn.answer, toks)
        sim.run(toks, output_token_ids=out or None, output_tokens=len(out))
    return sim.hit_rate


def run_stream(
    sessions: Sequence[Session],
    contender: str,
    *,
    replicas: int,
    capacity_blocks: int,
    tokens: Tokens,
    chars_per_token: float | None = 4.0,
    restart: tuple[float, int] | None = None,
) -> dict[str, Any]:
    """Replay a stream through one contender; returns the shares and modelled TTFTs.

    ``chars_per_token`` configures the routers (see :func:`measured_chars_per_token`);
    None: they learn it from each request's prompt tokens, as from ``usage`` (the
    result's ``chars_per_token`` is the ratio they ended with). ``restart``: at that
    time (s) that replica restarts at once: its cache is empty, its event sequence
    starts at 0 again, no request fails (the routers are not told)."""
    now = [0.0]
    con = _Contender(contender, replicas, capacity_blocks, tokens, now, chars_per_token)
    reps = [_Replica(PrefixCacheSimulator(16, capacity_blocks)) for _ in range(replicas)]
    kv = contender.startswith("KV events")
    if kv:
        for r in reps:
            r.sim.events = []
    heap: list[tuple[float, int, str, Any]] = []
    seq = 0

    def push(t: float, kind: str, payload: Any) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, seq, kind, payload))
        seq += 1

    for s in sessions:
        push(s.start, "arrive", (s, 0))
    push(0.0, "scrape", None)
    if restart is not None:
        push(restart[0], "restart", restart[1])
    ttft: list[float] = []
    pick_s: list[float] = []
    by_kind: dict[str, list[int]] = {}  # session name's first part -> [cached, prompt]
    cached_total = prompt_total = 0
    last = max(s.start for s in sessions)
    while heap:
        t, _, kind, payload = heapq.heappop(heap)
        now[0] = t
        if kind == "scrape":
            for i, r in enumerate(reps):
                con.observe(i, r, t)
            if t < last or any(k == "arrive" for _, _, k, _ in heap):
                push(t + SCRAPE_S, "scrape", None)
        elif kind == "events":
            con.events(*payload)
        elif kind == "done":
            con.started(payload, True)
        elif kind == "restart":
            reps[payload].sim = PrefixCacheSimulator(16, capacity_blocks)
            if kv:
                reps[payload].sim.events = []
            con.seq[payload] = 0
        elif kind == "arrive":
            session, k = payload
            turn = session.turns[k]
            toks = tokens(turn.messages)
            out = _outputs(tokens, turn.messages, turn.answer, toks)
            name = session.name if len(session.turns) > 1 else None  # RAG: no session
            t0 = time.perf_counter()
            i = con.pick(turn.messages, name, reps, toks)
            pick_s.append(time.perf_counter() - t0)
            con.started(i, False)
            r = reps[i]
            cached = r.sim.run(toks, output_token_ids=out or None, output_tokens=len(out))
            if r.sim.events:
                batch = list(r.sim.events)
                r.sim.events.clear()
            else:
                batch = []
            start = max(t, r.free_at)
            service = prefill_ms(len(toks), cached) / 1000.0
            r.free_at = start + service
            finish = r.free_at + len(out) * DECODE_MS_PER_TOKEN / 1000.0
            r.queued = [x for x in r.queued if x > t] + [start]
            r.decoding = [x for x in r.decoding if x > t] + [finish]
            r.requests += 1
            r.prefill_tokens += len(toks) - cached
            cached_total += cached
            prompt_total += len(toks)
            tally = by_kind.setdefault(session.name.split("-")[0], [0, 0])
            tally[0] += cached
            tally[1] += len(toks)
            ttft.append((r.free_at - t) * 1000.0)
            if batch:
                push(r.free_at + EVENT_LAG_S, "events", (i, batch))
            push(finish, "done", i)
            if k + 1 < len(session.turns):
                push(finish + turn.delay_after, "arrive", (session, k + 1))
    n = len(ttft)
    ttft.sort()
    req = [r.requests for r in reps]
    pre = [r.prefill_tokens for r in reps]
    return {
        "contender": contender,
        "cached_share": cached_total / prompt_total if prompt_total else 0.0,
        "max_requests_vs_mean": max(req) / (sum(req) / replicas),
        "max_prefill_vs_mean": max(pre) / (sum(pre) / replicas) if sum(pre) else 1.0,
        "ttft_mean_ms": sum(ttft) / n,
        "ttft_p90_ms": ttft[min(n - 1, int(0.9 * n))],
        "busiest_share": max(req) / sum(req),
        "cached_share_by_kind": {k: c / p if p else 0.0 for k, (c, p) in by_kind.items()},
        "pick_us_mean": sum(pick_s) / n * 1e6,
        "pick_us_p99": sorted(pick_s)[min(n - 1, int(0.99 * n))] * 1e6,
        "requests": n,
        "chars_per_token": con.router.chars_per_token if con.router is not None else None,
    }


def mean_full_prefill_s(sessions: Sequence[Session], tokens: Tokens) -> float:
    """Mean prefill time of the stream's requests with nothing cached (seconds)."""
    times = [prefill_ms(len(tokens(t.messages)), 0) for s in sessions for t in s.turns]
    return sum(times) / len(times) / 1000.0
