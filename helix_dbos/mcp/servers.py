"""Where an agent's MCP tools come from: one frozen config per server, the only thing a run keeps.

A config is data (a command line, or a URL and headers), never a connection: the runtime finds or
opens a session from it for each listing and each call (:mod:`helix_dbos.mcp.sessions`, keyed by
:meth:`MCPServer.connection_key`), so a run recovered in another process re-binds from the config
instead of holding a dead pipe.

Building one checks that the ``mcp`` extra is installed, so a missing extra is one clear line at
definition time (``pip install 'helix-dbos[mcp]'``), before any run starts.
"""

from __future__ import annotations

import importlib.util
import json
import re
from typing import Any, ClassVar, Literal

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
    retry_safe: bool | frozenset[str] = True
    """Whether a call may run again after a crash (``define_tool(..., retry_safe=...)``). ``False``
    marks every tool of the server as one that must not run twice; a set names the tools that
    *may* (the server's own names), so a tool the server adds later counts as not retry-safe."""
    unknown_outcome: Literal["ask", "report"] = "ask"
    """For the not-retry-safe tools: what a recovered run does with a call whose outcome is unknown
    (``"ask"``: an operator approves a re-run; ``"report"``: the model is told at once)."""
    timeout_seconds: float = Field(default=30.0, gt=0)
    """Bound on one listing or one call, connecting included; past it the model gets a tool error."""
    keep_alive_seconds: float = Field(default=300.0, ge=0)
    """How long this process keeps an idle session to the server open for the next listing or call
    (of any run); ``0`` closes it after each one (a fresh session, for stdio a fresh process, per call)."""

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

    @field_validator("require_approval", "retry_safe", mode="before")
    @classmethod
    def _name_set(cls, value: Any) -> Any:
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

    def is_retry_safe(self, tool_name: str) -> bool:
        """Whether the server's tool ``tool_name`` (its own name) may run again after a crash."""
        if isinstance(self.retry_safe, bool):
            return self.retry_safe
        return tool_name in self.retry_safe

    def connection_key(self) -> str:
        """What identifies the session this config opens: equal keys share one open session.

        Only what reaches the server counts (its command line or URL and headers), not the name,
        prefix or gates: two agents naming one server differently share its session.
        """
        fields = self.model_dump(mode="json", include=set(self._connection_fields))
        return json.dumps([type(self).__name__, fields], sort_keys=True)

    _connection_fields: ClassVar[frozenset[str]] = frozenset()


class MCPServerStdio(MCPServer):
    """An MCP server the runtime starts as a subprocess and talks to over stdin/stdout.

    One process serves this process's listings and calls while it is alive and in use (see
    :attr:`MCPServer.keep_alive_seconds`); a dead one is replaced at the next call, and a recovered
    run in another process starts its own.
    """

    command: str
    """The executable (looked up on ``PATH``)."""
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    """Extra environment variables, over the MCP SDK's safe default environment (not this process's)."""
    cwd: str | None = None

    _connection_fields: ClassVar[frozenset[str]] = frozenset({"command", "args", "env", "cwd"})


class MCPServerStreamableHTTP(MCPServer):
    """An MCP server reached over streamable HTTP (one session, kept open, for this process's calls)."""

    url: str
    """The server's MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every request (authorization, for instance)."""

    _connection_fields: ClassVar[frozenset[str]] = frozenset({"url", "headers", "timeout_seconds"})


__all__ = [
    "DEFAULT_TOOL_SEPARATOR",
    "MCP_INSTALL_HINT",
    "MCPServer",
    "MCPServerStdio",
    "MCPServerStreamableHTTP",
    "require_mcp_sdk",
]
