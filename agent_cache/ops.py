"""Operations on a cache's stores, for ``agent-cache stats / export / warmup / clear``.

Every function takes a :class:`~agent_cache.LayeredCache` and works on the stores it
builds (``path``, ``redis_url``, ``chroma_url``, ``prefix``, ``vector_backend``), so the
command line reaches exactly what the application reaches, and nothing else: a Redis
prefix or a Chroma collection of another deployment is never read or cleared.

An export is JSON lines, one live entry each::

    {"key": ..., "namespace": ..., "prompt": ..., "response": ..., "tags": [...],
     "expires_at": 1767225600.0 | null, "created": ..., "tier": ..., "tokens": ...,
     "version": 0, "scope": "..." | null, "vector_expires_at": ... | null}

``scope`` is the entry's vector scope (``"<entry scope>.<embedder tag>"``: namespace,
version, LLM, template version and context, hashed, then the embedder's identity and
dimension; ``null``: it had no vector) and ``version`` its namespace's version counter:
:func:`restore_entries` writes each entry under its own key and re-embeds its prompt
with the restoring cache's embedder into the same entry scope under that embedder's tag,
so the restored entries hit for the same prompts, exactly and semantically, on any
backend and with any embedder (a line without a tag, from an older export, is placed
the same way).

Example:
    >>> import tempfile
    >>> from agent_cache import LayeredCache
    >>> from agent_cache.testing import HashEmbedder
    >>> cache = LayeredCache(path=None, embedder=HashEmbedder())
    >>> _ = cache.store("What is RAG?", "Retrieval-augmented generation.")
    >>> export_entries(cache, tempfile.mkdtemp() + "/cache.jsonl")
    ExportReport(written=1, already=0, torn=False)
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agent_cache import _request as rq
from agent_cache.errors import AgentCacheError, ConfigurationError, SerializationError
from agent_cache.keys import KEY_PREFIX
from agent_cache.policy import is_cacheable
from agent_cache.protocols import KVStore, MetaValue, VectorStore
from agent_cache.semantic import MAX_CANDIDATE_CHARS
from agent_cache.stores._entry import StoredEntry

if TYPE_CHECKING:
    from agent_cache.cache import LayeredCache

__all__ = [
    "ExportReport",
    "RestoreReport",
    "backend_names",
    "clear_entries",
    "entry_counts",
    "export_entries",
    "is_export_row",
    "restore_entries",
]

_BATCH = 500
#: The keys this library writes (``keys_for``): a restore writes nothing else.
_KEY = re.compile(rf"{KEY_PREFIX}:[0-9a-f]{{64}}")


@dataclass(frozen=True)
class ExportReport:
    """What :func:`export_entries` did: lines written now, and found from an earlier run."""

    written: int
    already: int
    torn: bool  # a torn last line (an interrupted run) was dropped and rewritten


@dataclass(frozen=True)
class RestoreReport:
    """What :func:`restore_entries` did."""

    stored: int
    skipped: int  # already there (a resumed load)
    expired: int  # expired since the export: not written
    behind: int  # not written: exported under another version than the namespace's here
    not_cacheable: int = 0  # empty or error answers: never stored, so never restored


def backend_names(cache: LayeredCache) -> dict[str, str]:
    """Where the cache's entries and vectors live, in words (no secrets of the URL)."""
    from urllib.parse import urlsplit

    def where(url: str) -> str:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"

    exact = (
        f"redis {where(cache.redis_url)} prefix {cache.prefix + ':'!r}"
        if cache.redis_url
        else f"sqlite {cache.path / 'exact.sqlite3'}"
        if cache.path is not None
        else "memory"
    )
    if cache.chroma_url:
        semantic = f"chroma server {where(cache.chroma_url)} collection {cache.prefix!r}"
    elif cache.path is None or cache.vector_backend == "memory":
        semantic = "memory"
    elif cache.vector_backend == "chroma":
        semantic = f"embedded chroma {cache.path / 'vectors'} collection {cache.prefix!r}"
    elif cache.redis_url:
        semantic = f"sqlite {cache.path / 'vectors.sqlite3'}"
    else:
        semantic = "sqlite (with the entries)"
    return {"exact": exact, "semantic": semantic}


def _need(store: object, method: str, what: str) -> Callable[..., Any]:
    fn = getattr(store, method, None)
    if not callable(fn):
        raise ConfigurationError(f"{type(store).__name__} has no {method}() (needed by {what})")
    return fn  # type: ignore[no-any-return]


