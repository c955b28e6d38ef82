"""What each replica really caches, from the KV events vLLM publishes (optional extra).

``vllm serve --kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq",
"endpoint": "tcp://*:5557"}'`` publishes, on a ZMQ PUB socket, multipart messages
``(topic, 8-byte big-endian sequence number, msgpack payload)``. The payload is an
``EventBatch`` (``ts``, ``events``, ``data_parallel_rank``; an array) of tagged events
(``vllm/distributed/kv_events.py``, checked against vLLM :data:`VLLM_VERSION`):

* ``BlockStored``: ``block_hashes`` (a chain of several blocks), ``parent_block_hash``
  (the block before the first, or None), ``token_ids`` (all blocks' tokens),
  ``block_size``, ``lora_id``, ``medium`` (``"GPU"``, or ``"CPU"`` / ``"STORAGE"`` for
  offload tiers), ``lora_name``, ``extra_keys`` (per block: the LoRA name,
  ``(mm_identifier, offset)`` pairs, the ``cache_salt`` on block 0, prompt-embeds
  digests), ``group_idx``, ...;
* ``BlockRemoved``: ``block_hashes``, ``medium``, ``group_idx``;
* ``AllBlocksCleared``.

msgspec encodes a struct as a map with a ``"type"`` tag or, in releases that declared
``array_like=True``, as an array whose first element is the tag; both are read.

vLLM's block hashes depend on the server's hash function and seed, so the index re-keys
every block by its *token content* chained to its parent: a fixed-width (64-bit) hash of
``(parent key, extra keys, block tokens)``, as llm-d-kv-cache does, computed in O(1) per
block and only compared within this process. The router computes the same chain for a
request from its token ids, so a replica's prefix is known block for block, as vLLM will
look it up. vLLM keeps duplicate blocks under one hash and announces (and removes) each
copy: copies are counted per ``(hash, group, medium, DP rank)``. The index is bounded
(least recently stored mappings go first).

Events can stop (a dropped socket, a dead publisher): a replica that was sent a request
that should have stored new blocks, and announced nothing for ``stale_after`` seconds,
answers None in :meth:`KvEventIndex.lookup` (the router estimates that replica from its
prefix tree; the others keep their exact numbers). A restarted publisher starts again at
sequence 0: that replica's blocks are dropped.

Example:
    >>> index = KvEventIndex(2, block_size=2)
    >>> index.apply(0, {"type": "BlockStored", "block_hashes": [11, 12],
    ...                 "parent_block_hash": None, "token_ids": [1, 2, 3, 4], "block_size": 2})
    >>> index.match([1, 2, 3, 4, 5])
    [2, 0]
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_cache.errors import ConfigurationError, MissingDependencyError

__all__ = [
    "VLLM_VERSION",
    "KvEventIndex",
    "KvEventSubscriber",
    "KvMatch",
    "decode_event_batch",
    "offset_endpoint_port",
]

log = logging.getLogger("agent_cache.vllm")

#: The vLLM release whose event schema, extra keys and ports this module follows.
VLLM_VERSION = "0.33.0"

#: Field order of the events when encoded as arrays (after the tag).
_FIELDS: dict[str, tuple[str, ...]] = {
    "BlockStored": (
        "block_hashes",
        "parent_block_hash",
        "token_ids",
        "block_size",
        "lora_id",
        "medium",
        "lora_name",
        "extra_keys",
        "group_idx",
        "kv_cache_spec_kind",
        "kv_cache_spec_sliding_window",
        "locality",
        "ownership",
        "session_id",
        "lookahead_token_ids",
    ),
    "BlockRemoved": ("block_hashes", "medium", "group_idx", "locality", "ownership"),
    "AllBlocksCleared": (),
}

#: Storage tiers, fastest first (``medium`` of the events; None is the GPU).
MEDIA = ("GPU", "CPU", "STORAGE")
_ROOT = 0  # the parent key of a chain's first block
_LOGGED = 5  # malformed events logged as warnings per replica (then debug)


def _medium(m: Any) -> int:
    if m is None or m == "GPU":
        return 0
    return 1 if m == "CPU" else 2


def _freeze(x: Any) -> Any:
    """A hashable, canonical form of a decoded msgpack value (lists become tuples)."""
    if isinstance(x, list | tuple):
        return tuple(_freeze(v) for v in x)
    if isinstance(x, bytearray | memoryview):
        return bytes(x)
    if isinstance(x, Mapping):
        return tuple((_freeze(k), _freeze(v)) for k, v in x.items())
    return x


def _extra(lora: str | None, rest: tuple[Any, ...]) -> Any:
    """The part of a block's key besides its tokens (None when it has none)."""
    return (lora, rest) if lora or rest else None


