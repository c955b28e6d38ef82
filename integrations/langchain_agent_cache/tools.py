"""``cache_tool``: a LangChain tool whose results are reused for the same arguments.

The returned tool has the wrapped tool's name, description and schema, so models and
``ToolNode``/``create_agent`` see no difference. Results are keyed by tool name + tool
version + the canonical JSON of the arguments (through the core's ``ToolCache``), so key
order, whitespace and ``1`` vs ``1.0`` don't matter; injected arguments (tool-call ids,
graph state) are left out of the key.
"""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, Tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field

from agent_cache import NOT_STORED, ConfigurationError, LayeredCache, ToolCache
from agent_cache.keys import canonical_json
from langchain_agent_cache._codec import Uncacheable, decode_value, encode_value, jsonable
from langchain_agent_cache._resolve import layered_from

__all__ = ["CachedTool", "cache_tool", "is_side_effecting"]

log = logging.getLogger("agent_cache.langchain")

KeyFunction = Callable[[dict[str, Any]], Any]
ScopeFunction = Callable[[RunnableConfig], str]
_SIDE_EFFECT_TAGS = frozenset({"side_effects", "side-effects", "side_effecting"})


def is_side_effecting(tool: BaseTool) -> bool:
    """Whether ``tool`` is marked as having side effects (so its results must not be
    reused): ``metadata={"side_effects": True}`` or ``{"cacheable": False}``, or a tag
    ``"side_effects"``.

    Example:
        >>> from langchain_core.tools import tool
        >>> @tool
        ... def send_email(to: str) -> str:
        ...     '''Send an email.'''
        ...     return "sent"
        >>> send_email.metadata = {"side_effects": True}
        >>> is_side_effecting(send_email)
        True
    """
    meta = tool.metadata or {}
    if meta.get("side_effects") is True or meta.get("cacheable") is False:
        return True
    return bool(_SIDE_EFFECT_TAGS.intersection(tool.tags or ()))


