"""MCP servers as tool sources of an agent: ``define_agent(..., mcp_servers=[...])``.

An agent lists MCP servers (:class:`MCPServerStdio`, :class:`MCPServerStreamableHTTP`); each run
lists their tools in recorded steps and calls them as ordinary tool steps, on the process's open
session to each server (see :mod:`helix_dbos.mcp.capability`, :mod:`helix_dbos.mcp.sessions` and
``docs/mcp.md``).

This package imports the ``mcp`` SDK only where it talks to a server; building a server config
without the ``mcp`` extra fails at once naming it (``pip install 'helix-dbos[mcp]'``).
"""

from helix_dbos.mcp.servers import (
    DEFAULT_TOOL_SEPARATOR,
    MCP_INSTALL_HINT,
    MCPServer,
    MCPServerStdio,
    MCPServerStreamableHTTP,
)

__all__ = [
    "DEFAULT_TOOL_SEPARATOR",
    "MCP_INSTALL_HINT",
    "MCPServer",
    "MCPServerStdio",
    "MCPServerStreamableHTTP",
]
