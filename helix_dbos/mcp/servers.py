"""Where an agent's MCP tools come from: one frozen config per server, the only thing a run keeps.

A config is data (a command line, or a URL and headers), never a connection: the runtime opens a
fresh session from it for each listing and each call (:mod:`helix_dbos.mcp.connection`), so a run
recovered in another process re-binds from the config instead of holding a dead pipe.

Building one checks that the ``mcp`` extra is installed, so a missing extra is one clear line at
definition time (``pip install 'helix-dbos[mcp]'``), before any run starts.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

MCP_INSTALL_HINT = "pip install 'helix-dbos[mcp]'"
"""How to get the MCP client, named in the error raised when it is missing."""

DEFAULT_TOOL_SEPARATOR = "__"
"""Between a server's name and its tools' names, as the seeds' ``subagent__`` / ``companion__``."""

_TOOL_PREFIX = re.compile(r"[A-Za-z0-9_-]{0,48}")
_SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,47}")  # fullmatch: a step name part and a tool name part


def require_mcp_sdk() -> None:
    """Raise ``ModuleNotFoundError`` with the install hint when the ``mcp`` package is missing."""
    try:
        found = importlib.util.find_spec("mcp") is not None
    except ImportError:  # an import system that refuses the name outright
        found = False
    if not found:
        raise ModuleNotFoundError(f"MCP servers need the mcp package (not installed): {MCP_INSTALL_HINT}", name="mcp")


class MCPServer(BaseModel):
    """What every MCP server config has: a name, how its tools are named and gated, a time limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Names the server in step names (``{agent}.mcp.list.{name}``) and, by default, prefixes its tools."""
    tool_prefix: str | None = None
    """What goes before each tool's name; ``None``: ``{name}__``. ``""`` exposes the server's names as is."""
    require_approval: bool | frozenset[str] = False
    """``True`` gates every tool of the server behind a user's approval; a set gates the tools it names
    (the server's own names, without the prefix). Approval reuses the human-in-the-loop machinery."""
    approval_timeout_ms: int | None = Field(default=None, gt=0)
    """How long a gated call waits for the user's decision before it times out (``None``: no limit),
    as ``define_tool(..., timeout_ms=...)`` for a gated tool."""
    timeout_seconds: float = Field(default=30.0, gt=0)
    """Bound on one listing or one call, connecting included; past it the model gets a tool error."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _SERVER_NAME.fullmatch(value):
            raise ValueError(f"MCP server name {value!r}: use 1-48 letters, digits, '_' or '-', starting with one")
        return value

    @field_validator("tool_prefix")
    @classmethod
    def _check_prefix(cls, value: str | None) -> str | None:
        if value is not None and not _TOOL_PREFIX.fullmatch(value):
            raise ValueError(f"tool_prefix {value!r}: use at most 48 letters, digits, '_' or '-'")
        return value

    @field_validator("require_approval", mode="before")
    @classmethod
    def _approval_set(cls, value: Any) -> Any:
        if isinstance(value, bool | str) or value is None:
            return bool(value) if value is None else value
        return frozenset(value)

    def model_post_init(self, context: Any, /) -> None:
        """Refuse early when the ``mcp`` extra is missing (one line naming it)."""
        require_mcp_sdk()

    @property
    def prefix(self) -> str:
        """What the model-facing names of this server's tools start with."""
        return f"{self.name}{DEFAULT_TOOL_SEPARATOR}" if self.tool_prefix is None else self.tool_prefix

    def gates(self, tool_name: str) -> bool:
        """Whether calls of the server's tool ``tool_name`` (its own name) wait for a user's approval."""
        if isinstance(self.require_approval, bool):
            return self.require_approval
        return tool_name in self.require_approval


class MCPServerStdio(MCPServer):
    """An MCP server the runtime starts as a subprocess and talks to over stdin/stdout.

    A fresh process serves each listing and each call, so no process outlives the step that
    needed it and a recovered run starts its own.
    """

    command: str
    """The executable (looked up on ``PATH``)."""
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    """Extra environment variables, over the MCP SDK's safe default environment (not this process's)."""
    cwd: str | None = None


class MCPServerStreamableHTTP(MCPServer):
    """An MCP server reached over streamable HTTP (one session per listing and per call)."""

    url: str
    """The server's MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every request (authorization, for instance)."""


__all__ = [
    "DEFAULT_TOOL_SEPARATOR",
    "MCP_INSTALL_HINT",
    "MCPServer",
    "MCPServerStdio",
    "MCPServerStreamableHTTP",
    "require_mcp_sdk",
]
