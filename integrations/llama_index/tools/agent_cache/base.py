"""``cache_tool``: a LlamaIndex tool whose results are reused for the same arguments."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, cast

from llama_index.core.base.llms.types import ContentBlock, TextBlock
from llama_index.core.bridge.pydantic import TypeAdapter
from llama_index.core.tools import FunctionTool
from llama_index.core.tools.types import AsyncBaseTool, BaseTool, ToolMetadata, ToolOutput
from llama_index.llms.agent_cache._cache import CacheArg, resolve_cache

from agent_cache import NOT_STORED, ConfigurationError, ToolCache
from agent_cache.keys import canonical_json

__all__ = ["CachedTool", "cache_tool"]

log = logging.getLogger("agent_cache.llama_index")
_BLOCKS: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])


def _encode(output: ToolOutput) -> Any:
    """The stored form of a tool output: its content blocks and, when JSON, raw output
    (``NOT_STORED`` for an error output: returned, never cached)."""
    if output.is_error:
        return NOT_STORED
    try:
        blocks = json.loads(_BLOCKS.dump_json(output.blocks))
    except Exception:
        blocks = [{"block_type": "text", "text": output.content}]
    payload: dict[str, Any] = {"content": output.content, "blocks": blocks}
    try:
        json.dumps(output.raw_output, allow_nan=False)
        payload["raw_output"] = output.raw_output
    except (TypeError, ValueError):
        pass  # replayed as the text content
    return payload


class CachedTool(AsyncBaseTool):
    """A tool whose results are cached by tool name + version + canonical arguments.

    Same metadata as the wrapped tool (name, description, schema, ``return_direct``), so
    agents see no difference. Errors (exceptions and ``is_error`` outputs) are never
    cached. A replayed output has the stored content blocks; its ``raw_output`` is the
    stored one when that was JSON, else the text content.

    Args:
        tool: the tool to wrap (``FunctionTool``, any ``BaseTool`` / ``AsyncBaseTool``).
        tool_cache: the core :class:`agent_cache.ToolCache` holding the results.
        version: bump to stop reusing results of an older implementation.
        ttl: seconds a result stays valid (``None``: the ``ToolCache``'s default).
        tags: tags stored with every result, for ``cache.invalidate``.
    """

    def __init__(
        self,
        tool: BaseTool,
        tool_cache: ToolCache,
        *,
        version: str = "",
        ttl: float | None = None,
        tags: Iterable[str] = (),
    ) -> None:
        if isinstance(tool, FunctionTool) and tool.requires_context:
            raise ConfigurationError(
                f"tool {tool.metadata.get_name()!r} takes the workflow Context; "
                "its results depend on run state and cannot be cached"
            )
        self._tool = tool
        self.tool_cache = tool_cache
        self.version = version
        self.ttl = ttl
        self.tags = tuple(tags)

    @property
    def metadata(self) -> ToolMetadata:
        """The wrapped tool's metadata, unchanged."""
        return self._tool.metadata

    @property
    def tool(self) -> BaseTool:
        """The wrapped tool."""
        return self._tool

    def _key_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """Arguments by name (positional ones mapped onto the schema), or ``None`` when
        they have no JSON form (the call then bypasses the cache)."""
        names = list(self.metadata.get_parameters_dict().get("properties", {}))
        named = dict(kwargs)
        extra = []
        for i, value in enumerate(args):
            if i < len(names) and names[i] not in named:
                named[names[i]] = value
            else:
                extra.append(value)
        if extra:
            named["__args__"] = extra
        try:
            canonical_json(named)
        except ConfigurationError:
            log.debug(
                "agent-cache: %s called with non-JSON arguments: not cached", self.metadata.name
            )
            return None
        return named

    def _output(self, payload: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ToolOutput:
        """A stored payload as a tool output (raises on a payload that is not one: the
        core then evicts it and runs the tool)."""
        if not isinstance(payload, dict):
            raise TypeError(f"not a stored tool output: {type(payload).__name__}")
        try:
            blocks = _BLOCKS.validate_python(payload["blocks"])
        except Exception:
            blocks = [TextBlock(text=str(payload.get("content", "")))]
        return ToolOutput(
            tool_name=self.metadata.get_name(),
            blocks=blocks,
            raw_input={"args": list(args), "kwargs": kwargs},
            raw_output=payload.get("raw_output", payload.get("content")),
        )

    def _call_tool(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ToolOutput:
        call = self._tool.call if isinstance(self._tool, AsyncBaseTool) else self._tool
        return call(*args, **kwargs)

    async def _acall_tool(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ToolOutput:
        if isinstance(self._tool, AsyncBaseTool):
            return await self._tool.acall(*args, **kwargs)
        return await asyncio.to_thread(self._tool, *args, **kwargs)

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Run the tool, or return the result stored for the same arguments."""
        run = functools.partial(self._call_tool, args, kwargs)
        return cast(ToolOutput, self._step(self.tool_cache.call, run, args, kwargs)())

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Async twin of :meth:`call` (uses the wrapped tool's own ``acall``)."""
        run = functools.partial(self._acall_tool, args, kwargs)
        return cast(ToolOutput, await self._step(self.tool_cache.acall, run, args, kwargs)())

    def _step(
        self,
        cached: Callable[..., Any],
        run: Callable[[], Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Callable[[], Any]:
        """A call's one step: ``cached`` (``ToolCache.call``, or ``acall``) around ``run``
        (the wrapped tool's call, or its awaitable), or ``run`` itself when the arguments
        have no JSON form (the call bypasses the cache)."""
        named = self._key_args(args, kwargs)
        if named is None:
            return run
        return functools.partial(
            cached, self.metadata.get_name(), named, lambda **_: run(),
            version=self.version, ttl=self.ttl, tags=self.tags,
            encode=_encode, decode=lambda payload: self._output(payload, args, kwargs),
        )  # fmt: skip


def cache_tool(
    tool: BaseTool | Callable[..., Any],
    ttl: float | None = None,
    *,
    cache: CacheArg = None,
    version: str = "",
    namespace: str = "tools",
    tags: Iterable[str] = (),
) -> CachedTool:
    """Wrap a LlamaIndex tool (or a plain function) so that results are reused.

    Calls with the same canonical arguments (key order, whitespace and ``1`` vs ``1.0``
    don't matter; positional and keyword forms are the same call) within ``ttl`` seconds
    return the stored result instead of running the tool. Exact matching only.

    Args:
        tool: a ``FunctionTool``, ``BaseTool`` or ``AsyncBaseTool``; a plain function is
            turned into a ``FunctionTool`` first.
        ttl: seconds a result stays valid (``None``: the cache's TTL policy).
        cache: a :class:`agent_cache.LayeredCache`, a directory, or ``None`` for the
            shared default ``.agent_cache``.
        version: bump when the tool's behaviour changes.
        namespace: where results live (exact-only in ``LayeredCache``'s defaults).
        tags: tags stored with every result, for ``cache.invalidate(tags=[...])``.

    Example (``get_weather`` a function, ``llm`` a LlamaIndex LLM)::

        weather = cache_tool(FunctionTool.from_defaults(get_weather), ttl=600)
        agent = FunctionAgent(tools=[weather], llm=CachedLLM(llm=llm))
    """
    if not isinstance(tool, BaseTool):
        if not callable(tool):
            raise ConfigurationError(f"cannot cache a {type(tool).__name__}: not a tool")
        tool = FunctionTool.from_defaults(tool)
    tools = ToolCache(resolve_cache(cache), ttl=ttl, namespace=namespace)
    return CachedTool(tool, tools, version=version, ttl=ttl, tags=tags)
