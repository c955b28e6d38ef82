"""What each replica really caches, from the KV events vLLM publishes (optional extra).

``vllm serve --kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq",
"endpoint": "tcp://*:5557"}'`` publishes, on a ZMQ PUB socket, multipart messages
``(topic, 8-byte big-endian sequence number, msgpack payload)``. The payload is an
``EventBatch`` (``ts``, ``events``, ``data_parallel_rank``) of tagged events
(``vllm/distributed/kv_events.py``):

* ``BlockStored``: ``block_hashes`` (a chain), ``parent_block_hash`` (the block before
  the first, or None), ``token_ids`` (all blocks' tokens), ``block_size``, ``lora_id``,
  ``medium``, ``lora_name``, ``extra_keys`` (per block, e.g. the ``cache_salt``), ...;
* ``BlockRemoved``: ``block_hashes``, ``medium``;
* ``AllBlocksCleared``.

msgspec encodes a struct as a map with a ``"type"`` tag or, in releases that declared
``array_like=True``, as an array whose first element is the tag; both are read.

vLLM's block hashes depend on the server's hash seed, so the index re-keys every block by
its *token content* chained to its parent (``(parent key, block tokens, extra keys)``),
which the router can compute for a request from its token ids. A replica's prefix is then
known exactly, block for block, as vLLM will look it up. Events can stop (a restarted
publisher, a dropped socket): a replica that was sent requests but announced nothing for
``stale_after`` seconds makes :meth:`KvEventIndex.match` answer None, and the router falls
back to its prefix tree and load.

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
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_cache.errors import ConfigurationError, MissingDependencyError

__all__ = ["KvEventIndex", "KvEventSubscriber", "decode_event_batch"]

log = logging.getLogger("agent_cache.vllm")

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
    ),
    "BlockRemoved": ("block_hashes", "medium", "group_idx"),
    "AllBlocksCleared": (),
}

_Key = tuple[Any, ...]


def _normalize(event: Any) -> dict[str, Any] | None:
    """An event as a dict with ``"type"`` (map or array encoding); None if unknown."""
    if isinstance(event, Mapping):
        kind = event.get("type")
        return dict(event) if kind in _FIELDS else None
    if isinstance(event, list | tuple) and event and event[0] in _FIELDS:
        kind = str(event[0])
        out: dict[str, Any] = {"type": kind}
        out.update(zip(_FIELDS[kind], event[1:], strict=False))
        return out
    return None


def decode_event_batch(payload: bytes) -> tuple[float, list[dict[str, Any]]]:
    """``(ts, events)`` of one msgpack ``EventBatch`` payload (needs ``msgspec``).

    Raises:
        MissingDependencyError: ``msgspec`` is not installed (``agent-cache[kv-events]``).
        ValueError: The payload is not an event batch.
    """
    try:
        import msgspec
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise MissingDependencyError("msgspec", "kv-events", feature="KV events") from exc
    data = msgspec.msgpack.decode(payload)
    if isinstance(data, Mapping):
        ts, events = data.get("ts", 0.0), data.get("events", [])
    elif isinstance(data, list | tuple) and len(data) >= 2:
        ts, events = data[0], data[1]
    else:
        raise ValueError(f"not a KV event batch: {data!r:.100}")
    out = [e for e in (_normalize(x) for x in events or []) if e is not None]
    return float(ts or 0.0), out


class KvEventIndex:
    """Per replica, the blocks its KV events announced, keyed by token content.

    Thread-safe (subscriber threads apply events while the router matches).

    Args:
        n: Number of replicas.
        block_size: vLLM's block size (events carry it too; this is the default).
        stale_after: Seconds a replica may stay silent after being sent a request
            before its events are taken to have stopped.
        clock: Monotonic clock.
    """

    def __init__(
        self,
        n: int,
        *,
        block_size: int = 16,
        stale_after: float = 10.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if n < 1 or block_size < 1 or stale_after <= 0:
            raise ConfigurationError("need n >= 1, block_size >= 1, stale_after > 0")
        self.n = n
        self.block_size = block_size
        self.stale_after = stale_after
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: list[dict[Any, _Key]] = [{} for _ in range(n)]  # vLLM hash -> key
        self._refs: list[Counter[_Key]] = [Counter() for _ in range(n)]
        self._holders: dict[_Key, set[int]] = {}
        self._waiting_since: list[float | None] = [None] * n  # sent, no event since
        self.events_seen = [0] * n
        self.last_seq: list[int | None] = [None] * n
        self.gaps = [0] * n

    # ------------------------------------------------------------------ keys
    @staticmethod
    def _key(parent: _Key | None, tokens: Sequence[int], extra: Any) -> _Key:
        return (parent, tuple(tokens), tuple(extra) if extra else None)

    def request_keys(
        self, tokens: Sequence[int], *, salt: str | None = None, lora: str | None = None
    ) -> list[_Key]:
        """The chain of keys of a request's full blocks (as the events would key them)."""
        b = self.block_size
        out: list[_Key] = []
        parent: _Key | None = None
        for i in range(len(tokens) // b):
            extra = ((lora,) if lora else ()) + ((salt,) if i == 0 and salt else ())
            parent = self._key(parent, tokens[i * b : (i + 1) * b], extra)
            out.append(parent)
        return out

    # ------------------------------------------------------------------ events
    def apply(self, replica: int, event: Any) -> None:
        """Apply one event (a dict with ``"type"``, or vLLM's array encoding)."""
        e = _normalize(event)
        if e is None:
            return
        with self._lock:
            self._waiting_since[replica] = None
            self.events_seen[replica] += 1
            if e["type"] == "AllBlocksCleared":
                self._clear(replica)
            elif e["type"] == "BlockRemoved":
                for h in e.get("block_hashes") or []:
                    self._remove(replica, _hashable(h))
            else:
                self._store(replica, e)

    def apply_batch(self, replica: int, events: Sequence[Any], seq: int | None = None) -> None:
        """Apply a batch; a gap in sequence numbers is counted (events were lost)."""
        if seq is not None:
            last = self.last_seq[replica]
            if last is not None and seq > last + 1:
                self.gaps[replica] += 1
                log.warning("KV events of replica %d: %d batches lost", replica, seq - last - 1)
            self.last_seq[replica] = seq
        for e in events:
            self.apply(replica, e)
        if not events:
            with self._lock:
                self._waiting_since[replica] = None

    def _store(self, replica: int, e: Mapping[str, Any]) -> None:
        hashes = [_hashable(h) for h in e.get("block_hashes") or []]
        tokens = list(e.get("token_ids") or [])
        b = int(e.get("block_size") or self.block_size)
        extras = e.get("extra_keys") or []
        keys = self._keys[replica]
        parent_hash = e.get("parent_block_hash")
        parent = keys.get(_hashable(parent_hash)) if parent_hash is not None else None
        if parent_hash is not None and parent is None:
            return  # its parent was never announced (events lost): cannot place it
        for i, h in enumerate(hashes):
            block = tokens[i * b : (i + 1) * b]
            if len(block) < b:
                break
            extra = extras[i] if i < len(extras) else None
            key = self._key(parent, block, extra)
            keys[h] = key
            self._refs[replica][key] += 1
            self._holders.setdefault(key, set()).add(replica)
            parent = key

    def _remove(self, replica: int, h: Any) -> None:
        key = self._keys[replica].pop(h, None)
        if key is None:
            return
        refs = self._refs[replica]
        refs[key] -= 1
        if refs[key] <= 0:
            del refs[key]
            holders = self._holders.get(key)
            if holders is not None:
                holders.discard(replica)
                if not holders:
                    del self._holders[key]

    def _clear(self, replica: int) -> None:
        for key in self._refs[replica]:
            holders = self._holders.get(key)
            if holders is not None:
                holders.discard(replica)
                if not holders:
                    del self._holders[key]
        self._refs[replica].clear()
        self._keys[replica].clear()

    def clear(self, replica: int) -> None:
        """Forget a replica's blocks (it restarted)."""
        with self._lock:
            self._clear(replica)

    # ------------------------------------------------------------------ queries
    def sent(self, replica: int) -> None:
        """The router sent ``replica`` a request: events should follow soon."""
        if self._clock is None:
            return
        with self._lock:
            if self._waiting_since[replica] is None:
                self._waiting_since[replica] = self._clock()

    def stale(self, replica: int) -> bool:
        """Whether ``replica``'s events seem to have stopped."""
        since = self._waiting_since[replica]
        return (
            since is not None
            and self._clock is not None
            and self._clock() - since > self.stale_after
        )

    def blocks(self, replica: int) -> int:
        """Distinct blocks ``replica`` holds by its events."""
        return len(self._refs[replica])

    def match(
        self, tokens: Sequence[int], *, salt: str | None = None, lora: str | None = None
    ) -> list[int] | None:
        """Per replica, the blocks of ``tokens`` it holds that vLLM would hit (its walk
        stops at the first miss, and the last prompt token is always recomputed); None
        when some replica's events have stopped (fall back to other signals)."""
        if any(self.stale(i) for i in range(self.n)):
            return None
        cap = max(0, (len(tokens) - 1) // self.block_size)
        keys = self.request_keys(tokens[: cap * self.block_size], salt=salt, lora=lora)
        matched = [0] * self.n
        with self._lock:
            alive = set(range(self.n))
            for depth, key in enumerate(keys):
                alive &= self._holders.get(key, set())
                if not alive:
                    break
                for r in alive:
                    matched[r] = depth + 1
        return matched


def _hashable(h: Any) -> Any:
    return bytes(h) if isinstance(h, bytearray | memoryview) else h


class KvEventSubscriber:
    """Reads one replica's ZMQ KV-event stream into a :class:`KvEventIndex` (a thread).

    Needs ``pyzmq`` and ``msgspec`` (``pip install 'agent-cache[kv-events]'``). Nothing
    connects before :meth:`start`.

    Args:
        endpoint: The publisher's address as the router reaches it, e.g.
            ``"tcp://gpu-1:5557"``.
        replica: The replica's index in the router.
        index: Where the events go.
        topic: The publisher's topic (vLLM's default is ``""``).

    Example:
        >>> sub = KvEventSubscriber("tcp://gpu-1:5557", 0, KvEventIndex(1))  # doctest: +SKIP
        >>> sub.start(); ...; sub.close()  # doctest: +SKIP
    """

    def __init__(self, endpoint: str, replica: int, index: KvEventIndex, topic: str = "") -> None:
        self.endpoint = endpoint
        self.replica = replica
        self.index = index
        self.topic = topic
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.batches = 0

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
                while not self._stop.is_set():
                    if not dict(poller.poll(100)):
                        continue
                    parts = sock.recv_multipart()
                    if len(parts) != 3:
                        continue
                    _topic, seq_bytes, payload = parts
                    try:
                        _ts, events = decode_event_batch(payload)
                    except ValueError as exc:
                        log.warning("bad KV event batch from %s: %r", self.endpoint, exc)
                        continue
                    self.index.apply_batch(
                        self.replica, events, seq=int.from_bytes(seq_bytes, "big", signed=True)
                    )
                    self.batches += 1
            finally:
                sock.close(linger=0)

        self._thread = threading.Thread(target=run, name=f"kv-events-{self.replica}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop reading and close the socket."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
