"""``agent-cache warmup``: read a file, check every field, then store it inside one tenant.

A warmup file is input from outside the deployment: a pairs file, a replay log or an
``agent-cache export`` may have been edited, or written for another tenant. So by default
nothing in it picks *where* an entry goes: every line is stored as
:meth:`LayeredCache.store` would store it, under ``--namespace`` and this deployment's
prefix, its key recomputed from the request (prompt, ``--llm-string`` or the log's model,
context) at the namespace's current version. Keys, namespaces and versions in the file are
never taken: a line naming another namespace is refused; an export line whose key is not
the key of its own prompt under ``--llm-string`` (it was made under another model, context
or template) is left out, not re-keyed into a wrong hit.

``trust_file`` (``--trust-file``) is a same-deployment restore: export lines keep their
keys, namespaces, tags and expiry (:func:`agent_cache.ops.restore_entries`); still inside
this deployment's prefix, and a version in the file never raises a namespace's counter
(lines of another version are left out and counted).

Either way: every field is checked before anything is written, an error names its line
(``line 12: expires_at: Infinity is not a finite number``), and what the cache would never
store is not restored (empty and error answers; prompts over ``max_prompt_bytes``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_cache import _request as rq
from agent_cache.errors import AgentCacheError, ConfigurationError, SerializationError
from agent_cache.keys import KEY_PREFIX
from agent_cache.policy import is_cacheable

if TYPE_CHECKING:
    from agent_cache.cache import LayeredCache

__all__ = ["WarmLine", "WarmReport", "read_warmup_file", "warm"]

#: The keys this library writes (``keys_for``): a trusted restore writes nothing else.
_KEY = re.compile(rf"{KEY_PREFIX}:[0-9a-f]{{64}}")


@dataclass(frozen=True)
class WarmLine:
    """One checked line of a warmup file."""

    line: int
    prompt: str
    response: Any
    llm_string: str | None  # None: the command's --llm-string
    namespace: str | None  # what the line says (None: nothing)
    context: Any = None
    tags: tuple[str, ...] = ()
    expires_at: float | None = None
    tokens: Any = None
    export: Mapping[str, Any] | None = None  # the checked export row, for a trusted restore


@dataclass
class WarmReport:
    """What :func:`warm` did; ``*_lines``: the first few line numbers of each kind."""

    stored: int = 0
    skipped: int = 0  # already there (a resumed load)
    expired: int = 0
    not_cacheable: list[int] = field(default_factory=list)  # empty or error answers
    foreign: list[int] = field(default_factory=list)  # export key is not its prompt's key
    other_version: list[int] = field(default_factory=list)  # trusted: not this version
    namespaces: set[str] = field(default_factory=set)


def _bad(n: int, name: str, message: str) -> ConfigurationError:
    return ConfigurationError(f"line {n}: {name}: {message}")


def _text(row: Mapping[str, Any], name: str, n: int, *, optional: bool = False) -> str | None:
    value = row.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        got = "missing" if name not in row else f"a {type(value).__name__}, not a string"
        raise _bad(n, name, got)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _bad(n, name, f"not valid Unicode (lone surrogate at {exc.start})") from exc
    return value


def _finite(row: Mapping[str, Any], name: str, n: int) -> float | None:
    value = row.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(n, name, f"{json.dumps(value)[:40]} is not a number or null")
    if not math.isfinite(value):
        raise _bad(n, name, f"{value!r} is not a finite number".replace("inf", "Infinity"))
    return float(value)


def _tags(row: Mapping[str, Any], n: int) -> tuple[str, ...]:
    tags = row.get("tags")
    if tags is None:
        return ()
    if not isinstance(tags, list):
        raise _bad(n, "tags", "must be a list of strings")
    try:
        return rq.check_tags(tags)
    except ConfigurationError as exc:
        raise _bad(n, "tags", str(exc)) from exc


def _tokens(row: Mapping[str, Any], name: str, n: int) -> Any:
    value = row.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | dict):
        raise _bad(n, name, "must be an integer, an object of counts, or null")
    if isinstance(value, int) and value < 0:
        raise _bad(n, name, "must be >= 0")
    return value


def _version(row: Mapping[str, Any], n: int) -> int:
    value = row.get("version", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(n, "version", f"{json.dumps(value)[:40]} is not an integer >= 0")
    return value


def _response(value: Any, n: int) -> Any:
    try:
        rq.check_json(value)
    except SerializationError as exc:
        raise _bad(n, "response", str(exc)) from exc
    return value


def _export_line(row: Mapping[str, Any], n: int) -> WarmLine:
    key = _text(row, "key", n)
    assert key is not None
    if not _KEY.fullmatch(key):
        raise _bad(n, "key", f"{key[:80]!r} is not a key this library writes")
    namespace = _text(row, "namespace", n)
    prompt = _text(row, "prompt", n)
    assert prompt is not None
    _text(row, "scope", n, optional=True)
    _text(row, "tier", n, optional=True)
    checked = {
        **row,
        "version": _version(row, n),
        "created": _finite(row, "created", n),
        "vector_expires_at": _finite(row, "vector_expires_at", n),
    }
    return WarmLine(
        line=n,
        prompt=prompt,
        response=_response(row["response"], n),
        llm_string=None,
        namespace=namespace,
        tags=_tags(row, n),
        expires_at=_finite(row, "expires_at", n),
        tokens=_tokens(row, "tokens", n),
        export=checked,
    )


def _line(row: Mapping[str, Any], n: int) -> WarmLine:
    from agent_cache.ops import is_export_row
    from agent_cache.replay import parse_record

    if is_export_row(row):
        return _export_line(row, n)
    namespace = _text(row, "namespace", n, optional=True)
    if "question" in row and "answer" in row:
        prompt = _text(row, "question", n)  # a dict is refused, not stored as its repr
        assert prompt is not None
        return WarmLine(n, prompt, _response(row["answer"], n), None, namespace)
    if "prompt" in row and "response" in row and not row.get("model"):
        prompt = _text(row, "prompt", n)
        assert prompt is not None
        return WarmLine(
            n,
            prompt,
            _response(row["response"], n),
            None,
            namespace,
            context=row.get("context"),
            tags=_tags(row, n),
        )
    try:
        rec = parse_record(row)
    except (ValueError, TypeError, AttributeError, AgentCacheError) as exc:
        raise ConfigurationError(
            f"line {n}: need 'prompt' and 'response', 'question' and 'answer', "
            f"a replay-log record, or an export line ({exc})"
        ) from exc
    if "prompt" in row:
        _text(row, "prompt", n)
    return WarmLine(
        n,
        rec.prompt,
        _response(rec.response, n),
        rec.llm_string,
        namespace,
        context=rec.context,
        tokens=rec.usage,
    )


def read_warmup_file(path: str) -> list[WarmLine]:
    """Every line of ``path``, checked; the first bad one is a ``ConfigurationError``
    naming the file and the line (nothing is written before the whole file is read)."""
    lines: list[WarmLine] = []
    with open(path, encoding="utf-8") as fh:
        for n, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
                if not isinstance(row, dict):
                    raise ConfigurationError(f"line {n}: not a JSON object")
                lines.append(_line(row, n))
            except ValueError as exc:  # JSON syntax, or a number JSON cannot hold
                raise ConfigurationError(f"{path}: line {n}: not JSON ({exc})") from exc
            except ConfigurationError as exc:
                raise ConfigurationError(f"{path}: {exc}") from exc
    return lines


def _own_key(cache: LayeredCache, item: WarmLine, llm: str) -> bool | None:
    """Whether an export line's key is its prompt's key under ``llm`` (its namespace and
    version, no context, no template version): True/False is the ``verbatim`` it was
    made with; None: made under another model, context or template."""
    assert item.export is not None
    version = item.export["version"]
    for verbatim in (False, True):
        req = cache._prepare(item.prompt, llm, item.namespace, None, "", verbatim)
        keys = rq.keys_for(req, version)
        if item.export["key"] in (keys.exact, keys.template):
            return verbatim
    return None


def _line_namespace(item: WarmLine, namespace: str, *, trust_file: bool, given: bool) -> str:
    """The namespace a line is stored under: ``--namespace``, or with ``--trust-file``
    the line's own (which must still be ``--namespace`` when that was given)."""
    n = item.line
    if trust_file:
        ns = item.namespace or namespace
        if given and ns != namespace:
            raise _bad(n, "namespace", f"{ns!r} is not --namespace {namespace!r}")
        return ns
    if item.namespace is not None and item.namespace != namespace:
        raise _bad(
            n,
            "namespace",
            f"{item.namespace!r} is not --namespace {namespace!r} (a file's "
            "namespaces, keys and versions are used only with --trust-file)",
        )
    return namespace


