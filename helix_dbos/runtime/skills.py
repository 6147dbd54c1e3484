"""The run's skills catalog, resolved in a checkpointed step (the seeds' per-run resolution hook).

The catalog comes from the agent's :class:`~helix_dbos.skills.SkillProvider`, which may read files
or a network: I/O, so it must not run in workflow code. Resolving it in the
``{agent}.skills.catalog`` step means a recovered (replayed) run gets the recorded fragment back,
the very bytes its earlier LLM calls were sent, even if the skill files changed since; every LLM
call of the run then carries the same system prompt (the cached prefix). This is the seeds' open
follow-up FU-SKILL-DBOS-CATALOG-IN-WORKFLOW-BODY, done.

An agent without skills takes no step, so runs recorded before skills existed replay unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dbos import DBOS

from helix_dbos.agent import AgentConfig
from helix_dbos.capability import RunCapability
from helix_dbos.runtime import step_names
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.step_outputs import SkillsCatalogStepOutput
from helix_dbos.skills.catalog import resolve_skills_catalog

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext


def skills_catalog_step(agent: AgentConfig) -> SkillsCatalogStepOutput:
    """Ask the agent's provider for the catalog and preloaded bodies (never raises; ``''`` on failure)."""
    fragment = background_loop.run(resolve_skills_catalog(agent.skills, agent.preload_skills))
    return {"fragment": fragment}


def resolve_run_skills(agent: AgentConfig) -> str:
    """The run's skills fragment: from the step (recorded on replay), or ``''`` without skills."""
    if agent.skills is None:
        return ""
    out: SkillsCatalogStepOutput = DBOS.run_step(
        {"name": step_names.skills_catalog(agent.name)}, skills_catalog_step, agent
    )
    return out["fragment"]


class SkillsCapability(RunCapability):
    """Skills on the seam: the catalog (and preloaded bodies) as the run's system-prompt fragment.

    Resolved in one step before ``on_agent_start`` (none for an agent without skills), so every
    model call of the run sends the same bytes and the provider's prompt cache holds.
    """

    name = "skills"

    def system_fragment(self, run: RunContext) -> str:
        return resolve_run_skills(run.agent)


__all__ = ["SkillsCapability", "resolve_run_skills", "skills_catalog_step"]