def entry_counts(cache: LayeredCache, namespace: str | None = None) -> dict[str, Any]:
    """Entries per namespace and layer: ``{"entries": {"exact": n, "semantic": m},
    "namespaces": {ns: {"exact": n, "semantic": m}}}`` (only ``namespace`` if given).

    Counts include expired entries that housekeeping has not purged yet (and, on Redis,
    records that expired natively until their namespace is next cleaned).
    """
    exact: dict[str, int] = _need(cache.kv_store, "namespace_counts", "stats")()
    vectors: dict[str, int] = _need(cache.vector_store, "namespace_counts", "stats")()
    names = sorted(set(exact) | set(vectors))
    if namespace is not None:
        names = [namespace]
    per = {ns: {"exact": exact.get(ns, 0), "semantic": vectors.get(ns, 0)} for ns in names}
    total = {
        "exact": sum(v["exact"] for v in per.values()),
        "semantic": sum(v["semantic"] for v in per.values()),
    }
    return {"entries": total, "namespaces": per}


# -- export ---------------------------------------------------------------------------


def _done_keys(out: Path) -> tuple[set[str], bool]:
    """Keys of the complete lines of an earlier export; drop a torn last line."""
    done: set[str] = set()
    good = 0  # byte offset after the last complete line
    with out.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.endswith(b"\n"):
                break  # the run was cut inside this line: rewritten below
            good += len(line)
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = row["key"]
                if not isinstance(key, str):
                    raise TypeError("key is not a str")
            except (ValueError, TypeError, KeyError) as exc:
                raise AgentCacheError(
                    f"{out}:{n}: not a line of an agent-cache export ({exc}); cannot resume"
                ) from exc
            done.add(key)
    torn = good < out.stat().st_size
    if torn:
        with out.open("r+b") as fh:
            fh.truncate(good)
    return done, torn


def _export_line(
    entry: StoredEntry, version: int, meta: Mapping[str, MetaValue] | None
) -> str | None:
    try:
        record = rq.Record.decode(entry.value, entry.key)
    except SerializationError:
        return None  # a record this library did not write: nothing to restore it from
    vector_expires: Any = None if meta is None else meta.get("expires_at")
    if not isinstance(vector_expires, int | float) or vector_expires >= rq.NO_EXPIRY:
        vector_expires = None
    row = {
        "key": entry.key,
        "namespace": entry.namespace,
        "prompt": record.prompt or "",
        "response": record.response,
        "tags": list(entry.tags),
        "expires_at": entry.expires_at,
        "created": record.created,
        "tier": record.tier,
        "tokens": record.tokens,
        "version": version,
        "scope": None if meta is None else meta.get("scope"),
        "vector_expires_at": vector_expires,
    }
    return json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n"