def _check_prompt(cache: LayeredCache, item: WarmLine, llm: str, ns: str, limit: int) -> None:
    """Refuse, with its line number, a prompt the cache itself would refuse."""
    size = len(item.prompt.encode("utf-8"))
    if size > limit:
        raise _bad(item.line, "prompt", f"{size} bytes, over max_prompt_bytes ({limit})")
    try:
        cache._prepare(item.prompt, llm, ns, item.context, "")
    except ConfigurationError as exc:
        raise _bad(item.line, "prompt", str(exc)) from exc


_Plain = tuple[WarmLine, str, str, bool]  # line, llm, namespace, verbatim


def warm(
    cache: LayeredCache,
    lines: Sequence[WarmLine],
    *,
    namespace: str,
    llm_string: str = "",
    trust_file: bool = False,
    namespace_given: bool = True,
    batch_size: int = 256,
    progress: Callable[[int], None] | None = None,
) -> WarmReport:
    """Store the checked ``lines`` (see the module docstring); every line is planned (and
    may be refused) before the first is written."""
    from agent_cache.ops import restore_entries

    report = WarmReport()
    # -- plan: every check before the first write ------------------------------------
    plain, trusted = _plan(
        cache,
        lines,
        report,
        namespace=namespace,
        llm_string=llm_string,
        trust_file=trust_file,
        namespace_given=namespace_given,
    )
    # -- write ------------------------------------------------------------------------
    if progress is not None:
        progress(len(lines) - len(plain) - len(trusted))  # left out: done
    if trusted:
        restored = restore_entries(cache, trusted, batch_size=batch_size, progress=progress)
        report.stored += restored.stored
        report.skipped += restored.skipped
        report.expired += restored.expired
        report.namespaces |= {str(r["namespace"]) for _, r in trusted}
    step = max(1, batch_size)
    for start in range(0, len(plain), step):
        chunk = plain[start : start + step]
        _write_chunk(cache, chunk, report, step)
        if progress is not None:
            progress(len(chunk))
    return report