def _hashable(h: Any) -> Any:
    if isinstance(h, bytearray | memoryview):
        return bytes(h)
    if isinstance(h, int | bytes | str):
        return h
    raise TypeError(f"a block hash must be an int or bytes, not {type(h).__name__}")


def _normalize(event: Any) -> dict[str, Any] | None:
    """An event as a dict with ``"type"`` (map or array encoding); None if unknown."""
    if isinstance(event, Mapping):
        kind = event.get("type")
        return dict(event) if isinstance(kind, str) and kind in _FIELDS else None
    if isinstance(event, list | tuple) and event and isinstance(event[0], str):
        kind = event[0]
        if kind not in _FIELDS:
            return None
        out: dict[str, Any] = {"type": kind}
        out.update(zip(_FIELDS[kind], event[1:], strict=False))
        return out
    return None


def decode_event_batch(payload: bytes) -> tuple[float, list[dict[str, Any]]]:
    """``(ts, events)`` of one msgpack ``EventBatch`` payload (needs ``msgspec``);
    events of unknown types are left out (a newer vLLM may add some).

    Raises:
        MissingDependencyError: ``msgspec`` is not installed (``agent-cache[kv-events]``).
        ValueError: The payload is not an event batch.
    """
    try:
        import msgspec
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise MissingDependencyError("msgspec", "kv-events", feature="KV events") from exc
    data = msgspec.msgpack.decode(payload)  # DecodeError is a ValueError
    if isinstance(data, Mapping):
        ts, events = data.get("ts", 0.0), data.get("events", [])
    elif isinstance(data, list | tuple) and len(data) >= 2:
        ts, events = data[0], data[1]
    else:
        raise ValueError(f"not a KV event batch: {data!r:.100}")
    if not isinstance(events, list | tuple) or not isinstance(ts, int | float | None):
        raise ValueError(f"not a KV event batch: {data!r:.100}")
    out = [e for e in (_normalize(x) for x in events) if e is not None]
    return float(ts or 0.0), out


def offset_endpoint_port(endpoint: str, rank: int) -> str:
    """The address data-parallel rank ``rank`` publishes on, as vLLM derives it
    (``ZmqEventPublisher.offset_endpoint_port``: the TCP port plus the rank).

    Example:
        >>> offset_endpoint_port("tcp://gpu-1:5557", 2)
        'tcp://gpu-1:5559'
    """
    if rank == 0:
        return endpoint
    if "inproc" in endpoint:
        return f"{endpoint}_dp{rank}"
    head, _, port = endpoint.rpartition(":")
    if not head or not port.isdigit() or int(port) == 0:
        return endpoint
    return f"{head}:{int(port) + rank}"