def _batches(items: Iterable[StoredEntry], size: int) -> Iterator[list[StoredEntry]]:
    batch: list[StoredEntry] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def export_entries(
    cache: LayeredCache,
    out: str | os.PathLike[str],
    *,
    namespace: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ExportReport:
    """Write every live entry (of ``namespace``, or all) to ``out`` as JSON lines.

    With ``resume``, an existing file is continued: its complete lines are kept, a torn
    last line (a run cut short) is dropped, and only entries not in the file yet are
    appended, so no entry is written twice. Without it, an existing file is an error
    unless ``overwrite``. Lines are flushed every batch and synced at the end.

    Example (a deployment's cache directory; the module's example runs one)::

        export_entries(LayeredCache(path=".agent_cache"), "cache.jsonl")
        # -> ExportReport(written=1200, already=0, torn=False)
    """
    target = Path(out)
    kv, vectors = cache.kv_store, cache.vector_store
    scan = _need(kv, "entries", "export")
    read_meta = getattr(vectors, "metadata", None)
    done: set[str] = set()
    torn = False
    if target.exists() and resume:
        done, torn = _done_keys(target)
    elif target.exists() and not overwrite:
        raise ConfigurationError(
            f"{target} exists: pass --resume to continue it, or --force to overwrite it"
        )
    versions: dict[str, int] = {}
    written = 0
    now = cache.clock()
    with target.open("ab" if resume else "wb") as fh:
        for batch in _batches(scan(now, namespace, batch=_BATCH), _BATCH):
            todo = [e for e in batch if e.key not in done]
            if not todo:
                continue
            metas: Mapping[str, Mapping[str, MetaValue]] = (
                read_meta([e.key for e in todo]) if callable(read_meta) else {}
            )
            lines = []
            for entry in todo:
                if entry.namespace not in versions:
                    versions[entry.namespace] = kv.get_counter(rq.version_counter(entry.namespace))
                line = _export_line(entry, versions[entry.namespace], metas.get(entry.key))
                if line is not None:
                    lines.append(line.encode("utf-8"))
                    done.add(entry.key)
            fh.write(b"".join(lines))
            fh.flush()
            written += len(lines)
            if progress is not None:
                progress(len(todo))
        os.fsync(fh.fileno())
    return ExportReport(written=written, already=len(done) - written, torn=torn)


# -- restore (warmup of an export) ------------------------------------------------------


def is_export_row(row: Mapping[str, Any]) -> bool:
    """Whether a JSON line is one :func:`export_entries` wrote."""
    return "key" in row and "namespace" in row and "response" in row and "scope" in row


def _number(row: Mapping[str, Any], name: str, where: str) -> float | None:
    value = row.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{where}: {name} must be a number or null, got {value!r}")
    if not math.isfinite(value):
        raise ConfigurationError(f"{where}: {name}: {value!r} is not a finite number")
    return float(value)


def _checked(row: Mapping[str, Any], where: str, max_prompt_bytes: int) -> dict[str, Any]:
    for name in ("key", "namespace", "prompt"):
        if not isinstance(row.get(name), str):
            raise ConfigurationError(f"{where}: {name!r} must be a string")
    if not _KEY.fullmatch(row["key"]):
        raise ConfigurationError(f"{where}: 'key' is not a key this library writes")
    if not row["namespace"]:
        raise ConfigurationError(f"{where}: 'namespace' must be a non-empty string")
    size = len(row["prompt"].encode("utf-8", "surrogatepass"))
    if size > max_prompt_bytes:
        raise ConfigurationError(
            f"{where}: 'prompt' is {size} bytes, over max_prompt_bytes ({max_prompt_bytes})"
        )
    tags = row.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ConfigurationError(f"{where}: 'tags' must be a list of strings")
    scope = row.get("scope")
    if scope is not None and not isinstance(scope, str):
        raise ConfigurationError(f"{where}: 'scope' must be a string or null")
    version = row.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ConfigurationError(f"{where}: 'version' must be an integer >= 0")
    return {
        **row,
        "version": version,
        "tags": tags,
        "expires_at": _number(row, "expires_at", where),
        "vector_expires_at": _number(row, "vector_expires_at", where),
        "created": _number(row, "created", where),
    }


def _joint(kv: KVStore, vectors: VectorStore) -> bool:
    from agent_cache.vectors.sqlite import SQLiteVectorStore

    return isinstance(vectors, SQLiteVectorStore) and vectors.store is kv


def restore_entries(
    cache: LayeredCache,
    rows: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    batch_size: int = 256,
    progress: Callable[[int], None] | None = None,
) -> RestoreReport:
    """Write exported entries (``(where, row)`` pairs) under their own keys, tags and
    expiry, with their prompts re-embedded into their scopes (by this cache's embedder,
    under its tag: see the module docstring); entries already present are skipped (a
    resumed load), entries expired since the export are left out.

    A same-deployment restore: it trusts the keys and namespaces of ``rows`` (the command
    line calls it only with ``--trust-file``; by default a warmup recomputes every key,
    see :mod:`agent_cache._warm`). Keys stay inside this deployment's stores (its prefix)
    and must be keys this library writes. A version in the file never raises a
    namespace's counter (that would invalidate what it holds): entries exported under
    another version than the namespace's here are not written, counted in ``behind``.
    Empty and error answers are not restored (the cache never stores them).
    """
    checked = _checked_rows(rows, cache.max_prompt_bytes)
    tally = _Tally()
    current: dict[str, int] = {}
    for start in range(0, len(checked), max(1, batch_size)):
        chunk = checked[start : start + batch_size]
        now = cache.clock()
        todo = _to_write(cache.kv_store, chunk, now, current, tally)
        tally.stored += _write_rows(cache, todo, now)
        if progress is not None:
            progress(len(chunk))
    return RestoreReport(
        stored=tally.stored,
        skipped=tally.skipped,
        expired=tally.expired,
        behind=tally.behind,
        not_cacheable=tally.not_cacheable,
    )


@dataclass
class _Tally:
    """What a restore did with its rows so far (see :class:`RestoreReport`)."""

    stored: int = 0
    skipped: int = 0
    expired: int = 0
    behind: int = 0
    not_cacheable: int = 0


def _checked_rows(
    rows: Sequence[tuple[str, Mapping[str, Any]]], max_prompt_bytes: int
) -> list[dict[str, Any]]:
    """Every row checked (:func:`_checked`, and its response as a write checks it)
    before anything is written."""
    checked = [_checked(row, where, max_prompt_bytes) for where, row in rows]
    for (where, _), row in zip(rows, checked, strict=True):
        try:
            rq.check_json(row["response"])
        except SerializationError as exc:
            raise ConfigurationError(f"{where}: response: {exc}") from exc
    return checked


def _to_write(
    kv: KVStore,
    chunk: Sequence[dict[str, Any]],
    now: float,
    current: dict[str, int],
    tally: _Tally,
) -> list[dict[str, Any]]:
    """The rows of ``chunk`` to write; the others counted in ``tally`` (present,
    expired, not cacheable, or exported under another version than ``current``'s)."""
    present = kv.get_many([r["key"] for r in chunk], now)
    todo = []
    for row in chunk:
        ns = row["namespace"]
        if ns not in current:  # read, never raised
            current[ns] = kv.get_counter(rq.version_counter(ns))
        if row["key"] in present:
            tally.skipped += 1
        elif row["expires_at"] is not None and row["expires_at"] <= now:
            tally.expired += 1
        elif not is_cacheable(row["response"]):
            tally.not_cacheable += 1
        elif row["version"] != current[ns]:
            tally.behind += 1
        else:
            todo.append(row)
    return todo


def _write_rows(cache: LayeredCache, todo: Sequence[dict[str, Any]], now: float) -> int:
    """Write ``todo``'s records and, for the rows that had one, their re-embedded
    vectors (in the same transaction when both live in one SQLite file)."""
    from agent_cache.embedders import embedder_identity

    kv, vectors = cache.kv_store, cache.vector_store
    joint = _joint(kv, vectors)
    semantic = [r for r in todo if r["scope"] is not None]
    embedded: Iterator[Any] = iter(
        cache.embedder.embed([r["prompt"] for r in semantic]) if semantic else []
    )
    identity = embedder_identity(cache.embedder) if semantic else ""
    ids: list[str] = []
    vecs: list[Any] = []
    metas: list[dict[str, MetaValue]] = []
    for row in todo:
        write: dict[str, Any] = {}
        if row["scope"] is not None:
            vector = next(embedded)
            meta = _restored_meta(row, rq.embedder_tag(identity, int(np.shape(vector)[-1])))
            if joint:
                write = {"vector": vector, "vector_meta": meta}
            else:
                ids.append(row["key"])
                vecs.append(vector)
                metas.append(meta)
        kv.set(
            row["key"],
            _restored_record(row, now),
            namespace=row["namespace"],
            expires_at=row["expires_at"],
            tags=row["tags"],
            now=now,
            **write,
        )
    if ids:
        vectors.add(ids, vecs, metas)
    return len(todo)


def _restored_record(row: Mapping[str, Any], now: float) -> str:
    return rq.Record(
        row["prompt"],
        row["response"],
        tokens=row.get("tokens"),
        created=row["created"] if row["created"] is not None else now,
        tier=str(row.get("tier") or ""),
        expires=row["expires_at"],
    ).encode()


def _restored_meta(row: Mapping[str, Any], tag: str) -> dict[str, MetaValue]:
    """A restored row's vector metadata: its entry scope under this embedder's ``tag``."""
    vx = row["vector_expires_at"]
    return {
        "scope": rq.vector_scope(rq.entry_scope(row["scope"]), tag),
        "namespace": row["namespace"],
        "key": row["key"],
        "text": row["prompt"][:MAX_CANDIDATE_CHARS],
        "expires_at": rq.NO_EXPIRY if vx is None else vx,
    }


# -- clear ------------------------------------------------------------------------------


def clear_entries(cache: LayeredCache, namespace: str | None = None) -> int:
    """Delete the entries and vectors of ``namespace`` (or all of this deployment's:
    its SQLite file, its Redis prefix, its Chroma collection); return the entries
    deleted. Namespace version counters are kept (they only ever grow)."""
    removed = cache.kv_store.clear(namespace)
    cache.vector_store.clear(namespace)
    return removed
