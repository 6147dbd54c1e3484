"""MCP servers on the capability seam: each server's tools listed in a recorded step, called as tool steps.

For an agent with ``mcp_servers``, :meth:`MCPCapability.run_tools` runs once per run, before
``on_agent_start``: for each server, in order, the step ``{agent}.mcp.list.{server}`` asks the
server for its tools and records the listing. A recovered run replays the recorded listing (the
server is not asked again) and so sees the same tools under the same names. The tools are plain
:class:`~helix_dbos.tool.Tool` s, so each call is the ordinary ``{agent}.tool.{name}`` step, with
the same approval gates, hooks, usage and tracing as any tool.

A server that cannot be listed is recorded as such (the run goes on without its tools, and the
warning names it); a call that fails is the tool error the model sees.

The listing steps are new steps at the start of a run, so they sit behind the replay patch
:data:`MCP_TOOLS_PATCH`: a run recorded before its agent had MCP servers replays without them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from helix_dbos.capability import RunCapability
from helix_dbos.errors import MCPServerError
from helix_dbos.mcp.servers import MCPServer
from helix_dbos.mcp.tools import (
    ListedTool,
    MCPCallResult,
    MCPListingStepOutput,
    build_server_tools,
    refuse_clashes,
)
from helix_dbos.orchestration.state_operations import build_effective_tools
from helix_dbos.runtime.aio import background_loop

if TYPE_CHECKING:
    from helix_dbos.capability import CapabilityRun
    from helix_dbos.tool import Tool

MCP_TOOLS_PATCH = "helix-mcp-tool-listing"
"""Runs of agents with MCP servers list their tools in recorded steps (``{agent}.mcp.list.{server}``)."""

_log = logging.getLogger("helix_dbos.mcp")


def list_tools_step(server: MCPServer) -> MCPListingStepOutput:
    """``{agent}.mcp.list.{server}``: ask the server for its tools; a failure is recorded, not raised."""
    from helix_dbos.mcp import connection

    try:
        listed = background_loop.run(connection.list_tools(server))
    except MCPServerError as exc:
        _log.warning("%s; the run goes on without its tools", exc.message, extra={"mcp_server": server.name})
        return {"tools": [], "error": exc.message}
    return {"tools": [t.model_dump(mode="json") for t in listed], "error": None}


async def call_server_tool(server: MCPServer, tool_name: str, arguments: dict[str, Any]) -> MCPCallResult:
    """Call a tool of the server on this process's open session to it (runs inside the tool's step)."""
    from helix_dbos.mcp import connection

    return await connection.call_tool(server, tool_name, arguments)


class MCPCapability(RunCapability):
    """Adds each of the agent's MCP servers' tools to the run, from recorded listings."""

    name = "mcp"
    replay_patches = (MCP_TOOLS_PATCH,)

    def run_tools(self, run: CapabilityRun) -> list[Tool]:
        servers = run.agent.mcp_servers
        if not servers or not DBOS.patch(MCP_TOOLS_PATCH):
            return []
        taken = [t.name for t in build_effective_tools(run.agent)]
        tools: list[Tool] = []
        for server in servers:
            listing = run.record_step(self.name, f"list.{server.name}", list_tools_step, server)
            listed = [ListedTool.model_validate(t) for t in listing["tools"]]
            server_tools = build_server_tools(server, listed, call_server_tool)
            refuse_clashes(taken, server_tools, server)
            taken.extend(t.name for t in server_tools)
            tools.extend(server_tools)
        return tools


__all__ = ["MCP_TOOLS_PATCH", "MCPCapability", "call_server_tool", "list_tools_step"]
