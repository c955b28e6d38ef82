"""A Redis key-value store for the exact layer: the shared, scale-out choice.

Layout, under ``prefix`` (``"agent_cache:"`` by default)::

    {prefix}e:{key}              hash  v = value (JSON text), n = namespace, x = expires_at
    {prefix}kt:{key}             set   the key's tags (so delete can remove the tag rows)
    {prefix}t:{len}:{ns}:{tag}   set   keys of namespace ``ns`` carrying the tag (reverse
                                       index; ``len`` = len(ns) keeps the name unambiguous)
    {prefix}nt:{namespace}       set   tags ever used in the namespace (for clear)
    {prefix}ns:{namespace}       set   keys of the namespace (for clear / count)
    {prefix}namespaces           set   namespaces ever written (for count() and clear())
    {prefix}x                    zset  keys by expires_at (for housekeep)
    {prefix}c:{name}             int   counters (INCR)
    {prefix}l:{name}             str   single-flight locks (native TTL)
    {prefix}s:{name}             zset  model-call slots: token -> expiry (server clock)

Tenant walls: every operation reaches its keys through these indexes, never through a
``SCAN`` of the prefix, so :meth:`RedisStore.clear` cannot touch another application's
keys, even one whose prefix starts with this one's (``agent_cache:`` and
``agent_cache:tenantB:``). The tag index is per namespace, so invalidating a tag in one
namespace never reads or deletes another's entries.

Records and their ``kt`` sets carry a native TTL (``PX``) of ``expires_at - now``
plus an hour's grace; ``expires_at`` is also stored and compared with the caller's
``now`` on read, so the cache's clock decides. :meth:`RedisStore.housekeep` (run by the
cache on writes) deletes expired records in bounded batches with their index rows,
found through the ``x`` sorted set; the grace keeps a record's namespace and tags
readable until then. A record that expired natively before that may still be listed in
its namespace set, so :meth:`RedisStore.count` is approximate. A key of the layout
overwritten with another type (``WRONGTYPE``) is deleted and the command retried once.
:meth:`RedisStore.keys_for_tag` checks every candidate and returns only keys that still
carry the tag. A write (:meth:`RedisStore.set`) is one Lua script: one round trip,
atomic with the read of the old tags. Single Redis server (or a proxy); Redis Cluster is not
supported because writes touch several keys in one transaction.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import TracebackType
from typing import Any

from agent_cache._breaker import CircuitBreaker
from agent_cache.errors import BackendError, ConfigurationError, MissingDependencyError
from agent_cache.stores._entry import StoredEntry

__all__ = ["RedisStore"]

log = logging.getLogger("agent_cache")

_CHUNK = 500
_GRACE_MS = 3_600_000  # native TTL beyond expires_at: housekeep still finds the indexes
_DEFAULT_URL = "redis://localhost:6379/0"


def _text(value: object) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


class RedisStore:
    """A store on a Redis server, shared by every process that points at it.

    The ``redis`` package (``pip install 'agent-cache[redis]'``) is imported when the
    store is built; no connection is made until the first call. A client passed in is
    used as is (``decode_responses`` either way) and never closed by :meth:`close`.
    Counters survive :meth:`clear` (namespace versions live there and must only grow).
    Every ``redis.RedisError`` is raised as :class:`~agent_cache.errors.BackendError`.

    Args:
        url: a ``redis://`` URL; ignored when ``client`` is given. Defaults to
            ``redis://localhost:6379/0``.
        client: an existing ``redis.Redis`` client to use (the caller closes it).
        prefix: prepended to every Redis key this store writes (must not be empty).
        timeout: seconds a connection attempt or a command may take (a stalled server is
            a ``BackendError``, served as a miss); ``None``: redis-py's default. Not
            applied to a client passed in.
        breaker: a :class:`~agent_cache._breaker.CircuitBreaker` every call goes
            through (:class:`~agent_cache.LayeredCache` gives each store its own): once
            the server has failed a few times in a row, calls fail at once, without
            waiting for the timeout, until a probe call finds it answering again.

    Example (needs a Redis server)::

        store = RedisStore("redis://127.0.0.1:6379/0")
        store.set("k", '"v"', namespace="default", expires_at=None, now=0.0)
        store.get("k", now=1.0)  # -> '"v"'
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any | None = None,
        prefix: str = "agent_cache:",
        timeout: float | None = 2.0,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        try:
            import redis
        except ImportError as exc:
            raise MissingDependencyError("redis", "redis", feature="RedisStore") from exc
        if not prefix:
            raise ConfigurationError("RedisStore needs a non-empty key prefix")
        self._redis_module: Any = redis
        self._error: type[Exception] = redis.RedisError
        self._url = url or _DEFAULT_URL
        self._client: Any | None = client
        self._owns_client = client is None
        self._prefix = prefix
        if timeout is not None and not timeout > 0:
            raise ConfigurationError(f"timeout must be > 0 seconds or None, got {timeout!r}")
        self._timeout = timeout
        self.breaker = breaker
        self._set_script: Any = None  # the Lua of set(), registered on first use
        # one client per store: threads racing to create it each made one, and the one
        # dropped closed its pool under the pipelines still using it
        self._client_lock = threading.Lock()

    @property
    def prefix(self) -> str:
        """The prefix of every Redis key this store writes."""
        return self._prefix

    # -- records -----------------------------------------------------------------------

    def get(self, key: str, now: float) -> str | None:
        """The value under ``key``, or ``None`` if absent or expired at ``now``."""
        with self._errors("get", key):
            value, expires = self._repairing(
                lambda: self._redis().hmget(self._e(key), ["v", "x"]),
                {self._e(key): "hash"},
            )
        return self._live(value, expires, now)

    def get_versioned(self, counter: str, key: str, now: float) -> tuple[int, str | None]:
        """``(get_counter(counter), get(key, now))`` in one round trip (one pipeline): what
        a lookup reads first, the key built on the namespace version it last saw. Read
        together, the two are as consistent as reading the counter first: a version
        bumped between them leaves the old entry in place, only unreachable."""

        def both() -> Any:
            pipe = self._redis().pipeline(transaction=False)
            pipe.get(self._c(counter))
            pipe.hmget(self._e(key), ["v", "x"])
            return pipe.execute()

        with self._errors("get_versioned", key):
            version, (value, expires) = self._repairing(
                both, {self._c(counter): "string", self._e(key): "hash"}
            )
        return (0 if version is None else int(version)), self._live(value, expires, now)

    def get_many(self, keys: Sequence[str], now: float) -> dict[str, str]:
        """The live values among ``keys``, read with one round trip per 500 keys."""
        unique = list(dict.fromkeys(keys))
        out: dict[str, str] = {}
        with self._errors("get_many"):
            for chunk in _chunks(unique):
                pipe = self._redis().pipeline(transaction=False)
                for key in chunk:
                    pipe.hmget(self._e(key), ["v", "x"])
                for key, (value, expires) in zip(chunk, pipe.execute(), strict=True):
                    live = self._live(value, expires, now)
                    if live is not None:
                        out[key] = live
        return out

    def set(
        self,
        key: str,
        value: str,
        *,
        namespace: str,
        expires_at: float | None,
        tags: Sequence[str] = (),
        now: float,
    ) -> None:
        """Store ``value`` under ``key``, replacing any earlier record and its tags.

        A record already expired at ``now`` is not written, and any earlier record under
        ``key`` is deleted, so the key reads as absent afterwards.
        """
        self._set(key, value, namespace, expires_at, tags, now, None)

    def set_versioned(
        self,
        counter: str,
        version: int,
        key: str,
        value: str,
        *,
        namespace: str,
        expires_at: float | None,
        tags: Sequence[str] = (),
        now: float,
    ) -> int:
        """:meth:`set`, only if ``get_counter(counter)`` is ``version``; returns the
        counter's value (written iff it equals ``version``). One round trip, atomically:
        what a store writes first, its key built on the namespace version it last saw, so
        a version bumped elsewhere never receives an entry keyed on the old one."""
        seen = self._set(key, value, namespace, expires_at, tags, now, (counter, version))
        return self.get_counter(counter) if seen is None else seen

    def _set(
        self,
        key: str,
        value: str,
        namespace: str,
        expires_at: float | None,
        tags: Sequence[str],
        now: float,
        check: tuple[str, int] | None,
    ) -> int | None:
        """The one body of :meth:`set` and :meth:`set_versioned`: the counter's value
        when ``check`` is given and the record was written or refused by the script, or
        ``None`` (no check, or a record already expired: deleted, nothing checked)."""
        ttl_ms: int | None = None
        if expires_at is not None:
            remaining = expires_at - now
            if remaining <= 0:
                self.delete([key])
                return None
            ttl_ms = max(1, math.ceil(remaining * 1000)) + _GRACE_MS
        new_tags = list(dict.fromkeys(tags))
        expected = {
            self._e(key): "hash",
            self._kt(key): "set",
            self._ns(namespace): "set",
            self._nt(namespace): "set",
            self._prefix + "namespaces": "set",
            self._prefix + "x": "zset",
            self._w(namespace): "zset",
        }
        expected.update((self._t(namespace, t), "set") for t in new_tags)
        if check is not None:
            expected[self._c(check[0])] = "string"
        args = [
            self._prefix,
            key,
            value,
            namespace,
            "" if expires_at is None else repr(float(expires_at)),
            "" if ttl_ms is None else str(ttl_ms),
            repr(float(now)),
            "" if check is None else self._c(check[0]),
            "" if check is None else str(int(check[1])),
            *new_tags,
        ]
        with self._errors("set", key):
            seen = int(self._repairing(lambda: self._script()(args=args), expected))
        return None if check is None else seen

    #: The whole of :meth:`set` in one round trip, atomically: read the key's old tags
    #: and namespace, drop the index rows that no longer apply, write the record, its
    #: tags and the indexes. ARGV: prefix, key, value, namespace, expires_at ("" for
    #: none), PX ms (""), now, counter key ("" for none), version, tags... With a counter
    #: key, nothing is written unless the counter reads ``version`` (absent reads 0);
    #: the counter's value is returned (-1 without one). Key names are built as
    #: ``_t``/``_w`` build them (``len`` = the namespace's length in characters: UTF-8
    #: lead bytes counted).
    _SET = r"""
local p, key, value, ns, x, ttl, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local seen = -1
if ARGV[8] ~= '' then
  seen = tonumber(redis.call('get', ARGV[8]) or '0')
  if seen ~= tonumber(ARGV[9]) then return seen end
end
local function chars(s) local _, n = string.gsub(s, '[^\128-\191]', '') return n end
local function tkey(n, tag) return p .. 't:' .. chars(n) .. ':' .. n .. ':' .. tag end
local function wkey(n) return p .. 'w:' .. chars(n) .. ':' .. n end
local e, kt = p .. 'e:' .. key, p .. 'kt:' .. key
local tags, new = {}, {}
for i = 10, #ARGV do tags[#tags + 1] = ARGV[i]; new[ARGV[i]] = true end
local old_tags = redis.call('smembers', kt)
local old_ns = redis.call('hget', e, 'n')
local moved = old_ns and old_ns ~= ns
local src = old_ns or ns
for _, tag in ipairs(old_tags) do
  if moved or not new[tag] then redis.call('srem', tkey(src, tag), key) end
end
if moved then
  redis.call('srem', p .. 'ns:' .. old_ns, key)
  redis.call('zrem', wkey(old_ns), key)
end
redis.call('del', e, kt)
if x ~= '' then
  redis.call('hset', e, 'v', value, 'n', ns, 'x', x)
else
  redis.call('hset', e, 'v', value, 'n', ns)
end
if ttl ~= '' then redis.call('pexpire', e, ttl) end
if #tags > 0 then
  for i = 1, #tags, 1000 do
    redis.call('sadd', kt, unpack(tags, i, math.min(i + 999, #tags)))
    redis.call('sadd', p .. 'nt:' .. ns, unpack(tags, i, math.min(i + 999, #tags)))
  end
  if ttl ~= '' then redis.call('pexpire', kt, ttl) end
  for _, tag in ipairs(tags) do redis.call('sadd', tkey(ns, tag), key) end
end
redis.call('sadd', p .. 'ns:' .. ns, key)
redis.call('zadd', wkey(ns), now, key)
redis.call('sadd', p .. 'namespaces', ns)
if x ~= '' then redis.call('zadd', p .. 'x', x, key) else redis.call('zrem', p .. 'x', key) end
return seen
"""

    def _script(self) -> Any:
        """:attr:`_SET`, registered on the current client (again after a reconnect)."""
        client = self._redis()
        script = self._set_script
        if script is None or script.registered_client is not client:
            script = self._set_script = client.register_script(self._SET)
        return script

    def housekeep(self, now: float, limit: int = 256) -> list[str]:
        """Delete up to ``limit`` records expired at ``now`` with their tag and
        namespace rows; return their keys (so the cache deletes their vectors)."""
        with self._errors("housekeep"):
            client = self._redis()
            due = [
                _text(k)
                for k in client.zrangebyscore(self._prefix + "x", "-inf", now, start=0, num=limit)
            ]
            if not due:
                return []
            read = client.pipeline(transaction=False)
            for key in due:
                read.hget(self._e(key), "x")
            expiries = read.execute()
            # rewritten since with a later expiry (its score moved too): not ours to delete
            doomed = [
                k for k, x in zip(due, expiries, strict=True) if x is None or float(_text(x)) <= now
            ]
            gone = [k for k, x in zip(due, expiries, strict=True) if x is None]
            self._delete_chunk(doomed)
            if gone:  # expired natively: its namespace is unknown, look in each
                names = [_text(n) for n in client.smembers(self._prefix + "namespaces")]
                pipe = client.pipeline(transaction=False)
                for name in names:
                    pipe.srem(self._ns(name), *gone)
                    pipe.zrem(self._w(name), *gone)
                pipe.execute()
            client.zrem(self._prefix + "x", *due)
            return doomed

    def delete(self, keys: Sequence[str]) -> int:
        """Delete records and their tag-index rows; return how many records existed."""
        unique = list(dict.fromkeys(keys))
        removed = 0
        with self._errors("delete"):
            for chunk in _chunks(unique):
                removed += self._delete_chunk(chunk)
        return removed

    def evict_over(self, namespace: str, keep: int) -> list[str]:
        """Evict ``namespace``'s oldest-written records beyond ``keep`` (a per-tenant
        quota: other namespaces are never touched), tags included; return their keys.

        The write order lives in a sorted set per namespace; members whose record is gone
        (expired natively, or moved to another namespace) are dropped without counting.
        Two processes evicting at once may each remove the same excess: a namespace can
        end a little under its quota, never over it for long.
        """
        with self._errors("evict_over"):
            client = self._redis()
            order = self._w(namespace)
            doomed: list[str] = []
            for _ in range(8):  # each round drops stale members; a few suffice
                excess = int(client.zcard(order)) - keep - len(doomed)
                if excess <= 0:
                    break
                oldest = [_text(k) for k in client.zrange(order, 0, excess - 1 + len(doomed))]
                oldest = [k for k in oldest if k not in doomed][:excess]
                if not oldest:
                    break
                mine = self._owned_by(namespace, oldest)
                stale = set(oldest).difference(mine)
                if stale:
                    client.zrem(order, *stale)
                doomed.extend(mine)
            for chunk in _chunks(doomed):
                self._delete_chunk(chunk)
            return doomed

    def keys_for_tag(self, tag: str, limit: int, *, namespace: str | None = None) -> list[str]:
        """Up to ``limit`` keys that carry ``tag`` (in ``namespace``, or in any namespace).

        Stale index rows are pruned on the way.
        """
        if limit <= 0:
            return []
        with self._errors("keys_for_tag"):
            if namespace is not None:
                return self._tagged_in(namespace, tag, limit)
            names = sorted(_text(n) for n in self._redis().smembers(self._prefix + "namespaces"))
            out: list[str] = []
            for name in names:
                out.extend(self._tagged_in(name, tag, limit - len(out)))
                if len(out) >= limit:
                    break
            return out

    def _tagged_in(self, namespace: str, tag: str, limit: int) -> list[str]:
        out: dict[str, None] = {}  # SSCAN may repeat a member
        step = min(limit, _CHUNK)
        batch: list[str] = []
        for raw in self._redis().sscan_iter(self._t(namespace, tag), count=step):
            batch.append(_text(raw))
            if len(batch) >= step:
                out.update(dict.fromkeys(self._verify_tagged(namespace, tag, batch)))
                batch = []
                if len(out) >= limit:
                    break
        else:
            if batch:
                out.update(dict.fromkeys(self._verify_tagged(namespace, tag, batch)))
        return list(out)[:limit]

    def clear(self, namespace: str | None = None) -> int:
        """Delete every record (of ``namespace`` if given); return how many were deleted.

        Counters are kept.
        """
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise ConfigurationError(f"namespace must be a non-empty str, not {namespace!r:.80}")
        with self._errors("clear"):
            if namespace is not None:
                return self._clear_namespace(namespace)
            client = self._redis()
            names = [_text(n) for n in client.smembers(self._prefix + "namespaces")]
            removed = sum(self._clear_namespace(name) for name in names)
            if names:
                client.srem(self._prefix + "namespaces", *names)
            return removed

    def _clear_namespace(self, namespace: str) -> int:
        client = self._redis()
        members = [_text(m) for m in client.sscan_iter(self._ns(namespace), count=_CHUNK)]
        removed = 0
        for chunk in _chunks(list(dict.fromkeys(members))):
            mine = self._owned_by(namespace, chunk)
            stale = set(chunk).difference(mine)  # expired, or moved to another namespace
            removed += self._delete_chunk(mine)
            if stale:
                client.srem(self._ns(namespace), *stale)
        tags = [_text(t) for t in client.smembers(self._nt(namespace))]
        for chunk in _chunks(tags):  # the namespace's tag index, stale rows included
            client.delete(*(self._t(namespace, t) for t in chunk))
        client.delete(self._nt(namespace), self._w(namespace))
        return removed

    def count(self, namespace: str | None = None) -> int:
        """About how many records are stored (of ``namespace`` if given).

        Approximate: a record that expired natively is counted until its namespace is
        cleared.
        """
        with self._errors("count"):
            client = self._redis()
            if namespace is not None:
                return int(client.scard(self._ns(namespace)))
            names = [_text(n) for n in client.smembers(self._prefix + "namespaces")]
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.scard(self._ns(name))
            return sum(int(n) for n in pipe.execute()) if names else 0

    def namespace_counts(self) -> dict[str, int]:
        """About how many records each namespace holds (approximate like :meth:`count`)."""
        with self._errors("namespace_counts"):
            client = self._redis()
            names = sorted(_text(n) for n in client.smembers(self._prefix + "namespaces"))
            if not names:
                return {}
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.scard(self._ns(name))
            counts = [int(n) for n in pipe.execute()]
        return {name: n for name, n in zip(names, counts, strict=True) if n}

    def entries(
        self, now: float, namespace: str | None = None, *, batch: int = 500
    ) -> Iterator[StoredEntry]:
        """Every record live at ``now`` (of ``namespace`` if given), namespace by namespace.

        Found through this prefix's namespace sets (``SSCAN``, never a ``SCAN`` of the
        database, so another application's keys are never read), read in pipelines of
        ``batch`` records; a member listed twice by ``SSCAN`` is yielded once. A record
        written while the iteration runs may or may not appear.
        """
        step = max(1, min(batch, _CHUNK))
        with self._errors("entries"):
            client = self._redis()
            if namespace is not None:
                names = [namespace]
            else:
                names = sorted(_text(n) for n in client.smembers(self._prefix + "namespaces"))
        for name in names:
            seen: set[str] = set()
            cursor = 0
            while True:
                with self._errors("entries"):
                    cursor, raw = client.sscan(self._ns(name), cursor, count=step)
                    fresh = [k for k in dict.fromkeys(_text(m) for m in raw) if k not in seen]
                    seen.update(fresh)
                    found = self._read_entries(name, fresh, now) if fresh else []
                yield from found
                if int(cursor) == 0:
                    break

    def _read_entries(self, namespace: str, keys: list[str], now: float) -> list[StoredEntry]:
        pipe = self._redis().pipeline(transaction=False)
        for key in keys:
            pipe.hmget(self._e(key), ["v", "n", "x"])
            pipe.smembers(self._kt(key))
        replies = pipe.execute()
        out = []
        for i, key in enumerate(keys):
            value, owner, expires = replies[2 * i]
            if owner is None or _text(owner) != namespace:
                continue  # expired natively, or moved to another namespace
            live = self._live(value, expires, now)
            if live is None:
                continue
            tags = tuple(sorted(_text(t) for t in replies[2 * i + 1]))
            out.append(
                StoredEntry(
                    key, namespace, live, None if expires is None else float(_text(expires)), tags
                )
            )
        return out

    # -- counters ----------------------------------------------------------------------

    def incr(self, counter: str) -> int:
        """Atomically add one to ``counter`` and return the new value."""
        with self._errors("incr"):
            return int(self._redis().incr(self._c(counter)))

    def get_counter(self, counter: str) -> int:
        """The counter's value; 0 if it was never incremented."""
        with self._errors("get_counter"):
            value = self._redis().get(self._c(counter))
        return 0 if value is None else int(value)

    # -- locks (single-flight across processes) ---------------------------------------

    _UNLOCK = (
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
        "else return 0 end"
    )

    _RENEW = (
        "if redis.call('get', KEYS[1]) == ARGV[1] then "
        "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
    )

    def renew_lock(self, name: str, token: str, ttl: float) -> bool:
        """Extend the lock to ``ttl`` seconds if ``token`` still holds it (Lua)."""
        with self._errors("renew_lock"):
            done = self._redis().eval(
                self._RENEW, 1, f"{self._prefix}l:{name}", token, max(1, int(ttl * 1000))
            )
        return bool(done)

    def try_lock(self, name: str, token: str, ttl: float) -> bool:
        """``SET lock NX PX``: take the named lock unless another holder has it."""
        with self._errors("try_lock"):
            ok = self._redis().set(
                f"{self._prefix}l:{name}", token, nx=True, px=max(1, int(ttl * 1000))
            )
        return bool(ok)

    # -- slots (a deployment-wide limit on model calls) ---------------------------------

    _SLOT = (
        "local t = redis.call('time') local now = tonumber(t[1]) + tonumber(t[2]) / 1e6 "
        "redis.call('zremrangebyscore', KEYS[1], '-inf', now) "
        "if redis.call('zcard', KEYS[1]) < tonumber(ARGV[1]) then "
        "redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[3]) "
        "redis.call('pexpire', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000)) return 1 end "
        "return 0"
    )

    def acquire_slot(self, name: str, token: str, limit: int, ttl: float) -> bool:
        """Take one of ``limit`` slots named ``name`` (a sorted set; a holder that dies
        frees its slot after ``ttl`` s, by the server's clock)."""
        with self._errors("acquire_slot"):
            done = self._redis().eval(self._SLOT, 1, f"{self._prefix}s:{name}", limit, ttl, token)
        return bool(done)

    def release_slot(self, name: str, token: str) -> None:
        with self._errors("release_slot"):
            self._redis().zrem(f"{self._prefix}s:{name}", token)

    def unlock(self, name: str, token: str) -> None:
        """Release the lock if ``token`` still holds it (compare-and-delete in Lua)."""
        with self._errors("unlock"):
            self._redis().eval(self._UNLOCK, 1, f"{self._prefix}l:{name}", token)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the client if this store created it; a client passed in is left open."""
        if self._owns_client and self._client is not None:
            with self._client_lock:
                client, self._client = self._client, None
            if client is not None:
                with self._errors("close", guarded=False):
                    client.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "client" if not self._owns_client else repr(self._url)
        return f"RedisStore({where}, prefix={self._prefix!r})"

    # -- internals ---------------------------------------------------------------------

    def _e(self, key: str) -> str:
        return f"{self._prefix}e:{key}"

    def _kt(self, key: str) -> str:
        return f"{self._prefix}kt:{key}"

    def _t(self, namespace: str, tag: str) -> str:
        return f"{self._prefix}t:{len(namespace)}:{namespace}:{tag}"

    def _nt(self, namespace: str) -> str:
        return f"{self._prefix}nt:{namespace}"

    def _ns(self, namespace: str) -> str:
        return f"{self._prefix}ns:{namespace}"

    def _w(self, namespace: str) -> str:
        return f"{self._prefix}w:{len(namespace)}:{namespace}"

    def _c(self, counter: str) -> str:
        return f"{self._prefix}c:{counter}"

    def _redis(self) -> Any:
        client = self._client
        if client is not None:
            return client
        with self._client_lock:
            if self._client is None:
                limits: dict[str, float] = {}
                if self._timeout is not None:
                    limits = {
                        "socket_timeout": self._timeout,
                        "socket_connect_timeout": self._timeout,
                    }
                self._client = self._redis_module.Redis.from_url(
                    self._url, decode_responses=True, **limits
                )
            return self._client

    @contextmanager
    def _errors(self, op: str, key: str | None = None, guarded: bool = True) -> Iterator[None]:
        guard: AbstractContextManager[None] = (
            self.breaker.guard() if guarded and self.breaker is not None else nullcontext()
        )
        with guard:
            try:
                yield
            except self._error as exc:
                endpoint = None if not self._owns_client else self._url
                error = BackendError(
                    f"Redis {op} failed: {exc}", layer="exact", key=key, endpoint=endpoint
                )
                # the server answered (a wrong-type key, a script error): it is up
                error.answered = isinstance(  # type: ignore[attr-defined]
                    exc, self._redis_module.ResponseError
                )
                raise error from exc

    def _repairing(self, command: Any, expected: dict[str, str]) -> Any:
        """``command()``; if a key it touches holds the wrong type (someone overwrote
        it), delete the misfits and run it once more."""
        try:
            return command()
        except self._redis_module.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
        client = self._redis()
        names = list(expected)
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.type(name)
        wrong = [
            n
            for n, t in zip(names, pipe.execute(), strict=True)
            if _text(t) not in ("none", expected[n])
        ]
        if wrong:
            log.warning("agent-cache: Redis keys of the wrong type deleted: %s", wrong)
            client.delete(*wrong)
        return command()

    @staticmethod
    def _live(value: object, expires: object, now: float) -> str | None:
        if value is None:
            return None
        if expires is not None and float(_text(expires)) <= now:
            return None
        return _text(value)

    def _owned_by(self, namespace: str, keys: Sequence[str]) -> list[str]:
        """Those of ``keys`` whose record exists and belongs to ``namespace`` (an index
        member may have expired natively, or been rewritten in another namespace)."""
        read = self._redis().pipeline(transaction=False)
        for key in keys:
            read.hget(self._e(key), "n")
        owners = read.execute()
        return [
            k for k, n in zip(keys, owners, strict=True) if n is not None and _text(n) == namespace
        ]

    def _delete_chunk(self, keys: Sequence[str]) -> int:
        if not keys:
            return 0
        client = self._redis()
        read = client.pipeline(transaction=False)
        for key in keys:
            read.smembers(self._kt(key))
            read.hget(self._e(key), "n")
        found = read.execute()
        pipe = client.pipeline(transaction=True)
        pipe.delete(*(self._e(k) for k in keys))
        pipe.delete(*(self._kt(k) for k in keys))
        pipe.zrem(self._prefix + "x", *keys)
        for i, key in enumerate(keys):
            owner = found[2 * i + 1]
            if owner is None:
                continue
            for tag in found[2 * i]:
                pipe.srem(self._t(_text(owner), _text(tag)), key)
            pipe.srem(self._ns(_text(owner)), key)
            pipe.zrem(self._w(_text(owner)), key)
        return int(pipe.execute()[0])

    def _verify_tagged(self, namespace: str, tag: str, candidates: list[str]) -> list[str]:
        client = self._redis()
        pipe = client.pipeline(transaction=False)
        for key in candidates:
            pipe.sismember(self._kt(key), tag)
        flags = pipe.execute()
        stale = [k for k, ok in zip(candidates, flags, strict=True) if not ok]
        if stale:
            client.srem(self._t(namespace, tag), *stale)
        return [k for k, ok in zip(candidates, flags, strict=True) if ok]