@dataclass
class KvMatch:
    """What one request would hit on each replica, by the events.

    Attributes:
        blocks: Per replica, the GPU blocks vLLM would hit (None: that replica's
            events are unknown or stopped).
        tokens: Per replica, the hit in tokens, lower tiers (CPU, storage) weighted by
            ``lower_tier_weight`` (None as in ``blocks``).
        complete: Per replica, whether it holds every full block of the prompt (a
            request that adds less than a block then stores nothing: no event);
            speculative entries do not count here.
        keys: The request's chain of block keys, per block size (what
            :meth:`KvEventIndex.expect` records for the replica it is sent to).
    """

    blocks: list[int | None]
    tokens: list[float | None]
    complete: list[bool]
    keys: dict[int, list[int]] = field(default_factory=dict)


class _Replica:
    """One replica's blocks: vLLM hash mappings, and key -> mappings per tier."""

    __slots__ = ("held", "keys", "tiers")

    def __init__(self) -> None:
        # (hash, group, medium, rank) -> copies, least recently stored first
        self.held: OrderedDict[tuple[Any, int, int, int], int] = OrderedDict()
        self.keys: dict[Any, list[int]] = {}  # vLLM hash -> [key, mappings]
        self.tiers: dict[int, list[int]] = {}  # key -> mappings per medium


