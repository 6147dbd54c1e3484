"""Pure: a server's recorded listing -> the helix :class:`~helix_dbos.tool.Tool` s a run exposes.

The listing is what the ``{agent}.mcp.list.{server}`` step recorded, so on replay these
functions see the same listing and build the same tools, names and gates. A tool's ``execute``
is bound here to the server's config and the tool's own name (:data:`CallFn`), not to a session:
whatever process runs the call connects then.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.errors import DefinitionError, MCPToolNameError
from helix_dbos.mcp.servers import MCPServer
from helix_dbos.tool import Tool, ToolContext, check_tool_name

_NOT_IN_A_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")


class ListedTool(BaseModel):
    """One tool as the server listed it (what the listing step records)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """The server's own name for it (what a call sends)."""
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class MCPListingStepOutput(TypedDict):
    """``{agent}.mcp.list.{server}``: the server's tools, or why it could not list them."""

    tools: list[dict[str, Any]]
    """:class:`ListedTool` dumps, in the server's order."""
    error: str | None
    """Set when the server could not be listed: the run goes on without its tools."""


class MCPCallResult(BaseModel):
    """What a tool call returned: the content blocks and the structured result, if any."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    content: list[dict[str, Any]] = Field(default_factory=list)
    structured: dict[str, Any] | None = None

    def text(self) -> str:
        """The text blocks, joined by newlines."""
        return "\n".join(str(c.get("text", "")) for c in self.content if c.get("type") == "text")

    def for_model(self) -> Any:
        """The tool result the model sees: the structured result, else the text, else the blocks."""
        if self.structured is not None:
            return self.structured
        if all(c.get("type") == "text" for c in self.content):
            return self.text()
        return self.content


CallFn = Callable[[MCPServer, str, dict[str, Any]], Awaitable[MCPCallResult]]
"""Calls one tool of a server by its own name (the I/O edge, :func:`helix_dbos.mcp.connection.call_tool`);
whether the tool is retry-safe is the server config's (:meth:`MCPServer.is_retry_safe`)."""


def exposed_name(server: MCPServer, tool_name: str) -> str:
    """The name the model sees: the server's prefix, then the tool's name with what no provider accepts as ``_``."""
    return server.prefix + _NOT_IN_A_TOOL_NAME.sub("_", tool_name)


def build_server_tools(server: MCPServer, listed: Sequence[ListedTool], call: CallFn) -> list[Tool]:
    """The tools of one server; refuses names that are invalid, reserved or taken twice."""
    tools: list[Tool] = []
    origin: dict[str, str] = {}
    for item in listed:
        name = exposed_name(server, item.name)
        try:
            check_tool_name(name)
        except DefinitionError as exc:
            raise MCPToolNameError(
                f"MCP server {server.name!r}: its tool {item.name!r} cannot be exposed as {name!r}: {exc.message}"
            ) from exc
        if name in origin:
            raise MCPToolNameError(
                f"MCP server {server.name!r}: its tools {origin[name]!r} and {item.name!r} both become {name!r}"
            )
        origin[name] = item.name
        gated = server.gates(item.name)
        retry_safe = server.is_retry_safe(item.name)
        schema = dict(item.input_schema)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        tools.append(
            Tool(
                name=name,
                description=item.description,
                execute=_bound_call(server, item.name, call),
                require_approval=gated,
                timeout_ms=server.approval_timeout_ms if gated else None,
                retry_safe=retry_safe,
                unknown_outcome="ask" if retry_safe else server.unknown_outcome,
                parameters_schema=schema,
            )
        )
    return tools


def refuse_clashes(taken: Iterable[str], tools: Sequence[Tool], server: MCPServer) -> None:
    """Refuse a server tool whose exposed name another tool of the agent (or an earlier server) has."""
    seen = set(taken)
    for tool in tools:
        if tool.name in seen:
            raise MCPToolNameError(
                f"MCP server {server.name!r}: tool name {tool.name!r} is already taken by another tool of the "
                "agent; give the server another tool_prefix"
            )


def _bound_call(server: MCPServer, tool_name: str, call: CallFn) -> Callable[[Any, ToolContext], Awaitable[Any]]:
    async def execute(arguments: Any, ctx: ToolContext) -> Any:
        result = await call(server, tool_name, dict(arguments))
        return result.for_model()

    return execute


__all__ = [
    "CallFn",
    "ListedTool",
    "MCPCallResult",
    "MCPListingStepOutput",
    "build_server_tools",
    "exposed_name",
    "refuse_clashes",
]
