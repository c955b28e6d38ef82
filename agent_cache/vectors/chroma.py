"""A :class:`~agent_cache.protocols.VectorStore` on Chroma: embedded, server, or yours.

We always pass embeddings ourselves, so the collection is opened with
``embedding_function=None`` and Chroma's default embedding function (an ONNX model it
would download on first use) is never called. Results always equal those of a k-NN
search filtered by scope and expiry *inside* Chroma (a ``where`` clause); a cheaper
unfiltered search is tried first where it provably gives the same answer (see
:meth:`ChromaVectorStore.query`).
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from agent_cache import _fork
from agent_cache._breaker import CircuitBreaker
from agent_cache.errors import BackendError, ConfigurationError, MissingDependencyError
from agent_cache.protocols import MetaValue, Vector, VectorMatch
from agent_cache.vectors._write_batch import PendingVector, WriteBatcher, pending_matches

__all__ = ["ChromaVectorStore"]

#: A scope the filtered search comes back short for is read whole up to this many entries.
_EXACT_SCOPE = 256
#: How ``expires_at = inf`` is stored (Chroma metadata cannot hold infinity).
NEVER = 1e18
_PAGE = 1000
_MAX_SCOPES = 4096  # scopes whose share of results is remembered (then forgotten at once)
_COLLECTION_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9._-]{1,510})[a-zA-Z0-9]")
_DIMENSION_MISMATCH = re.compile(r"dimension of \d+, got \d+", re.IGNORECASE)


#: The write batchers of this process per (server, collection): what one cache has
#: queued, another cache on the same collection searches, and waits for before it
#: deletes, clears or counts (processes see each other's writes once they are sent).
_peers: dict[tuple[str, str], weakref.WeakSet[WriteBatcher]] = {}
_peers_lock = threading.Lock()


def _import_chromadb(http: bool = False) -> Any:
    """chromadb, and with ``http`` its HTTP client's modules too.

    ``chromadb.HttpClient`` imports its FastAPI client module on first use (~0.25 s on
    a small machine); done inside the connect bound, that one-time local cost counted
    against ``backend_timeout`` and failed a first connect to a healthy server.
    """
    try:
        import chromadb
        import chromadb.config

        if http:
            import chromadb.api.fastapi
    except ImportError as exc:
        raise MissingDependencyError("chromadb", "chroma", feature="ChromaVectorStore") from exc
    return chromadb


def _to_chroma(meta: Mapping[str, MetaValue]) -> dict[str, MetaValue]:
    out: dict[str, MetaValue] = {}
    for key, value in meta.items():
        if value is None:
            continue
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, str | int | float | bool):
            raise ConfigurationError(
                f"metadata {key!r} must be str, int, float or bool, got {type(value).__name__}",
                layer="semantic",
            )
        out[key] = value
    if not isinstance(out.get("scope"), str):
        raise ConfigurationError("every vector needs a str 'scope'", layer="semantic")
    expires = out.get("expires_at", math.inf)
    if isinstance(expires, str):
        raise ConfigurationError(f"expires_at must be a number, got {expires!r}")
    out["expires_at"] = NEVER if float(expires) >= NEVER else float(expires)
    return out


def _from_chroma(meta: Mapping[str, Any] | None) -> dict[str, MetaValue]:
    out = dict(meta or {})
    expires = out.get("expires_at")
    if isinstance(expires, int | float) and not isinstance(expires, bool) and expires >= NEVER:
        out["expires_at"] = math.inf
    return out


def _http_sessions(client: Any) -> list[Any]:
    """The ``httpx.Client`` sessions behind a chromadb ``HttpClient``.

    chromadb 1.5's ``Client.close()`` does not close them (chroma-core/chroma#2702), and
    its internal admin client holds a second one; we close both for clients we created.
    """
    sessions = []
    for owner in (client, getattr(client, "_admin_client", None)):
        session = getattr(getattr(owner, "_server", None), "_session", None)
        if callable(getattr(session, "close", None)):
            sessions.append(session)
    return sessions


def _bounded(make: Any, timeout: float | None, what: str) -> Any:
    """Run ``make()`` (which may do network I/O with no timeout) for at most ``timeout`` s."""
    if timeout is None:
        return make()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = make()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name="agent-cache-chroma-connect", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"{what} took longer than {timeout} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _collection_missing(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "notfound" in text or "does not exist" in text


def _live(meta: Mapping[str, Any] | None, scope: str, now: float) -> bool:
    if not meta or meta.get("scope") != scope:
        return False
    expires = meta.get("expires_at")
    return isinstance(expires, int | float) and float(expires) > now


class ChromaVectorStore:
    """Vectors in a Chroma collection (cosine space), filtered by scope and expiry.

    Exactly one backend is used: ``client`` (yours; never closed by us), else ``url``
    (a Chroma server through ``chromadb.HttpClient``), else ``path`` (an embedded
    ``PersistentClient``), else an in-memory ``EphemeralClient``. The client and the
    collection are created on first use, not in the constructor. Telemetry is off for
    clients we create. Chroma failures are raised as
    :class:`~agent_cache.errors.BackendError` with ``layer="semantic"``.

    Args:
        path: Directory of an embedded, persistent Chroma database.
        url: A Chroma server, e.g. ``"http://127.0.0.1:8000"``.
        client: A ready Chroma client to use instead.
        collection: Collection name.
        overfetch: Unfiltered candidates per requested result tried before the
            ``where``-filtered search (see :meth:`query`); ``0`` always filters in Chroma.
        timeout: seconds a call to a Chroma server may take (connecting included), so a
            stalled server is a ``BackendError`` (a miss), never a hang; chromadb's own
            client waits forever. ``None``: no limit.
        breaker: a :class:`~agent_cache._breaker.CircuitBreaker` every call goes
            through: a server that keeps failing is not called (each call fails at
            once) until a probe call finds it answering again.
        write_linger: ``None`` (the default): :meth:`add` writes before it returns.
            Seconds (e.g. ``0.01``): adds go to a background
            :class:`~agent_cache.vectors._write_batch.WriteBatcher` that sends many in one
            ``upsert``, the first waiting at most this long for others; :meth:`add`
            returns once the vectors are queued. Queued vectors are searched by
            :meth:`query` with the server's (a process reads its own writes at once);
            every other method, :meth:`close` and interpreter exit write them first.
            A batch that fails is retried, then logged and counted (:meth:`write_counts`);
            a process killed with vectors queued loses at most ``max_pending`` plus one
            batch of them (their exact entries are stored all the same).
        max_batch / max_pending: entries per ``upsert`` / queued at most (an add beyond
            blocks until the writer caught up); with ``write_linger`` only.
        on_write_error: called with the error of a batch that failed for good.

    A collection that disappeared (the server restarted on an empty folder, someone
    deleted it) is re-created on the next call, once per failing call.

    Example:
        >>> store = ChromaVectorStore(path=".agent_cache/chroma")   # nothing opened yet
        >>> store.collection_name
        'agent_cache'
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        url: str | None = None,
        client: Any = None,
        collection: str = "agent_cache",
        overfetch: int = 20,
        timeout: float | None = 2.0,
        breaker: CircuitBreaker | None = None,
        write_linger: float | None = None,
        max_batch: int = 256,
        max_pending: int = 4096,
        on_write_error: Callable[[Exception], None] | None = None,
    ) -> None:
        if sum(x is not None for x in (path, url, client)) > 1:
            raise ConfigurationError("pass at most one of path, url and client")
        if not _COLLECTION_NAME.fullmatch(collection):
            raise ConfigurationError(
                f"a Chroma collection name needs 3-512 characters from [a-zA-Z0-9._-], "
                f"starting and ending with a letter or digit; got {collection!r}"
            )
        if overfetch < 0:
            raise ConfigurationError(f"overfetch must be >= 0, got {overfetch}")
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigurationError(f"not a Chroma server URL: {url!r}", endpoint=url)
        self.path = path
        self.url = url
        self.collection_name = collection
        self.overfetch = overfetch
        if timeout is not None and not timeout > 0:
            raise ConfigurationError(f"timeout must be > 0 seconds or None, got {timeout!r}")
        self.timeout = timeout
        self.breaker = breaker
        self._client: Any = client
        self._owns_client = client is None
        self._collection: Any = None
        self._share: dict[str, float] = {}  # per scope: in-scope share of unfiltered results
        self._lock = threading.Lock()
        _fork.after_fork_in_child(self, _fork.renew_locks("_lock"))
        self._closed = False
        self._batcher: WriteBatcher | None = None
        if write_linger is not None:
            self._batcher = WriteBatcher(
                self._upsert,
                linger=write_linger,
                max_batch=max_batch,
                max_pending=max_pending,
                on_error=on_write_error,
                name=f"Chroma {collection}",
            )
            with _peers_lock:
                _peers.setdefault((url or "", collection), weakref.WeakSet()).add(self._batcher)

    # -- connection -----------------------------------------------------------------

    def _make_client(self) -> Any:
        chromadb = _import_chromadb(http=self.url is not None)
        settings = chromadb.config.Settings(anonymized_telemetry=False)
        if self.url is not None:
            parts = urlsplit(self.url)
            ssl = parts.scheme == "https"
            port = parts.port or (443 if ssl else 8000)
            client = _bounded(
                lambda: chromadb.HttpClient(
                    host=parts.hostname, port=port, ssl=ssl, settings=settings
                ),
                self.timeout,
                f"connecting to the Chroma server {self.url}",
            )
            if self.timeout is not None:
                import httpx

                for session in _http_sessions(client):
                    session.timeout = httpx.Timeout(self.timeout)
            return client
        if self.path is not None:
            return chromadb.PersistentClient(path=self.path, settings=settings)
        return chromadb.EphemeralClient(settings=settings)

    def _coll(self) -> Any:
        collection = self._collection
        if collection is not None:
            return collection
        with self._lock:
            if self._closed:
                raise BackendError("the Chroma store is closed", layer="semantic")
            if self._collection is None:
                try:
                    if self._client is None:
                        self._client = self._make_client()
                    self._collection = self._client.get_or_create_collection(
                        name=self.collection_name,
                        configuration={"hnsw": {"space": "cosine"}},
                        embedding_function=None,  # we always pass embeddings
                    )
                except MissingDependencyError:
                    raise
                except Exception as exc:
                    raise BackendError(
                        f"cannot open Chroma collection {self.collection_name!r}: {exc}",
                        layer="semantic",
                        endpoint=self.url or self.path,
                    ) from exc
            return self._collection

    def _fail(self, action: str, exc: Exception) -> BackendError:
        mismatch = _DIMENSION_MISMATCH.search(str(exc)) is not None
        hint = (
            "; a collection holds vectors of one dimension: a cache whose embedder has "
            "another needs its own prefix"
            if mismatch
            else ""
        )
        error = BackendError(
            f"Chroma {action} failed: {exc}{hint}",
            layer="semantic",
            endpoint=self.url or self.path,
        )
        if mismatch:  # the server answered: it is up, the breaker must not open
            error.answered = True  # type: ignore[attr-defined]
        return error

    def _run(self, action: str, fn: Any) -> Any:
        """``fn(collection)``; a collection that disappeared is re-created once."""
        collection = self._coll()
        try:
            return fn(collection)
        except Exception as exc:
            if not _collection_missing(exc):
                raise self._fail(action, exc) from exc
        with self._lock:
            if self._collection is collection:
                self._collection = None  # re-created by _coll()
        try:
            return fn(self._coll())
        except BackendError:
            raise
        except Exception as exc:
            raise self._fail(action, exc) from exc

    def _guarded(self) -> AbstractContextManager[None]:
        return self.breaker.guard() if self.breaker is not None else nullcontext()

    def _batch_size(self) -> int:
        try:
            return max(1, int(self._client.get_max_batch_size()))
        except Exception:
            return _PAGE

    # -- VectorStore ----------------------------------------------------------------

    def add(
        self,
        ids: Sequence[str],
        vectors: Sequence[Vector] | Vector,
        metadatas: Sequence[Mapping[str, MetaValue]],
    ) -> None:
        """Upsert vectors; each metadata mapping must carry ``scope``.

        Re-adding an id replaces its vector and the metadata keys given; Chroma's upsert
        merges metadata, so a key absent from the new mapping keeps its old value.
        """
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim == 1 and len(ids) == 1:
            matrix = matrix.reshape(1, -1)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids) or len(metadatas) != len(ids):
            raise ConfigurationError(
                "ids, vectors and metadatas must have the same length", layer="semantic"
            )
        if not ids:
            return
        metas = [_to_chroma(m) for m in metadatas]
        last = {id_: i for i, id_ in enumerate(ids)}  # Chroma rejects repeated ids in a batch
        if len(last) != len(ids):
            keep = sorted(last.values())
            ids, matrix, metas = [ids[i] for i in keep], matrix[keep], [metas[i] for i in keep]

        # queued unless the failure would be known at once: the first call (opening the
        # collection) and a circuit not closed (it fails at once, or probes) write here
        failing = self.breaker is not None and self.breaker.state != "closed"
        if self._batcher is not None and self._collection is not None and not failing:
            self._batcher.add(
                [PendingVector(id_, matrix[i].copy(), metas[i]) for i, id_ in enumerate(ids)]
            )
            return
        self._written()  # an older queued add of an id must not land after this one
        self._upsert(list(ids), matrix, metas)

    def _upsert(
        self, ids: list[str], matrix: np.ndarray[Any, Any], metas: list[dict[str, MetaValue]]
    ) -> None:
        """One ``upsert`` per server batch size: what a write or a batch of adds sends."""

        def upsert(collection: Any) -> None:
            for start in range(0, len(ids), step):
                end = start + step
                collection.upsert(
                    ids=ids[start:end], embeddings=matrix[start:end], metadatas=metas[start:end]
                )

        with self._guarded():
            self._coll()
            step = self._batch_size()
            self._run("upsert", upsert)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every vector added before is written (or failed for good); True
        unless ``timeout`` passed first. Without ``write_linger``: nothing to wait for."""
        return True if self._batcher is None else self._batcher.flush(timeout)

    def _batchers(self) -> list[WriteBatcher]:
        """This store's batcher and those of the other stores of this process on the
        same server and collection."""
        if self._batcher is None:
            return []
        with _peers_lock:
            peers = _peers.get((self.url or "", self.collection_name))
            return list(peers) if peers is not None else [self._batcher]

    def _written(self) -> None:
        """Queued adds first (ours and our peers'): what follows reads or deletes what
        they write."""
        wait = None if self.timeout is None else 15 * self.timeout
        for batcher in self._batchers():
            if not batcher.flush(wait):
                raise BackendError("queued Chroma writes did not finish in time", layer="semantic")

    def write_counts(self) -> dict[str, int]:
        """The background writer's ``batches``, ``written``, ``failed_batches``,
        ``failed_vectors`` and ``pending`` (all 0 without ``write_linger``)."""
        if self._batcher is None:
            return dict.fromkeys(
                ("batches", "written", "failed_batches", "failed_vectors", "pending"), 0
            )
        return self._batcher.counts()

    def query(self, vector: Vector, *, k: int, scope: str, now: float) -> list[VectorMatch]:
        """The ``k`` most similar unexpired vectors of ``scope``, best first.

        With ``overfetch`` > 0, the nearest vectors of the whole collection are fetched
        first: as many as the scope's share of recent results says hold ``k`` of it, 1.5
        times over (at least ``2 * k``; the share starts at 1 and is learned per
        scope), at most ``k * overfetch`` (at least 100, at most 1000); a scope whose share
        needs more is searched with the filter at once (and tried without now and then,
        its share growing by a quarter each time). If at least ``k`` of them are in ``scope`` and
        unexpired (or the fetch covered the whole collection), those are exactly the top
        ``k`` a filtered search would return, since every other in-scope vector is farther
        away. Otherwise (a small scope crowded out by others) the query is re-run with the
        ``where`` filter inside Chroma's k-NN, so no match is ever lost to crowding. The
        first step avoids Chroma's cost of a non-selective ``where``, which grows with the
        number of matching rows (chroma-core/chroma#7092).
        """
        if k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        now = float(now)

        def search(collection: Any) -> list[VectorMatch]:
            return self._search(collection, query, k=k, scope=scope, now=now)

        queued = [item for batcher in self._batchers() for item in batcher.pending()]
        with self._guarded():
            result: list[VectorMatch] = self._run("query", search)
        if not queued:
            return result
        mine = pending_matches(queued, query, scope, now)  # not on the server yet
        newer = {row[0] for row in mine} | {item.id for item in queued}
        merged = [(m.id, 1.0 - m.score, m.metadata) for m in result if m.id not in newer]
        merged.extend(mine)
        merged.sort(key=lambda row: row[1])
        return self._matches(merged[:k])

    def _search(
        self, collection: Any, query: Any, *, k: int, scope: str, now: float
    ) -> list[VectorMatch]:
        """:meth:`query` on the server: the overfetched search, else the filtered one."""
        cap = min(max(k * self.overfetch, 100), 1000)
        share = self._share.get(scope, 1.0)
        fetch = max(math.ceil(1.5 * k / share) if share > 0 else cap + 1, 2 * k)
        if self.overfetch > 0 and fetch <= cap:
            rows = self._rows(
                collection.query(
                    query_embeddings=query,
                    n_results=fetch,
                    include=["metadatas", "distances"],
                )
            )
            kept = [row for row in rows if _live(row[2], scope, now)]
            if rows:
                if len(self._share) >= _MAX_SCOPES:
                    self._share.clear()
                self._share[scope] = 0.5 * share + 0.5 * len(kept) / len(rows)
            if len(kept) >= k or len(rows) < fetch:
                return self._matches(kept[:k])
        elif self.overfetch > 0:  # a crowded scope: try the cheap search again later
            self._share[scope] = min(1.0, max(share, 1e-3) * 1.25)
        where = {"$and": [{"scope": scope}, {"expires_at": {"$gt": now}}]}
        rows = self._rows(
            collection.query(
                query_embeddings=query,
                n_results=k,
                where=where,
                include=["metadatas", "distances"],
            )
        )
        if len(rows) < k:  # a small scope: its every entry, ranked here
            rows = self._exact(collection, query, where, k) or rows
        return self._matches(rows)

    @staticmethod
    def _exact(
        collection: Any, query: Any, where: Mapping[str, Any], k: int
    ) -> list[tuple[str, float, Mapping[str, Any] | None]]:
        """The ``k`` nearest of a scope with fewer than ``k`` matches found by the
        filtered search, read whole (at most :data:`_EXACT_SCOPE` entries) and ranked
        here: Chroma's HNSW search under a filter that admits a handful of ids among
        thousands can come back short (seen: the one live entry of a scope missed),
        and a scope that small costs one read."""
        got = collection.get(where=where, include=["embeddings", "metadatas"], limit=_EXACT_SCOPE)
        ids = got.get("ids") or []
        embeddings = got.get("embeddings")
        if not ids or embeddings is None or len(ids) >= _EXACT_SCOPE:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        e = np.asarray(embeddings, dtype=np.float32)
        norms = np.linalg.norm(e, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
        distances = 1.0 - (e @ q) / np.maximum(norms, 1e-12)
        metadatas = got.get("metadatas") or [None] * len(ids)
        order = np.argsort(distances)[:k]
        return [(str(ids[i]), float(distances[i]), metadatas[i]) for i in order]

    @staticmethod
    def _rows(result: Mapping[str, Any]) -> list[tuple[str, float, Mapping[str, Any] | None]]:
        ids = (result.get("ids") or [[]])[0]
        distances = (result.get("distances") or [[]])[0] or []
        metadatas = (result.get("metadatas") or [[]])[0] or [None] * len(ids)
        rows = [
            (str(id_), float(dist), meta)
            for id_, dist, meta in zip(ids, distances, metadatas, strict=True)
        ]
        rows.sort(key=lambda row: row[1])
        return rows

    @staticmethod
    def _matches(rows: Sequence[tuple[str, float, Mapping[str, Any] | None]]) -> list[VectorMatch]:
        return [
            VectorMatch(id_, min(1.0, max(0.0, 1.0 - dist)), _from_chroma(meta))
            for id_, dist, meta in rows
        ]

    def delete(self, ids: Sequence[str]) -> None:
        """Remove vectors by id; unknown ids are ignored."""
        if not ids:
            return
        self._written()  # a queued add of one of these ids must not land after

        def delete(collection: Any) -> None:
            for start in range(0, len(ids), step):
                collection.delete(ids=list(ids[start : start + step]))

        with self._guarded():
            self._coll()
            step = self._batch_size()
            self._run("delete", delete)

    def clear(self, namespace: str | None = None) -> None:
        """Remove everything, or only vectors whose metadata ``namespace`` matches (a
        non-empty str: anything else, e.g. ``{"$ne": ...}``, would be a Chroma operator)."""
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise ConfigurationError(f"namespace must be a non-empty str, not {namespace!r:.80}")
        self._written()

        def clear(collection: Any) -> None:
            if namespace is not None:
                collection.delete(where={"namespace": namespace})
                return
            while True:
                page = collection.get(limit=_PAGE, include=[])["ids"]
                if not page:
                    return
                collection.delete(ids=list(page))

        with self._guarded():
            self._run("clear", clear)

    def count(self) -> int:
        """How many vectors the collection holds (expired ones included until deleted)."""
        self._written()
        with self._guarded():
            return int(self._run("count", lambda collection: collection.count()))

    def namespace_counts(self) -> dict[str, int]:
        """Vectors per metadata ``namespace`` in this collection, read page by page."""
        self._written()

        def tally(collection: Any) -> dict[str, int]:
            out: dict[str, int] = {}
            offset = 0
            while True:
                page = collection.get(limit=_PAGE, offset=offset, include=["metadatas"])
                metas = page.get("metadatas") or []
                for meta in metas:
                    ns = str((meta or {}).get("namespace", ""))
                    out[ns] = out.get(ns, 0) + 1
                if len(page.get("ids") or []) < _PAGE:
                    return out
                offset += _PAGE

        with self._guarded():
            result: dict[str, int] = self._run("count", tally)
        return result

    def metadata(self, ids: Sequence[str]) -> dict[str, dict[str, MetaValue]]:
        """The stored metadata of those ``ids`` that have a vector (``scope``, ...)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        self._written()

        def read(collection: Any) -> dict[str, dict[str, MetaValue]]:
            out: dict[str, dict[str, MetaValue]] = {}
            for start in range(0, len(unique), _PAGE):
                page = collection.get(ids=unique[start : start + _PAGE], include=["metadatas"])
                metas = page.get("metadatas") or [None] * len(page["ids"])
                for id_, meta in zip(page["ids"], metas, strict=True):
                    out[str(id_)] = _from_chroma(meta)
            return out

        with self._guarded():
            result: dict[str, dict[str, MetaValue]] = self._run("get", read)
        return result

    def close(self) -> None:
        """Write the queued vectors, then release a client we created (a client passed in
        is left open). Idempotent."""
        if self._batcher is not None:
            self._batcher.close(timeout=self.timeout and 15 * self.timeout)
        with self._lock:
            self._closed = True
            self._collection = None
            client, self._client = self._client, None
        if client is not None and self._owns_client:
            sessions = _http_sessions(client) if self.url is not None else []
            close = getattr(client, "close", None)
            try:
                if callable(close):
                    close()
                for session in sessions:
                    session.close()
            except Exception as exc:
                raise self._fail("close", exc) from exc

    def __enter__(self) -> ChromaVectorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
