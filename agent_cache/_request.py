"""Pure helpers shared by every path: input validation, request keys, record encoding."""

from __future__ import annotations

import difflib
import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypedDict

from agent_cache.errors import AgentCacheError, ConfigurationError, SerializationError
from agent_cache.keys import KEY_PREFIX, Template, canonical_json, digest, normalize
from agent_cache.savings import Usage, usage_from

__all__ = [
    "CachePolicy",
    "FetchArgs",
    "Keys",
    "Options",
    "ReadArgs",
    "Record",
    "Request",
    "ScopeArgs",
    "StoreArgs",
    "StreamArgs",
    "asked_once",
    "check_name",
    "embedded_text",
    "embedder_tag",
    "entry_scope",
    "prepare",
    "vector_scope",
    "version_counter",
]

MAX_PROMPT_BYTES = 1_000_000
#: The deepest nesting of lists/objects a stored answer (or a context) may have: deeper
#: values are refused with ``SerializationError`` before anything is written (JSON
#: libraries recurse, and a reader in another process must be able to decode the record).
MAX_JSON_DEPTH = 64
NO_EXPIRY = 1e18  # vector stores want a number for "never"


#: What a request does with the cache: ``"use"`` it; ``"refresh"``: call the model and
#: overwrite; ``"no_store"``: read, never write; ``"bypass"``: neither read nor write.
CachePolicy = Literal["use", "bypass", "no_store", "refresh"]
POLICIES: tuple[str, ...] = ("use", "bypass", "no_store", "refresh")


# The per-request keyword arguments of each LayeredCache method, declared once: each
# method takes ``**options: Unpack[...]`` of the set it accepts, and :meth:`Options.of`
# checks them, so a sync method and its async twin share one declaration and one check.
class ScopeArgs(TypedDict, total=False):
    """``context`` (whatever else changes the answer: part of the exact key and an exact
    filter on the semantic search) and ``template_version`` (bump when the prompt
    template changes)."""

    context: Any
    template_version: str


class ReadArgs(ScopeArgs, total=False):
    """:class:`ScopeArgs`, ``policy`` (:data:`CachePolicy`) and ``verbatim`` (key on the
    prompt exactly as given: no normalization, no template, no semantic layer)."""

    policy: CachePolicy
    verbatim: bool


class _WriteArgs(ScopeArgs, total=False):
    ttl: float | None
    tags: Iterable[str]
    tokens: Any  # an int, a usage mapping, a Usage, or (fetch) a function of the value
    verbatim: bool


class StoreArgs(_WriteArgs, total=False):
    """What :meth:`LayeredCache.store` takes: ``ttl``, ``tags``, ``tokens``,
    ``verbatim``, ``exact`` and the :class:`ScopeArgs`."""

    exact: bool


class StreamArgs(_WriteArgs, total=False):
    """What :meth:`LayeredCache.fetch_stream` takes besides ``join``."""

    policy: CachePolicy


class FetchArgs(StreamArgs, total=False):
    """What :meth:`LayeredCache.fetch` takes: :class:`StreamArgs` and a codec."""

    encode: Callable[[Any], Any] | None
    decode: Callable[[Any], Any] | None