def _plan(
    cache: LayeredCache,
    lines: Sequence[WarmLine],
    report: WarmReport,
    *,
    namespace: str,
    llm_string: str,
    trust_file: bool,
    namespace_given: bool,
) -> tuple[list[_Plain], list[tuple[str, Mapping[str, Any]]]]:
    """Check every line: the plain ones to store and the trusted export records to
    restore; what is left out is counted in ``report``."""
    now = cache.clock()
    limit = cache.max_prompt_bytes
    plain: list[_Plain] = []
    trusted: list[tuple[str, Mapping[str, Any]]] = []
    versions: dict[str, int] = {}
    for item in lines:
        n = item.line
        ns = _line_namespace(item, namespace, trust_file=trust_file, given=namespace_given)
        llm = item.llm_string if item.llm_string is not None else llm_string
        _check_prompt(cache, item, llm, ns, limit)
        if not is_cacheable(item.response):
            report.not_cacheable.append(n)
            continue
        if item.expires_at is not None and item.expires_at <= now:
            report.expired += 1
            continue
        if item.export is not None and trust_file:
            if ns not in versions:  # read, never raised: see restore_entries
                versions[ns] = cache.kv_store.get_counter(rq.version_counter(ns))
            if item.export["version"] != versions[ns]:
                report.other_version.append(n)
            else:
                trusted.append((f"line {n}", item.export))
            continue
        verbatim = False
        if item.export is not None:
            own = _own_key(cache, item, llm)
            if own is None:
                report.foreign.append(n)
                continue
            verbatim = own
        plain.append((item, llm, ns, verbatim))
    return plain, trusted


def _write_chunk(cache: LayeredCache, chunk: list[_Plain], report: WarmReport, step: int) -> None:
    """Store one chunk: plain lines in one embedding batch per (llm, namespace), the
    rest (context, tags, expiry, tokens, a kept key) one by one."""
    groups: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for item, llm, ns, verbatim in chunk:
        report.namespaces.add(ns)
        if not verbatim and cache.contains(item.prompt, llm, ns, context=item.context):
            report.skipped += 1
        elif (
            item.context is None
            and not item.tags
            and item.expires_at is None
            and item.tokens is None
            and not verbatim
        ):
            groups.setdefault((llm, ns), []).append((item.prompt, item.response))
        else:
            ttl = None
            if item.expires_at is not None:
                ttl = max(item.expires_at - cache.clock(), 1e-3)
            cache.store(
                item.prompt,
                item.response,
                llm,
                ns,
                context=item.context,
                ttl=ttl,
                tags=item.tags,
                tokens=item.tokens,
                verbatim=verbatim,
            )
            report.stored += 1
    for (llm, ns), items in groups.items():  # one embedding batch per group
        report.stored += len(cache.store_many(items, llm_string=llm, namespace=ns, batch_size=step))