def _config_param(fn: Callable[..., Any]) -> str | None:
    """The name of ``fn``'s ``RunnableConfig`` parameter (as ``BaseTool.run`` finds it)."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: no config parameter we can see
        return None
    return next((name for name, hint in hints.items() if hint is RunnableConfig), None)


def _wants_run_manager(fn: Callable[..., Any]) -> bool:
    return "run_manager" in inspect.signature(fn).parameters


def _fields(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        return set(schema.get("properties", {}))
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return set(schema.model_fields)
    return set()


class CachedTool(BaseTool):
    """A tool that reuses the wrapped tool's results; build it with :func:`cache_tool`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tool: BaseTool = Field(exclude=True)
    tool_cache: ToolCache = Field(exclude=True)
    version: str = ""
    ttl: float | None = None
    key: KeyFunction | None = Field(default=None, exclude=True)
    scope: str | ScopeFunction | None = Field(default=None, exclude=True)
    cache_tags: tuple[str, ...] = ()

    # ------------------------------------------------------------------ same schema
    @property
    def args(self) -> dict[str, Any]:
        return self.tool.args

    def get_input_schema(self, config: RunnableConfig | None = None) -> Any:
        return self.tool.get_input_schema(config)

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return self.tool._to_args_and_kwargs(tool_input, tool_call_id)

    # ------------------------------------------------------------------ keys
    def _key_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        injected = _fields(self.tool.args_schema) - _fields(self.tool.tool_call_schema)
        visible = {k: v for k, v in kwargs.items() if k not in injected}
        if args:
            visible["__input__"] = list(args)
        if self.key is not None:
            custom = self.key(visible)
            visible = dict(custom) if isinstance(custom, Mapping) else {"key": custom}
        return jsonable(visible)  # type: ignore[no-any-return]

    def _version(self, config: RunnableConfig | None) -> str:
        scope = self.scope(config or {}) if callable(self.scope) else self.scope
        if scope is None:
            return self.version
        if not isinstance(scope, str):
            raise ConfigurationError(f"tool scope must be a str, not {type(scope).__name__}")
        return canonical_json([self.version, scope])  # unambiguous: a JSON pair

    def _encode(self, raw: Any) -> Any:
        """A result's stored form; ``NOT_STORED`` when it has no faithful JSON form."""
        try:
            return encode_value(raw)
        except Uncacheable as exc:
            log.info("agent-cache: %s result not cached: %s", self.name, exc)
            return NOT_STORED

    # ------------------------------------------------------------------ run
    def _run(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        return self._step(self.tool_cache.call, args, kwargs, config, run_manager)()

    async def _arun(
        self,
        *args: Any,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> Any:
        step = self._step(self.tool_cache.acall, args, kwargs, config, run_manager, aio=True)
        return await step()

    def _step(
        self,
        cached: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        config: RunnableConfig,
        run_manager: Any,
        *,
        aio: bool = False,
    ) -> Callable[[], Any]:
        """The one call of a run: ``cached`` (``ToolCache.call``, or ``acall``) around the
        wrapped tool's ``_run`` (``_arun`` when ``aio``), given the run manager and the
        config when its signature asks for them (``BaseTool``'s own ``_arun`` runs
        ``_run`` in a thread: ``_run``'s signature is the one checked)."""
        run = self.tool._arun if aio else self.tool._run
        own_arun = aio and type(self.tool)._arun is not BaseTool._arun
        checked = run if own_arun else self.tool._run
        call = dict(kwargs)
        if _wants_run_manager(checked):
            call["run_manager"] = run_manager
        if param := _config_param(checked):
            call[param] = config
        return functools.partial(
            cached, self.name, self._key_args(args, kwargs), lambda **_: run(*args, **call),
            version=self._version(config), ttl=self.ttl, tags=self.cache_tags,
            encode=self._encode, decode=decode_value,
        )  # fmt: skip


def cache_tool(
    tool: BaseTool,
    *,
    ttl: float | None = None,
    cache: Any = None,
    key: KeyFunction | None = None,
    scope: str | ScopeFunction | None = None,
    version: str | None = None,
    tags: tuple[str, ...] = (),
    force: bool = False,
    namespace: str = "tools",
) -> CachedTool:
    """Wrap ``tool`` so that calls with the same arguments reuse its result.

    Exceptions (including ``ToolException``) and error results are never cached; the
    wrapped tool's ``handle_tool_error`` still applies. Works sync and async, with
    ``create_agent`` and LangGraph's ``ToolNode``.

    Args:
        tool: the tool to wrap.
        ttl: seconds a result stays valid (``None``: the cache's TTL policy).
        cache: an ``AgentCache`` or ``LayeredCache``; default: the shared embedded cache.
        key: maps the arguments to what identifies the result (drop a request id,
            normalize a city name); a dict or a string.
        scope: a string, or a function of the run's ``RunnableConfig`` returning one
            (e.g. the user id), keeping results of different scopes apart.
        version: bump it when the tool's behavior changes (default: the tool's
            ``metadata["version"]`` or ``""``).
        tags: tags on every stored result, for ``LayeredCache.invalidate``.
        force: cache a tool marked side-effecting anyway (see :func:`is_side_effecting`).
        namespace: the core namespace for tool results (exact-only by default).

    Raises:
        ConfigurationError: the tool is marked side-effecting and ``force`` is False.

    Example (``web_search`` a LangChain tool, ``model`` a chat model)::

        search = cache_tool(web_search, ttl=600)
        agent = create_agent(model, tools=[search])
    """
    _check_cacheable(tool, force)
    layered: LayeredCache = layered_from(cache)
    if version is None:
        version = str((tool.metadata or {}).get("version", ""))
    return CachedTool(
        **{field: getattr(tool, field) for field in _ADVERTISED},
        args_schema=_advertised_schema(tool),
        tool=tool,
        tool_cache=ToolCache(layered, ttl=ttl, namespace=namespace),
        version=version,
        ttl=ttl,
        key=key,
        scope=scope,
        cache_tags=tuple(tags),
    )


#: The wrapped tool's fields a ``CachedTool`` shows as its own (beside its schema).
_ADVERTISED = (
    "name", "description", "return_direct", "verbose", "tags", "metadata",
    "handle_tool_error", "handle_validation_error", "response_format", "extras",
)  # fmt: skip


def _check_cacheable(tool: Any, force: bool) -> None:
    """Raises ``ConfigurationError`` for what ``cache_tool`` refuses to wrap."""
    if not isinstance(tool, BaseTool):
        raise ConfigurationError(f"cache_tool needs a BaseTool, not {type(tool).__name__}")
    if isinstance(tool, CachedTool):
        raise ConfigurationError(f"tool {tool.name!r} is already cached")
    if is_side_effecting(tool) and not force:
        raise ConfigurationError(
            f"tool {tool.name!r} is marked side-effecting; its results must not be reused. "
            "Pass force=True to cache it anyway."
        )


def _advertised_schema(tool: BaseTool) -> Any:
    """The wrapped tool's argument schema; a single-input ``Tool`` (no schema) is
    advertised as ``{"__arg1": str}``, as LangChain shows it."""
    if tool.args_schema is None and isinstance(tool, Tool):
        return convert_to_openai_tool(tool)["function"]["parameters"]
    return tool.args_schema
