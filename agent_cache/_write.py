"""Writing the cache: storing answers (one, or a bulk load), quotas, housekeeping and
invalidation.

A write puts the record in the exact layer and, when the request may use the semantic
layer, the question's vector in the vector store: in one transaction when both live in
the same SQLite database (the embedding is computed first), else one after the other.
The vector's id is the entry's key and its scope names the embedder (see
:meth:`Reader.vector_scope`): caches with different embedders that store one entry
leave its vector in the scope of the last to write it, and every delete by key reaches
it whichever embedder wrote it.
Every write then applies the namespace's quota, runs a bounded housekeeping pass now and
then, and hands the answer to the judge when a semantic candidate for the same query was
withheld (shadow, audit, exploration). :meth:`Writer.store_many_flow` does the same for
a batch, embedding the questions in chunks.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from agent_cache import _io as io
from agent_cache import _request as rq
from agent_cache import semantic, tracing
from agent_cache._backends import Backends
from agent_cache._flow import Flow
from agent_cache._lookup import Reader
from agent_cache._settings import Settings
from agent_cache._trust import Trust
from agent_cache.errors import ConfigurationError, SerializationError
from agent_cache.policy import is_cacheable
from agent_cache.protocols import MetaValue
from agent_cache.savings import Usage, usage_from
from agent_cache.stats import Count, StatsRecorder

__all__ = ["Writer", "check_invalidation_tags", "check_namespace"]

log = logging.getLogger("agent_cache")

_HOUSEKEEP_EVERY = 16  # writes (per process) between two housekeeping passes
_HOUSEKEEP_BATCH = 256  # expired entries purged per pass at most


class Writer:
    """The write path of one cache (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        backends: Backends,
        reader: Reader,
        trust: Trust,
        stats: StatsRecorder,
        *,
        failed: Callable[[Exception, str], None],
    ) -> None:
        self._s = settings
        self._b = backends
        self._reader = reader
        self._trust = trust
        self._stats = stats
        self._failed = failed
        self._writes = itertools.count(1)

    def admit(
        self, response: Any, tags: Iterable[str], ttl: Any, namespace: str, *, exact: bool = True
    ) -> bool:
        """Validate a write before anything is stored; False: not worth storing (counted).

        ``exact``: the caller's own value, refused unless it reads back equal with equal
        types (``False`` for a codec's payload, or a value already checked)."""
        rq.check_tags(tags)
        rq.check_ttl(ttl)
        rq.check_json(response, exact=exact)  # SerializationError before anything is written
        if not is_cacheable(response):
            self._stats.incr(Count.SKIPPED_STORES, namespace=namespace)
            return False
        return True

    def store_flow(
        self,
        req: rq.Request,
        response: Any,
        *,
        ttl: float | None,
        tags: Iterable[str],
        tokens: int | Mapping[str, Any] | Usage | None,
        exact: bool = True,
    ) -> Flow[str]:
        """One store, as :meth:`LayeredCache.store` describes it; returns the key.

        The key returned is the one the answer is (or, skipped, would have been) written
        under, at the namespace's current version; a failed store returns the key at the
        version this cache last read."""
        tag_list = rq.check_tags(tags)
        admitted = self.admit(response, tag_list, ttl, req.namespace, exact=exact)
        guess = self._reader.version_guess(req.namespace)
        keys = rq.keys_for(req, guess)
        try:
            with tracing.span("store", namespace=req.namespace):
                if not admitted:
                    version = yield from io.kv_get_counter(
                        self._b.kv, rq.version_counter(req.namespace)
                    )
                    self._reader.saw_version(req.namespace, version)
                    return rq.keys_for(req, version).primary
                keys = yield from self._write_flow(req, guess, response, ttl, tag_list, tokens)
        except (ConfigurationError, SerializationError):
            raise
        except Exception as exc:
            self._failed(exc, "store")
            return keys.primary
        self._stats.incr(Count.STORES, namespace=req.namespace)
        return keys.primary

    def _entry(
        self,
        req: rq.Request,
        keys: rq.Keys,
        response: Any,
        usage: Usage | None,
        ttl: float | None,
        now: float,
    ) -> tuple[str, float | None]:
        """The record to store and when it expires."""
        ttl_s, tier = self._s.ttl_policy.ttl_for(req.normalized, ttl)
        expires = self._s.ttl_policy.expires_at(now, ttl_s)
        record = rq.Record(
            req.prompt,
            response,
            tokens=usage.as_record() if usage else None,
            created=now,
            tier=tier,
            expires=expires,
            key=keys.primary,
        )
        return record.encode(), expires

    def _vector_meta(
        self, req: rq.Request, keys: rq.Keys, vector: Any, now: float, expires: float | None
    ) -> dict[str, MetaValue]:
        sem_expires = self._s.ttl_policy.semantic_expires_at(now, expires)
        return {
            "scope": self._reader.vector_scope(keys, vector),
            "namespace": req.namespace,
            "key": keys.primary,
            "text": req.prompt[: semantic.MAX_CANDIDATE_CHARS],
            "expires_at": rq.NO_EXPIRY if sem_expires is None else sem_expires,
        }

    def _record_write(
        self,
        req: rq.Request,
        keys: rq.Keys,
        response: Any,
        usage: Usage | None,
        ttl: float | None,
        tags: Sequence[str],
        now: float,
        vector: Any,
    ) -> tuple[str, dict[str, Any]]:
        """The record under ``keys`` and the keyword arguments of its ``kv.set`` (with the
        vector and its metadata when the two are written in one transaction)."""
        record, expires = self._entry(req, keys, response, usage, ttl, now)
        write: dict[str, Any] = {
            "namespace": req.namespace,
            "expires_at": expires,
            "tags": tuple(tags),
            "now": now,
        }
        if vector is not None:
            write["vector"] = vector
            write["vector_meta"] = self._vector_meta(req, keys, vector, now, expires)
        return record, write

    def _write_flow(
        self,
        req: rq.Request,
        guess: int,
        response: Any,
        ttl: float | None,
        tags: Sequence[str],
        tokens: int | Mapping[str, Any] | Usage | None,
    ) -> Flow[rq.Keys]:
        """Write the entry at version ``guess`` (the one this cache last saw), checked
        against the namespace's version in the same round trip; a version bumped since:
        written once more at the version read. Returns the keys written."""
        now = self._s.clock()
        kv = self._b.kv
        usage = usage_from(tokens)
        embedded = self._reader.semantic_on(req)
        joint = embedded and self._b.joint
        vector: Any = None
        if joint:  # embed first: the entry and its vector are written in one transaction
            try:
                vector = (yield from io.embed(self._b.embedder, [rq.embedded_text(req.prompt)]))[0]
            except Exception as exc:  # no vector: the exact entry is written all the same
                self._failed(exc, "embedding")
        keys = rq.keys_for(req, guess)
        record, write = self._record_write(req, keys, response, usage, ttl, tags, now, vector)
        counter = rq.version_counter(req.namespace)
        version = yield from io.kv_set_guessed(kv, counter, guess, keys.primary, record, write)
        if version != guess:  # bumped since: written once more, at the version just read
            self._reader.saw_version(req.namespace, version)
            keys = rq.keys_for(req, version)
            record, write = self._record_write(req, keys, response, usage, ttl, tags, now, vector)
            yield from io.kv_set(kv, keys.primary, record, write)
        if embedded and not joint:
            vectors = yield from io.embed(self._b.embedder, [rq.embedded_text(req.prompt)])
            meta = self._vector_meta(req, keys, vectors[0], now, write["expires_at"])
            yield from io.vector_add(self._b.vectors, [keys.primary], vectors[:1], [meta])
        yield from self._after_write_flow(req.namespace, now)
        yield from self._trust.judge_flow(keys.exact, response)
        return keys

    def store_many_flow(
        self,
        reqs: Sequence[tuple[rq.Request, Any]],
        namespace: str,
        *,
        ttl: float | None,
        tags: Sequence[str],
        batch_size: int,
    ) -> Flow[list[str]]:
        """A bulk load: what :meth:`store_flow` does for each pair (quota, housekeeping,
        judging included), with the questions embedded ``batch_size`` at a time."""
        if batch_size < 1:
            raise ConfigurationError("batch_size must be >= 1")
        pending = [(req, r) for req, r in reqs if self.admit(r, tags, ttl, namespace)]
        kv = self._b.kv
        version = yield from io.kv_get_counter(kv, rq.version_counter(namespace))
        now = self._s.clock()
        out: list[str] = []
        joint = self._b.joint
        for start in range(0, len(pending), batch_size):
            chunk = pending[start : start + batch_size]
            texts = [
                rq.embedded_text(req.prompt) for req, _ in chunk if self._reader.semantic_on(req)
            ]
            embedded: Iterator[Any] = iter(
                (yield from io.embed(self._b.embedder, texts)) if texts else []
            )
            ids: list[str] = []
            vecs: list[Any] = []
            metas: list[dict[str, MetaValue]] = []
            judged: list[tuple[str, Any]] = []
            for req, response in chunk:
                keys = rq.keys_for(req, version)
                record, expires = self._entry(req, keys, response, None, ttl, now)
                write: dict[str, Any] = {
                    "namespace": namespace,
                    "expires_at": expires,
                    "tags": tuple(tags),
                    "now": now,
                }
                if self._reader.semantic_on(req):
                    vector = next(embedded)
                    meta = self._vector_meta(req, keys, vector, now, expires)
                    if joint:
                        write.update(vector=vector, vector_meta=meta)
                    else:
                        ids.append(keys.primary)
                        vecs.append(vector)
                        metas.append(meta)
                yield from io.kv_set(kv, keys.primary, record, write)
                out.append(keys.primary)
                judged.append((keys.exact, response))
            if ids:
                yield from io.vector_add(self._b.vectors, ids, vecs, metas)
            self._stats.incr(Count.STORES, len(chunk), namespace=namespace)
            yield from self._quota_flow(namespace)
            yield from self.housekeep_flow(now, force=True)
            for query_key, response in judged:
                yield from self._trust.judge_flow(query_key, response)
        return out

    # ------------------------------------------------------------------ housekeeping
    def _after_write_flow(self, namespace: str, now: float) -> Flow[None]:
        yield from self._quota_flow(namespace)
        yield from self.housekeep_flow(now)

    def housekeep_flow(self, now: float, force: bool = False) -> Flow[None]:
        """Every ``_HOUSEKEEP_EVERY`` writes: purge up to ``_HOUSEKEEP_BATCH`` expired
        entries (their tag rows and vectors with them), and the vectors of entries the
        exact layer's LRU bound evicted, so nothing expired piles up and the vector
        count follows the exact layer's. A failure is logged, never the write's."""
        if not force and next(self._writes) % _HOUSEKEEP_EVERY:
            return
        kv, vectors = self._b.kv, self._b.vectors
        joint = self._b.joint
        try:
            if callable(getattr(kv, "housekeep", None)):
                keys = yield from io.kv_housekeep(kv, now, _HOUSEKEEP_BATCH)
                if keys and not joint:
                    yield from io.vector_delete(vectors, list(keys))
            if not joint and callable(getattr(vectors, "housekeep", None)):
                yield from io.vector_housekeep(vectors, now, _HOUSEKEEP_BATCH)
        except Exception as exc:
            self._failed(exc, "housekeeping")

    def _quota_flow(self, namespace: str) -> Flow[None]:
        """A namespace past its quota evicts its own oldest entries (and their vectors)."""
        keep = self._s.quotas.get(namespace)
        kv = self._b.kv
        if keep is None or not callable(getattr(kv, "evict_over", None)):
            return
        try:
            keys = yield from io.kv_evict_over(kv, namespace, keep)
            if keys:
                self._stats.incr(Count.QUOTA_EVICTED, len(keys))
                if not self._b.joint:
                    yield from io.vector_delete(self._b.vectors, list(keys))
        except Exception as exc:
            self._failed(exc, "quota")

    # ------------------------------------------------------------------ invalidation
    def invalidate_flow(
        self, tags: Sequence[str], namespace: str | None, batch_size: int, pause: float
    ) -> Flow[int]:
        """Delete, in batches, the entries of ``namespace`` (``None``: every namespace)
        carrying any of ``tags``."""
        removed = 0
        for tag in tags:
            while True:
                keys = yield from io.kv_keys_for_tag(self._b.kv, tag, batch_size, namespace)
                if not keys:
                    break
                yield from io.vector_delete(self._b.vectors, keys)
                removed += yield from io.kv_delete(self._b.kv, keys)
                if pause:
                    yield from io.call(self._s.sleep, pause)
        return removed


def check_invalidation_tags(tags: Iterable[str], batch_size: int) -> list[str]:
    if isinstance(tags, str):
        raise ConfigurationError("tags must be a list of strings, not one string")
    tag_list = list(tags)
    if any(not isinstance(t, str) or not t for t in tag_list):
        raise ConfigurationError("tags must be non-empty strings")
    if batch_size < 1:
        raise ConfigurationError("batch_size must be >= 1")
    return tag_list


def check_namespace(namespace: Any) -> str:
    if namespace is None:
        raise ConfigurationError(
            "invalidate() works inside one namespace; for a purge of every namespace "
            "call invalidate_all_namespaces()"
        )
    if not isinstance(namespace, str) or not namespace:
        raise ConfigurationError("namespace must be a non-empty str")
    return namespace