class Options(NamedTuple):
    """The per-request arguments of one call, validated once (:meth:`of`); a tuple,
    which is the cheapest immutable object to build once per call."""

    context: Any = None
    template_version: str = ""
    policy: str = "use"
    ttl: float | None = None
    tags: tuple[str, ...] = ()
    tokens: Any = None
    verbatim: bool = False
    exact: bool = True
    encode: Callable[[Any], Any] | None = None
    decode: Callable[[Any], Any] | None = None

    @classmethod
    def of(cls, accepted: Any, method: str, given: Mapping[str, object]) -> Options:
        """``given`` checked against the TypedDict ``accepted``: an unknown keyword is a
        ``TypeError`` naming ``method`` and the nearest valid names; a bad ``policy``,
        ``ttl`` or ``tags`` a ``ConfigurationError``, before anything runs.

        Example:
            >>> Options.of(StoreArgs, "store", {"ttl": 60, "tags": ["doc:1"]}).tags
            ('doc:1',)
            >>> Options.of(StoreArgs, "store", {"ttls": 60})
            Traceback (most recent call last):
            ...
            TypeError: LayeredCache.store() got an unexpected keyword argument 'ttls' (did you mean 'ttl'?)
        """  # noqa: E501
        if not given:
            return _DEFAULT_OPTIONS  # the common call: nothing to check
        allowed = accepted.__optional_keys__ | accepted.__required_keys__
        if not given.keys() <= allowed:
            name = next(n for n in given if n not in allowed)
            near = difflib.get_close_matches(name, sorted(allowed), n=2)
            hint = f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""
            raise TypeError(
                f"LayeredCache.{method}() got an unexpected keyword argument {name!r}{hint}"
            )
        get = given.get
        policy = get("policy", "use")
        if policy not in POLICIES:
            raise ConfigurationError(f"policy must be one of {POLICIES}, not {policy!r}")
        encode, decode = get("encode"), get("decode")
        for name, fn in (("encode", encode), ("decode", decode)):
            if fn is not None and not callable(fn):
                raise ConfigurationError(f"{name} must be callable, not {type(fn).__name__}")
        return cls(
            get("context"),
            get("template_version", ""),  # type: ignore[arg-type]  # prepare() checks it
            policy,
            check_ttl(get("ttl")),
            check_tags(get("tags")) if "tags" in given else (),
            get("tokens"),
            bool(get("verbatim", False)),
            bool(get("exact", True)),
            encode,  # type: ignore[arg-type]
            decode,  # type: ignore[arg-type]
        )


_DEFAULT_OPTIONS = Options()


@dataclass(frozen=True)
class Request:
    prompt: str
    normalized: str
    namespace: str
    llm_hash: str
    template_version: str
    context_hash: str
    template: tuple[str, str] | None  # (template name, canonical parameters)
    verbatim: bool = False  # keyed on the prompt exactly as given (tool arguments)
    casefold: bool = True  # how ``normalized`` was made from ``prompt``


@dataclass(frozen=True)
class Keys:
    exact: str
    template: str | None
    _base: tuple[str, ...]

    @property
    def primary(self) -> str:
        return self.template or self.exact

    @property
    def entry_scope(self) -> str:
        """What an answer depends on besides the question (namespace, version, model,
        template version, context), hashed; hashed only when the semantic path needs it.

        Not the vector filter by itself: see :meth:`vector_scope`.
        """
        return _scope(self._base)

    def vector_scope(self, embedder: str) -> str:
        """The semantic layer's filter: the entry scope and an :func:`embedder_tag`."""
        return vector_scope(self.entry_scope, embedder)


def version_counter(namespace: str) -> str:
    return f"version:{namespace}"


def _check_text(name: str, value: Any, *, limit: int | None = None) -> str:
    if not isinstance(value, str):
        raise ConfigurationError(
            f"{name} must be a str, not {type(value).__name__}"
            + (" (decode bytes first)" if isinstance(value, bytes | bytearray) else "")
        )
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"{name} is not valid Unicode (lone surrogate at position {exc.start})"
        ) from exc
    if limit is not None and size > limit:
        raise ConfigurationError(f"{name} is {size} bytes; the limit is {limit} (max_prompt_bytes)")
    return value


