"""The built-in run features, as capabilities on the loop's seam, in the order the loop calls them.

The order is part of what runs record: at a point two features share, their steps are recorded in
this order, and a replay must meet them the same way. Append new features; never reorder.
(``start_calls`` / ``finish_calls``: sub-agents before remote sub-agents, as before the seam.
Human in the loop, last, shares no point with another built-in: its steps come where the tool
phases took them before it was a capability. MCP servers, after it, add tools in their own
point, ``run_tools``, which no other built-in uses. Compaction, last, alone shapes what the model
is sent, ``model_messages``, and asks for a failed call again, ``retry_model_call``. Steering,
after it, adds a double-texted message before each model call of a listening agent's runs.)
"""

from __future__ import annotations

from helix_dbos.capability import RunCapability
from helix_dbos.compaction.capability import CompactionCapability
from helix_dbos.mcp.capability import MCPCapability
from helix_dbos.runtime.budget import BudgetCapability
from helix_dbos.runtime.companions import CompanionsCapability
from helix_dbos.runtime.hitl_capability import HitlCapability
from helix_dbos.runtime.memory import MemoryCapability
from helix_dbos.runtime.remote_sub_agents import RemoteSubAgentsCapability
from helix_dbos.runtime.skills import SkillsCapability
from helix_dbos.runtime.steering import SteeringCapability
from helix_dbos.runtime.sub_agents import SubAgentsCapability


def builtin_capabilities() -> tuple[RunCapability, ...]:
    """A fresh tuple of the built-ins (each run copies them again: :meth:`RunCapability.for_run`)."""
    return (
        SkillsCapability(),
        BudgetCapability(),
        MemoryCapability(),
        CompanionsCapability(),
        SubAgentsCapability(),
        RemoteSubAgentsCapability(),
        HitlCapability(),
        MCPCapability(),
        CompactionCapability(),
        SteeringCapability(),
    )


__all__ = ["builtin_capabilities"]