class KvEventIndex:
    """Per replica, the blocks its KV events announced, keyed by token content.

    Thread-safe (subscriber threads apply events while the router matches). A malformed
    event is logged, counted (:attr:`malformed`) and skipped.

    Args:
        n: Number of replicas.
        block_size: vLLM's block size until a replica's ``/metrics`` or events say
            otherwise (:meth:`set_block_size`).
        speculative_ttl: Seconds a speculative entry lives (:meth:`expect`: the blocks
            a request just sent should store, counted as held until its
            ``BlockStored`` confirms them or this runs out); 0 turns them off.
        stale_after: Seconds a replica may stay silent after being sent a request that
            should store blocks before its events are taken to have stopped.
        clock: Monotonic clock.
        max_blocks: Block mappings kept per replica (the least recently stored go).
        lower_tier_weight: What a block held only on a lower tier (CPU, storage) is
            worth against a GPU block (it is loaded, not recomputed).
        watched: Per replica, whether it has an event stream (others are unknown).
    """

    def __init__(
        self,
        n: int,
        *,
        block_size: int = 16,
        speculative_ttl: float = 5.0,
        stale_after: float = 10.0,
        clock: Callable[[], float] | None = None,
        max_blocks: int = 1_000_000,
        lower_tier_weight: float = 0.5,
        watched: Sequence[bool] | None = None,
    ) -> None:
        if n < 1 or block_size < 1 or stale_after <= 0 or max_blocks < 1:
            raise ConfigurationError(
                "need n >= 1, block_size >= 1, stale_after > 0, max_blocks >= 1"
            )
        if not speculative_ttl >= 0:
            raise ConfigurationError(f"speculative_ttl must be >= 0, not {speculative_ttl!r}")
        if watched is not None and len(watched) != n:
            raise ConfigurationError("watched needs one entry per replica")
        self.n = n
        self.block_size = block_size
        self.stale_after = stale_after
        self.max_blocks = max_blocks
        self.speculative_ttl = speculative_ttl
        self.lower_tier_weight = lower_tier_weight
        self._clock = clock
        self._lock = threading.Lock()
        self._reps = [_Replica() for _ in range(n)]
        # per replica: key -> expiry of a speculative entry, soonest first
        self._spec: list[OrderedDict[int, float]] = [OrderedDict() for _ in range(n)]
        self.speculated = [0] * n  # speculative entries recorded
        self.confirmed = [0] * n  # ... confirmed by a BlockStored
        self.expired = [0] * n  # ... dropped unconfirmed
        self.watched = list(watched) if watched is not None else [True] * n
        self.block_sizes = [block_size] * n
        self._size_source = ["default"] * n
        self.lora_names: set[str] = set()
        self._waiting_since: list[float | None] = [None] * n  # sent, no event since
        self.last_seq: dict[tuple[int, int], int] = {}  # (replica, DP rank) -> seq
        self.events_seen = [0] * n
        self.gaps = [0] * n
        self.restarts = [0] * n
        self.malformed = [0] * n
        self.orphans = [0] * n  # stored under a parent never announced
        self.unaligned = [0] * n  # tokens that do not split into the hashes' blocks
        self.evicted = [0] * n

    # ------------------------------------------------------------------ keys
    def request_keys(
        self,
        tokens: Sequence[int],
        *,
        salt: str | None = None,
        lora: str | None = None,
        block_size: int | None = None,
    ) -> list[int]:
        """The chain of keys of a request's full blocks, as vLLM 0.33 builds their
        extra keys (``generate_block_hash_extra_keys``): the LoRA name on every block,
        the ``cache_salt`` on the first. Multimodal items are not known here (their
        blocks do not match)."""
        b = block_size or self.block_size
        t = tuple(tokens)
        first = _extra(lora, (salt,) if salt else ())
        rest = _extra(lora, ())
        out: list[int] = []
        parent = _ROOT
        for i, s in enumerate(range(0, len(t) // b * b, b)):
            parent = hash((parent, rest if i else first, t[s : s + b]))
            out.append(parent)
        return out

    def lora_of(self, model: Any) -> str | None:
        """``model`` if it names a LoRA adapter some replica announced blocks of (vLLM
        serves an adapter under its name as the request's ``model``)."""
        return model if isinstance(model, str) and model in self.lora_names else None

    # ------------------------------------------------------------------ block size
    def set_block_size(self, replica: int, size: int, source: str = "metrics") -> None:
        """Replica ``replica``'s real block size (from ``/metrics`` or its events);
        a size other than the configured one is logged once."""
        if size < 1:
            return
        with self._lock:
            old, was = self.block_sizes[replica], self._size_source[replica]
            self._size_source[replica] = source
            if size == old:
                return
            self.block_sizes[replica] = size
        log.warning(
            "replica %d: vLLM's KV block size is %d (%s), not %d (%s); matching with %d",
            replica,
            size,
            source,
            old,
            "kv_block_size" if was == "default" else was,
            size,
        )

    # ------------------------------------------------------------------ events
    def apply(self, replica: int, event: Any, *, rank: int = 0) -> None:
        """Apply one event (a dict with ``"type"``, or vLLM's array encoding); a
        malformed one is counted and skipped."""
        try:
            e = _normalize(event)
            if e is None:
                return
            learn: int | None = None
            with self._lock:
                self._waiting_since[replica] = None
                self.events_seen[replica] += 1
                if e["type"] == "AllBlocksCleared":
                    self._clear(replica, rank)
                elif e["type"] == "BlockRemoved":
                    self._remove(replica, e, rank)
                else:
                    learn = self._store(replica, e, rank)
            if (
                learn is not None
                and learn != self.block_sizes[replica]
                and self._size_source[replica] != "metrics"
            ):
                self.set_block_size(replica, learn, "events")
        except Exception as exc:
            self.malformed[replica] += 1
            level = logging.WARNING if self.malformed[replica] <= _LOGGED else logging.DEBUG
            log.log(level, "malformed KV event from replica %d skipped: %r", replica, exc)

    def apply_batch(
        self, replica: int, events: Sequence[Any], seq: int | None = None, *, rank: int = 0
    ) -> None:
        """Apply a batch in order. A gap in sequence numbers is counted (events were
        lost); a sequence that goes back (the publisher restarted, counting from 0
        again) drops what that replica (rank) held."""
        with self._lock:
            self._waiting_since[replica] = None
            if seq is not None:
                last = self.last_seq.get((replica, rank))
                if last is not None and seq <= last:
                    self.restarts[replica] += 1
                    self._clear(replica, rank)
                    log.warning(
                        "KV events of replica %d (rank %d) restarted at %d (after %d): "
                        "its blocks are forgotten",
                        replica,
                        rank,
                        seq,
                        last,
                    )
                elif last is not None and seq > last + 1:
                    self.gaps[replica] += 1
                    log.warning("KV events of replica %d: %d batches lost", replica, seq - last - 1)
                self.last_seq[(replica, rank)] = seq
        for e in events:
            self.apply(replica, e, rank=rank)

    def _store(self, replica: int, e: Mapping[str, Any], rank: int) -> int | None:
        """Store one event's blocks; its block size (group 0) to learn, if any."""
        rep = self._reps[replica]
        hashes, tokens = e.get("block_hashes"), e.get("token_ids")
        if not isinstance(hashes, list | tuple) or not isinstance(tokens, list | tuple):
            raise ValueError("BlockStored without block_hashes and token_ids lists")
        raw_size = e.get("block_size")
        b = int(raw_size) if raw_size else self.block_sizes[replica]
        if b < 1:
            raise ValueError(f"block_size {raw_size!r}")
        if len(tokens) != len(hashes) * b:
            # null (sliding-window) blocks left out of the hashes: cannot place them
            self.unaligned[replica] += 1
            return None
        group = int(e.get("group_idx") or 0)
        medium = _medium(e.get("medium"))
        lora = e.get("lora_name") or None
        if lora is not None:
            lora = str(lora)
            self.lora_names.add(lora)
        extras = e.get("extra_keys") or ()
        if not isinstance(extras, list | tuple):
            raise ValueError(f"extra_keys {extras!r:.60}")
        parent_hash = e.get("parent_block_hash")
        parent = _ROOT
        if parent_hash is not None:
            slot = rep.keys.get(_hashable(parent_hash))
            if slot is None:  # its parent was never announced (events lost)
                self.orphans[replica] += 1
                return None
            parent = slot[0]
        t = tuple(tokens)
        spec = self._spec[replica] if medium == 0 else None
        for i, h in enumerate(hashes):
            raw = extras[i] if i < len(extras) else None
            rest = _freeze(raw) if raw is not None else ()
            if not isinstance(rest, tuple):
                rest = (rest,)
            if lora and rest and rest[0] == lora:
                rest = rest[1:]  # 0.33 repeats the LoRA name first in every block's keys
            key = hash((parent, _extra(lora, rest), t[i * b : (i + 1) * b]))
            if spec and spec.pop(key, None) is not None:
                self.confirmed[replica] += 1
            parent = self._add(rep, _hashable(h), key, group, medium, rank)
        while len(rep.held) > self.max_blocks:
            mk, _ = rep.held.popitem(last=False)
            self._unmap(rep, mk)
            self.evicted[replica] += 1
        return b if group == 0 else None

    @staticmethod
    def _add(rep: _Replica, h: Any, key: int, group: int, medium: int, rank: int) -> int:
        """One more copy of block ``h``; the key it is known by."""
        mk = (h, group, medium, rank)
        copies = rep.held.get(mk)
        slot = rep.keys.get(h)
        if copies is not None and slot is not None:
            rep.held[mk] = copies + 1
            rep.held.move_to_end(mk)
            return slot[0]
        rep.held[mk] = 1
        if slot is None:
            rep.keys[h] = [key, 1]
        else:  # the same hash in another group, tier or rank
            slot[1] += 1
            key = slot[0]
        tiers = rep.tiers.get(key)
        if tiers is None:
            rep.tiers[key] = tiers = [0, 0, 0]
        tiers[medium] += 1
        return key

    @staticmethod
    def _unmap(rep: _Replica, mk: tuple[Any, int, int, int]) -> None:
        """Forget one ``(hash, group, medium, rank)`` mapping (all its copies)."""
        slot = rep.keys.get(mk[0])
        if slot is None:
            return
        slot[1] -= 1
        if slot[1] <= 0:
            del rep.keys[mk[0]]
        tiers = rep.tiers.get(slot[0])
        if tiers is not None:
            tiers[mk[2]] -= 1
            if not any(tiers):
                del rep.tiers[slot[0]]

    def _remove(self, replica: int, e: Mapping[str, Any], rank: int) -> None:
        hashes = e.get("block_hashes")
        if not isinstance(hashes, list | tuple):
            raise ValueError("BlockRemoved without a block_hashes list")
        rep = self._reps[replica]
        group = int(e.get("group_idx") or 0)
        medium = _medium(e.get("medium"))
        for h in hashes:
            mk = (_hashable(h), group, medium, rank)
            copies = rep.held.get(mk)
            if copies is None:
                continue  # never announced (or already forgotten)
            if copies > 1:
                rep.held[mk] = copies - 1  # another copy survives: so do its children
            else:
                del rep.held[mk]
                self._unmap(rep, mk)

    def _clear(self, replica: int, rank: int | None = None) -> None:
        rep = self._reps[replica]
        self._spec[replica].clear()
        if rank is None or all(mk[3] == rank for mk in rep.held):
            self._reps[replica] = _Replica()
            return
        for mk in [mk for mk in rep.held if mk[3] == rank]:
            del rep.held[mk]
            self._unmap(rep, mk)

    def clear(self, replica: int) -> None:
        """Forget a replica's blocks (it restarted)."""
        with self._lock:
            self._clear(replica)

    # ------------------------------------------------------------------ queries
    def sent(self, replica: int, *, expect: bool = True) -> None:
        """The router sent ``replica`` a request; ``expect``: one that should store new
        blocks, so events should follow soon (a fully cached prompt may store none)."""
        if self._clock is None or not expect or not self.watched[replica]:
            return
        with self._lock:
            if self._waiting_since[replica] is None:
                self._waiting_since[replica] = self._clock()

    def expect(
        self,
        replica: int,
        tokens: Sequence[int],
        *,
        salt: str | None = None,
        lora: str | None = None,
        match: KvMatch | None = None,
    ) -> None:
        """A request with ``tokens`` was sent to ``replica``: record the full blocks
        it should store there as speculative entries for ``speculative_ttl`` seconds.
        Until its ``BlockStored`` arrives (confirming them) or they expire, they count
        as held on the GPU, so a burst of requests sharing a new context, sent before
        the first one's events come back, follows it to one replica. ``match``: the
        request's :meth:`lookup` (its keys are reused)."""
        if not self.speculative_ttl or not self.watched[replica]:
            return
        b = self.block_sizes[replica]
        keys = match.keys.get(b) if match is not None else None
        if keys is None:
            keys = self.request_keys(tokens, salt=salt, lora=lora, block_size=b)
        if not keys:
            return
        until = self._now() + self.speculative_ttl
        with self._lock:
            spec = self._spec[replica]
            tiers = self._reps[replica].tiers
            for k in keys:
                t = tiers.get(k)
                if t is not None and t[0]:
                    continue  # held already
                if k in spec:
                    spec.move_to_end(k)
                else:
                    self.speculated[replica] += 1
                spec[k] = until
            while len(spec) > self.max_blocks:
                spec.popitem(last=False)
                self.expired[replica] += 1

    def speculative(self, replica: int) -> int:
        """Speculative entries of ``replica`` still alive (unconfirmed, unexpired)."""
        with self._lock:
            self._expire(replica, self._now())
            return len(self._spec[replica])

    def _now(self) -> float:
        return self._clock() if self._clock is not None else time.monotonic()

    def _expire(self, replica: int, now: float) -> None:
        """Drop ``replica``'s expired speculative entries (the oldest are first: they
        all live ``speculative_ttl``); under the lock."""
        spec = self._spec[replica]
        while spec:
            k, until = next(iter(spec.items()))
            if until > now:
                break
            del spec[k]
            self.expired[replica] += 1

    def stale(self, replica: int) -> bool:
        """Whether ``replica``'s events seem to have stopped (or it has none)."""
        if not self.watched[replica]:
            return True
        since = self._waiting_since[replica]
        return (
            since is not None
            and self._clock is not None
            and self._clock() - since > self.stale_after
        )

    def blocks(self, replica: int) -> int:
        """Distinct blocks ``replica`` holds by its events (any tier)."""
        return len(self._reps[replica].tiers)

    def lookup(
        self,
        tokens: Sequence[int],
        *,
        salt: str | None = None,
        lora: str | None = None,
        partial: bool = False,
    ) -> KvMatch:
        """Per replica, what of ``tokens`` vLLM would hit: its walk stops at the first
        miss, and the last prompt token is always recomputed (``partial``: ``tokens``
        are a prefix of the prompt, so every full block of them can hit). Keys are computed once
        per block size, outside the lock; the walk is O(blocks) per replica. A block
        with a live speculative entry (:meth:`expect`) counts as a GPU block."""
        n = self.n
        out = KvMatch([None] * n, [None] * n, [False] * n)
        now = self._now()
        live = [r for r in range(n) if not self.stale(r)]
        by_size: dict[int, list[int]] = {}
        for r in live:
            by_size.setdefault(self.block_sizes[r], []).append(r)
        w = self.lower_tier_weight
        for b, replicas in by_size.items():
            keys = self.request_keys(tokens, salt=salt, lora=lora, block_size=b)
            out.keys[b] = keys
            cap = len(tokens) // b if partial else max(0, (len(tokens) - 1) // b)
            m = len(keys)
            with self._lock:
                for r in replicas:
                    tiers = self._reps[r].tiers
                    self._expire(r, now)
                    spec = self._spec[r]
                    i = held = 0
                    while i < m:
                        t = tiers.get(keys[i])
                        if t is not None and t[0]:
                            held += 1
                        elif keys[i] not in spec:
                            break
                        i += 1
                    gpu = min(i, cap)
                    complete = held == i
                    while i < m and keys[i] in tiers:
                        i += 1
                    lower = min(i, cap) - gpu
                    out.blocks[r] = gpu
                    out.tokens[r] = float((gpu + w * lower) * b)
                    out.complete[r] = complete and i == m
        return out

    def match(
        self, tokens: Sequence[int], *, salt: str | None = None, lora: str | None = None
    ) -> list[int | None]:
        """Per replica, the GPU blocks of ``tokens`` vLLM would hit; None for a replica
        whose events have stopped (the router estimates it otherwise)."""
        return self.lookup(tokens, salt=salt, lora=lora).blocks


class KvEventSubscriber:
    """Reads one replica's ZMQ KV-event stream into a :class:`KvEventIndex` (a thread).

    Needs ``pyzmq`` and ``msgspec`` (``pip install 'agent-cache[kv-events]'``). Nothing
    connects before :meth:`start`. Any malformed message is logged, counted
    (:attr:`errors`, and the index's ``malformed``) and skipped: the thread only stops
    at :meth:`close`. With ``replay``, the publisher's replay socket (vLLM's
    ``replay_endpoint``) is asked for its buffered batches at the start (blocks cached
    before the router started) and after a gap in the sequence numbers.

    Args:
        endpoint: The publisher's address as the router reaches it, e.g.
            ``"tcp://gpu-1:5557"`` (for DP rank ``rank``, its offset port:
            :func:`offset_endpoint_port`).
        replica: The replica's index in the router.
        index: Where the events go.
        topic: The publisher's topic (vLLM's default is ``""``).
        rank: The data-parallel rank this stream is of.
        replay: The replay socket's address as the router reaches it, or None.

    Example (needs a vLLM server publishing KV events)::

        sub = KvEventSubscriber("tcp://gpu-1:5557", 0, KvEventIndex(1))
        sub.start(); ...; sub.close()
    """

    #: Seconds to wait for the replay socket's answer.
    REPLAY_TIMEOUT = 2.0
    _END_SEQ = (-1).to_bytes(8, "big", signed=True)

    def __init__(
        self,
        endpoint: str,
        replica: int,
        index: KvEventIndex,
        topic: str = "",
        *,
        rank: int = 0,
        replay: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.replica = replica
        self.index = index
        self.topic = topic
        self.rank = rank
        self.replay = replay
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._replayed: tuple[int, int] | None = None  # seqs applied from a replay
        self.batches = 0
        self.errors = 0
        self.replays = 0

    def start(self) -> KvEventSubscriber:
        """Connect and read in a daemon thread (idempotent)."""
        if self._thread is not None:
            return self
        try:
            import msgspec  # noqa: F401
            import zmq
        except ImportError as exc:
            raise MissingDependencyError("pyzmq", "kv-events", feature="KV events") from exc
        sock: Any = zmq.Context.instance().socket(zmq.SUB)
        sock.setsockopt(zmq.SUBSCRIBE, self.topic.encode())
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.endpoint)

        def run() -> None:
            poller = zmq.Poller()
            poller.register(sock, zmq.POLLIN)
            try:
                if self.replay is not None:
                    self._guarded(self._replay_from, 0, None)
                while not self._stop.is_set():
                    if not dict(poller.poll(100)):
                        continue
                    self._guarded(self.handle, sock.recv_multipart())
            finally:
                sock.close(linger=0)

        self._thread = threading.Thread(target=run, name=f"kv-events-{self.replica}", daemon=True)
        self._thread.start()
        return self

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            self.errors += 1
            self.index.malformed[self.replica] += 1
            level = logging.WARNING if self.errors <= _LOGGED else logging.DEBUG
            log.log(level, "bad KV event message from %s skipped: %r", self.endpoint, exc)

    def handle(self, parts: Sequence[bytes]) -> None:
        """One multipart message ``(topic, seq, payload)`` (the reader thread's step).

        Raises:
            ValueError: The message is malformed (the reader logs and skips it).
        """
        if len(parts) != 3 or len(parts[1]) != 8:
            raise ValueError(f"not a (topic, seq, payload) message: {len(parts)} parts")
        _topic, seq_bytes, payload = parts
        seq = int.from_bytes(seq_bytes, "big", signed=True)
        if self._replayed is not None:
            low, high = self._replayed
            if low <= seq <= high:
                return  # already applied from the replay
            if seq > high:
                self._replayed = None
        last = self.index.last_seq.get((self.replica, self.rank))
        if self.replay is not None and last is not None and seq > last + 1:
            self._guarded(self._replay_from, last + 1, seq)
        _ts, events = decode_event_batch(payload)
        self.index.apply_batch(self.replica, events, seq=seq, rank=self.rank)
        self.batches += 1

    def _replay_from(self, start: int, before: int | None) -> None:
        """Ask the replay socket for the batches from ``start`` (those before
        ``before`` are applied; all of them when None)."""
        import zmq

        assert self.replay is not None
        sock: Any = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.connect(self.replay)
            sock.send_multipart((b"", start.to_bytes(8, "big")))
            seqs: list[int] = []
            while sock.poll(int(self.REPLAY_TIMEOUT * 1000)):
                frames = sock.recv_multipart()
                if len(frames) != 4 or frames[2] == self._END_SEQ:
                    break
                seq = int.from_bytes(frames[2], "big", signed=True)
                if before is not None and seq >= before:
                    continue
                last = self.index.last_seq.get((self.replica, self.rank))
                if last is not None and seq <= last:
                    continue
                _ts, events = decode_event_batch(frames[3])
                self.index.apply_batch(self.replica, events, seq=seq, rank=self.rank)
                seqs.append(seq)
            if seqs and before is None:
                self._replayed = (min(seqs), max(seqs))
            self.replays += 1
        finally:
            sock.close(linger=0)

    def close(self) -> None:
        """Stop reading and close the socket."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