def check_name(value: Any, what: str = "namespace", *, allow_none: bool = False) -> Any:
    """A namespace (or tag) that reaches a backend filter: a non-empty, valid-Unicode str
    (``None`` too where ``allow_none``: every namespace). Anything else, say a dict parsed
    from a JSON body (``{"$ne": "x"}`` is an operator to Chroma), is a ConfigurationError
    before any backend is called."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigurationError(
            f"{what} must be a non-empty str, not {type(value).__name__} {value!r:.80}"
        )
    return _check_text(what, value)


def check_tags(tags: Any) -> tuple[str, ...]:
    """Tags as a tuple of non-empty strings; one string is refused (it is not a list)."""
    if isinstance(tags, str | bytes | bytearray):
        raise ConfigurationError(
            f"tags must be a list of strings, not one string: use tags=[{tags!r}]"
        )
    try:
        out = tuple(tags)
    except TypeError as exc:
        raise ConfigurationError(f"tags must be a list of strings, not {tags!r}") from exc
    if any(not isinstance(t, str) or not t for t in out):
        raise ConfigurationError("tags must be non-empty strings")
    for tag in out:
        _check_text("tag", tag)
    return out


def check_ttl(ttl: Any) -> float | None:
    """``None`` (the policy's TTL) or a finite number of seconds >= 0 (0: do not keep)."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise ConfigurationError(f"ttl must be a number of seconds or None, not {ttl!r}")
    if not math.isfinite(ttl) or ttl < 0:
        raise ConfigurationError(f"ttl must be a finite number >= 0, not {ttl!r}")
    return float(ttl)


def context_hash(context: Any) -> str:
    """Hash of everything besides the question that changes the answer (scope)."""
    if context is None:
        return ""
    if isinstance(context, str):
        return digest(_check_text("context", context))
    if isinstance(context, Mapping | Sequence) and not isinstance(context, bytes | bytearray):
        try:
            check_depth(context)
            return digest(canonical_json(context))
        except (AgentCacheError, ValueError, RecursionError) as exc:  # surrogates, depth
            raise ConfigurationError(f"context must be str or JSON-like: {exc}") from exc
    raise ConfigurationError(f"context must be str, a list or a dict, not {type(context).__name__}")


def prepare(
    prompt: Any,
    *,
    llm_string: Any,
    namespace: Any,
    context: Any,
    template_version: Any,
    casefold: bool,
    templates: Sequence[Template],
    max_prompt_bytes: int = MAX_PROMPT_BYTES,
    verbatim: bool = False,
) -> Request:
    """Validate the inputs and compute everything the key needs. Raises ConfigurationError.

    ``verbatim`` keys on the prompt exactly as given (tool and step arguments are data:
    ``/data/Report.txt`` is not ``/data/report.txt``); otherwise the prompt is normalized
    (:func:`agent_cache.keys.normalize`).
    """
    prompt = _check_text("prompt", prompt, limit=max_prompt_bytes)
    llm_string = _check_text("llm_string", llm_string)
    namespace = _check_text("namespace", namespace)
    template_version = _check_text("template_version", template_version)
    if not namespace:
        raise ConfigurationError("namespace must be a non-empty str")
    normalized = prompt if verbatim else normalize(prompt, casefold=casefold)
    if not normalized:
        raise ConfigurationError("prompt is empty" + ("" if verbatim else " after normalization"))
    template = None
    for t in templates:
        params = t.match(normalized)
        if params is not None:
            template = (t.name, canonical_json(params))
            break
    return Request(
        prompt=prompt,
        normalized=normalized,
        namespace=namespace,
        llm_hash=_llm_hash(llm_string),
        template_version=template_version,
        context_hash=context_hash(context),
        template=template,
        verbatim=verbatim,
        casefold=casefold,
    )


@functools.lru_cache(maxsize=1024)
def _llm_hash(llm_string: str) -> str:
    return digest(llm_string)[:32]  # model strings repeat: hash each once


@functools.lru_cache(maxsize=4096)
def _scope(base: tuple[str, ...]) -> str:
    return digest("scope", *base)[:40]


#: Bumped if what an embedder tag hashes changes, so old tags never match new ones.
_TAG_FORMAT = "embedder-1"


@functools.lru_cache(maxsize=256)
def embedder_tag(identity: str, dimension: int) -> str:
    """The vector space an embedding lives in: the embedder's identity (see
    :func:`agent_cache.embedders.embedder_identity`) and the vector's dimension, hashed.

    Every stored vector and every query is L2-normalized (the
    :class:`~agent_cache.protocols.Embedder` contract, enforced by the stores), so
    normalization is one fixed convention, named in ``_TAG_FORMAT``. Only vectors with
    the same tag are ever compared: two models' cosines mean nothing.
    """
    return digest(_TAG_FORMAT, identity, str(int(dimension)))[:16]


# a first word that makes a text typed with no question mark a question
_ASKS = frozenset(
    "how what which why when where who whom whose is are was were am do does did can could "
    "would should shall will may might must has have had".split()
)
_MARKS = " ?!"


def asked_once(text: str) -> str | None:
    """``text`` ending with one question mark, when it is a question typed with none or
    with several marks ("Can dogs eat grapes" -> "Can dogs eat grapes?", "Why??" and
    "Why?!" -> "Why?"); None when it ends with one already, or is no question (a
    statement or request keeps its own ending)."""
    stripped = text.rstrip(_MARKS)
    ending = text[len(stripped) :].strip()
    if not stripped or ending == "?" or len(text) > _ASKED_ONCE_CHARS:
        return None
    first = stripped.split(None, 1)[0].lower().strip("\"'(")
    if "?" not in ending and (ending or stripped.endswith(".") or first not in _ASKS):
        return None  # "Reset my password." is no question; "Is it safe." is not typed so
    return stripped + "?"  # a full stop is kept: "my acct no.??" asks "my acct no.?"


#: Past this length the text is no short question (a RAG turn): searched as written.
_ASKED_ONCE_CHARS = 500


def embedded_text(prompt: str) -> str:
    """The text the semantic layer embeds for ``prompt``, stored or looked up alike: a
    question typed with no mark or several ends with one (:func:`asked_once`), since the
    embedder reads the marks ("is it safe for dogs to eat grapes" / "Can dogs eat
    grapes?" at 0.913 without, over the 0.92 threshold with one)."""
    return asked_once(prompt) or prompt


def vector_scope(entry: str, embedder: str) -> str:
    """The scope vectors are stored under and searched in: ``"<entry scope>.<tag>"``.

    The entry scope stays readable in front (:func:`entry_scope`), so an export can be
    re-embedded by another embedder into the same entry scope.
    """
    return f"{entry}.{embedder}"


def entry_scope(scope: str) -> str:
    """The entry scope of a vector scope (a scope without a tag is returned as is)."""
    return scope.partition(".")[0]


def keys_for(req: Request, version: int) -> Keys:
    base = (req.namespace, str(version), req.llm_hash, req.template_version, req.context_hash)
    kind = "verbatim" if req.verbatim else "exact"
    exact = f"{KEY_PREFIX}:{digest(kind, *base, req.normalized)}"
    template = None
    if req.template is not None:
        template = f"{KEY_PREFIX}:{digest('template', *base, *req.template)}"
    return Keys(exact=exact, template=template, _base=base)


@dataclass(frozen=True, slots=True)
class Record:
    """One entry's record, stored as JSON text in the exact layer (never pickle).

    The one encoder (:meth:`encode`) and decoder (:meth:`decode`) of the stored format,
    a JSON object with one-letter fields: ``p`` (the prompt), ``r`` (the response),
    ``t`` (the usage the model reported), ``c`` (when it was written), ``tier`` (the TTL
    tier), ``x`` (when it expires) and, when set, ``k`` (the key it was written under).
    A decoded record keeps what it can use of fields another writer filled oddly: a
    ``p`` that is not a string, a ``c`` or ``x`` that is not a number, a ``tier`` that is
    not a string read as absent (``None``); ``t`` is kept as stored (see :attr:`usage`).

    Example:
        >>> text = Record("What is RAG?", "Retrieval.", created=1.0).encode()
        >>> text
        '{"p": "What is RAG?", "r": "Retrieval.", "t": null, "c": 1.0, "tier": "", "x": null}'
        >>> Record.decode(text, "k").response
        'Retrieval.'
    """

    prompt: str | None
    response: Any
    tokens: Any = None
    created: float | None = None
    tier: str | None = ""
    expires: float | None = None
    key: str | None = None

    def encode(self) -> str:
        """The JSON text; ``SerializationError`` (nothing is written) for values JSON
        cannot hold (objects, NaN, infinity), text that is not valid Unicode (a lone
        surrogate, which no store can encode) and nesting deeper than
        :data:`MAX_JSON_DEPTH`. Values that would read back as something else are refused
        before, where the caller's own value is stored (:func:`check_exact`); a codec's
        payload is its codec's to restore."""
        check_depth(self.response)
        fields: dict[str, Any] = {
            "p": self.prompt,
            "r": self.response,
            "t": self.tokens,
            "c": self.created,
            "tier": self.tier,
            "x": self.expires,
        }
        if self.key is not None:
            fields["k"] = self.key  # the key it is written under: a read checks it (mismatch)
        try:
            text = json.dumps(fields, ensure_ascii=False, allow_nan=False)
            text.encode("utf-8")  # a lone surrogate: UnicodeEncodeError (a ValueError)
        except (TypeError, ValueError, RecursionError) as exc:
            raise SerializationError(f"response is not JSON-serializable: {exc}") from exc
        return text

    @classmethod
    def decode(cls, raw: str, key: str) -> Record:
        """The record in ``raw`` (read under ``key``); ``SerializationError`` for text
        that is not a JSON object with a response."""
        try:
            fields = json.loads(raw)
        except (TypeError, ValueError, RecursionError) as exc:
            raise SerializationError("corrupt cache record", key=key) from exc
        if not isinstance(fields, dict) or "r" not in fields:
            raise SerializationError("corrupt cache record", key=key)
        prompt, created, tier = fields.get("p"), fields.get("c"), fields.get("tier")
        expires, written = fields.get("x"), fields.get("k")
        return cls(
            prompt if isinstance(prompt, str) else None,
            fields["r"],
            fields.get("t"),
            created if isinstance(created, int | float) else None,
            tier if isinstance(tier, str) else None,
            expires if isinstance(expires, int | float) else None,
            None if written is None else str(written),
        )

    @property
    def usage(self) -> Usage | None:
        """The tokens the model call reported; ``None`` when none were, or when another
        writer filled ``t`` oddly (the saving is then estimated)."""
        try:
            return usage_from(self.tokens)
        except ConfigurationError:
            return None

    @property
    def expires_at(self) -> float | None:
        return None if self.expires is None else float(self.expires)

    def mismatch(self, key: str, req: Request | None) -> str | None:
        """Why this record, read under ``key``, is not the request's answer, or ``None``.

        A record names the key it was written under (``k``: the hash of namespace,
        version, model, template version, context and normalized prompt); a record under
        another key (a restored or mixed-up database file) is refused. With ``req`` (an
        exact hit) the stored prompt must also normalize to the request's: records
        written before ``k`` existed, and by writers that do not set it, are checked
        that way.
        """
        if self.key is not None and self.key != key:
            return "key"
        if req is None:
            return None
        prompt = self.prompt
        if prompt is None:
            return "prompt"
        if prompt == req.prompt:
            return None  # the common case: no second normalization
        stored = prompt if req.verbatim else normalize(prompt, casefold=req.casefold)
        return None if stored == req.normalized else "prompt"


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse lists/objects nested deeper than ``limit`` (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth > limit:
                raise SerializationError(
                    f"value is nested deeper than {limit} levels (MAX_JSON_DEPTH)"
                )
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


_EXACT = frozenset({str, int, float, bool, type(None)})


def check_exact(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse (``SerializationError``) a value that would not read back equal, with equal
    types, from its JSON record: a tuple (read back as a list), a mapping key that is
    not a ``str`` (``{1: "a"}`` reads back ``{"1": "a"}``, and ``{1: .., "1": ..}`` loses
    one), a subclass of ``str``/``int``/``float``/``dict``/``list`` (an ``IntEnum``
    reads back an ``int``), any other type; and nesting deeper than ``limit``. One
    iterative walk over the value's containers (no second encoding)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    exact = _EXACT
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind in exact:
            continue
        if kind is dict or kind is list:
            if depth > limit:
                raise SerializationError(
                    f"value is nested deeper than {limit} levels (MAX_JSON_DEPTH)"
                )
            if kind is dict:
                for key in item:
                    if type(key) is not str:
                        raise _read_back_error(
                            f"a mapping key {key!r:.60} ({type(key).__name__}) would read "
                            "back as a str: only str keys are stored"
                        )
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
            continue
        raise _inexact(item)


def _read_back_error(message: str) -> SerializationError:
    """A JSON-encodable value that would read back different (``inexact = True``)."""
    exc = SerializationError(message)
    exc.inexact = True  # type: ignore[attr-defined]
    return exc


def _inexact(item: Any) -> SerializationError:
    name = type(item).__name__
    if isinstance(item, tuple):
        return _read_back_error(f"a {name} would read back as a list: store a list")
    for base in (int, float, str, dict, list):
        if isinstance(item, base):
            return _read_back_error(
                f"a {name} (a {base.__name__} subclass) would read back as a plain "
                f"{base.__name__}: store the {base.__name__}"
            )
    return SerializationError(f"response is not JSON-serializable: a {name}")


def check_json(response: Any, *, exact: bool = True) -> None:
    """Refuse (``SerializationError``) what :meth:`Record.encode` refuses and, with
    ``exact``, what would not read back equal with equal types (:func:`check_exact`)."""
    if exact:
        check_exact(response)
    Record("", response, created=0.0).encode()


def estimate_tokens(response: Any) -> int:
    """~4 characters a token: used for "tokens saved" when the model's count is unknown."""
    text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
    return max(1, math.ceil(len(text) / 4))
