"""Sub-agent tools: ``create_sub_agent_tool`` lets a parent agent delegate to a child agent.

The model sees a sub-agent as one more tool, ``subagent__{agent name}``, whose arguments are the
child's input. The runtime does not *execute* it like a tool: the call starts the child agent as a
DBOS child workflow in its own session and the child's validated output becomes the call's result
(see :mod:`helix_dbos.runtime.children` and :mod:`helix_dbos.runtime.sub_agents`).

What is refused here, at definition time (:class:`~helix_dbos.errors.SubAgentDefinitionError`):

- an agent without ``output_schema``: a sub-agent's result is its validated output;
- an agent with client-executed or approval-gated tools: an ephemeral child cannot wait for a
  human (the seeds' "doubly-nested HITL" is unsupported); hoist such a tool to the parent or use a
  persistent companion instead;
- an agent name that cannot be part of a tool name (providers accept ``[A-Za-z0-9_-]{1,64}``).
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from pydantic import BaseModel

from helix_dbos.agent import AgentConfig
from helix_dbos.errors import SubAgentDefinitionError
from helix_dbos.tool import SUBAGENT_TOOL_PREFIX, Tool, is_approval_gated_tool

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class SubAgentTool(Tool):
    """A tool that runs a child agent (the seeds' ``SubAgentTool``). Build it with :func:`create_sub_agent_tool`.

    ``timeout_ms`` is the child's wall-clock budget: past it the child is stopped and the call fails.
    """

    agent: AgentConfig
    """The child agent the call runs."""


def create_sub_agent_tool(
    agent: AgentConfig,
    input_schema: type[BaseModel],
    *,
    description: str | None = None,
    timeout_ms: int | None = None,
) -> SubAgentTool:
    """A tool named ``subagent__{agent.name}`` whose call runs ``agent`` on the validated input.

    ``description`` defaults to the agent's; ``timeout_ms`` bounds the child's run (durably: a
    recovered parent keeps the deadline it started with).
    """
    if not isinstance(agent, AgentConfig):
        raise SubAgentDefinitionError(repr(agent), "agent must be an AgentConfig (made with define_agent)")
    name = f"{SUBAGENT_TOOL_PREFIX}{agent.name}"
    if not _TOOL_NAME.fullmatch(name):
        raise SubAgentDefinitionError(
            agent.name, f"the tool name {name!r} is not a valid tool name (use 1-54 letters, digits, '_' or '-')"
        )
    if agent.output_schema is None:
        raise SubAgentDefinitionError(
            agent.name, "the agent has no output_schema; a sub-agent's result is its validated output"
        )
    hitl = [t.name for t in agent.tools if t.is_client or is_approval_gated_tool(t)]
    if hitl:
        raise SubAgentDefinitionError(
            agent.name,
            f"tools {hitl} wait for a human (client-executed or approval-gated), which an ephemeral "
            "sub-agent cannot do; move them to the parent agent or use a persistent companion",
        )
    if not (isinstance(input_schema, type) and issubclass(input_schema, BaseModel)):
        raise SubAgentDefinitionError(agent.name, "input_schema must be a pydantic model class")
    if timeout_ms is not None and (not isinstance(timeout_ms, int) or timeout_ms <= 0):
        raise SubAgentDefinitionError(agent.name, "timeout_ms must be a positive integer")
    return SubAgentTool(
        name=name,
        description=description if description is not None else agent.description,
        input_schema=input_schema,
        execute=None,
        timeout_ms=timeout_ms,
        agent=agent,
    )


def is_sub_agent_tool(tool: Any) -> TypeGuard[SubAgentTool]:
    """True for tools made by :func:`create_sub_agent_tool`."""
    return isinstance(tool, SubAgentTool)


def sub_agents_of(agent: AgentConfig) -> list[AgentConfig]:
    """The child agents ``agent`` can delegate to (directly)."""
    return [t.agent for t in agent.tools if isinstance(t, SubAgentTool)]


__all__ = ["SubAgentTool", "create_sub_agent_tool", "is_sub_agent_tool", "sub_agents_of"]
