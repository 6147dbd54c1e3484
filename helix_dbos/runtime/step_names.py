"""Every DBOS step name an agent run records: a persisted contract, kept in one place.

DBOS records each step under its name, and a recovered workflow replays against those records:
a run in flight that finds a different name at the same position fails to recover. So these
strings never change; ``tests/runtime/test_step_names.py`` pins each one byte for byte. A new
step gets a new function here; an old name stays as long as recorded runs may still use it.

Names are per agent (``{agent}.llm``), so a run's step list reads as what the agent did.
"""

from __future__ import annotations

AGENT_WORKFLOW_NAME = "helix_dbos.agent_run"
"""The DBOS workflow an agent run is (:mod:`helix_dbos.runtime.workflow`): recorded with every run,
and what recovery, takeover and the CLI list workflows by. Here, not next to the workflow, so that
those readers do not import the loop."""

FAIL_RUN = "helix.fail_run"
"""Records a run that failed on an unexpected error in workflow code (not per agent: the agent
may be the very thing that could not be resolved)."""


def llm(agent: str) -> str:
    """Commit the previous iteration, read the interrupt flag, call the model."""
    return f"{agent}.llm"


def memory(agent: str) -> str:
    """Search the agent's memories for the turn's user message (the hidden injection message)."""
    return f"{agent}.memory"


def tool(agent: str, tool_name: str) -> str:
    """Validate and run one tool call."""
    return f"{agent}.tool.{tool_name}"


def hooks(agent: str) -> str:
    """Fire deferred hooks (``on_agent_start``, ``on_message``, ``after_tool``)."""
    return f"{agent}.hooks"


def finalize(agent: str) -> str:
    """Commit the last iteration with the run's final status and publish its outcome."""
    return f"{agent}.finalize"


def approval_gate(agent: str, tool_name: str) -> str:
    """Evaluate a predicate ``require_approval`` (its boolean checkpointed)."""
    return f"{agent}.approval_gate.{tool_name}"


def hitl_register(agent: str) -> str:
    """Record a batch's human-in-the-loop calls as pending and fix the hot-window deadline."""
    return f"{agent}.hitl.register"


def hitl_check(agent: str) -> str:
    """Read the answers of pending calls, expire overdue ones, read the control flags."""
    return f"{agent}.hitl.check"


def hitl_park(agent: str) -> str:
    """End the hot window: unanswered calls become parked."""
    return f"{agent}.hitl.park"


def hitl_resumed(agent: str) -> str:
    """Fire ``on_agent_resumed`` once every answer is in."""
    return f"{agent}.hitl.resumed"


def resumed(agent: str) -> str:
    """Fire ``on_agent_resumed`` at the start of a resumed run that waits for no answers."""
    return f"{agent}.resumed"


def child_start(agent: str) -> str:
    """Open a child agent's session and run in the store, and record it on the parent."""
    return f"{agent}.child.start"


def child_wait(agent: str) -> str:
    """Wait for a child run's outcome (stopping the child at its deadline or on the parent's abort)."""
    return f"{agent}.child.wait"


def companion_open(agent: str) -> str:
    """Open (create, continue, respawn, resume) or interrupt a persistent companion's run."""
    return f"{agent}.companion.open"


def companion_status(agent: str) -> str:
    """Read persistent companions' status and outputs (list, status, notices, the wait's start)."""
    return f"{agent}.companion.status"


def companion_wait(agent: str) -> str:
    """Wait, up to a recorded deadline, for a persistent companion's run to end."""
    return f"{agent}.companion.wait"


def child_awaited(agent: str) -> str:
    """A continuation's look at the sub-agent children its previous run parked on (their runs)."""
    return f"{agent}.child.awaited"


def companion_awaited(agent: str) -> str:
    """A continuation's look at the blocking companions its previous run parked awaiting (their current runs)."""
    return f"{agent}.companion.awaited"


def companion_terminate(agent: str) -> str:
    """Abort a persistent companion's run and, recursively, its own children."""
    return f"{agent}.companion.terminate"


def budget_start(agent: str) -> str:
    """A budgeted run's start: the session's spend and raised limits, and a budget call still open."""
    return f"{agent}.budget.start"


def budget_register(agent: str) -> str:
    """Record a crossed budget as a pending ``budget`` call and fix the hot-window deadline."""
    return f"{agent}.budget.register"


def remote_start(agent: str) -> str:
    """Record a remote sub-agent's session on the parent and start (or find) its run on the remote service."""
    return f"{agent}.remote.start"


def remote_wait(agent: str) -> str:
    """Proxy a remote sub-agent's stream into the parent's and wait for its run to end."""
    return f"{agent}.remote.wait"


def skills_catalog(agent: str) -> str:
    """Resolve the run's skills catalog (the system-prompt fragment) from the agent's provider."""
    return f"{agent}.skills.catalog"


def stop_reason(agent: str) -> str:
    """Read why a stopped run was stopped (an abort's reason), so a replay ends it with the same error."""
    return f"{agent}.stop_reason"


def tool_starts(agent: str) -> str:
    """Record that a phase's not-retry-safe calls start, before any of them runs (their crash marker)."""
    return f"{agent}.tool_starts"


def capability(agent: str, capability_name: str, name: str) -> str:
    """A step an agent's own capability records (``CapabilityRun.record_step``)."""
    return f"{agent}.{capability_name}.{name}"


__all__ = [
    "AGENT_WORKFLOW_NAME",
    "FAIL_RUN",
    "approval_gate",
    "budget_register",
    "budget_start",
    "capability",
    "child_awaited",
    "child_start",
    "child_wait",
    "companion_awaited",
    "companion_open",
    "companion_status",
    "companion_terminate",
    "companion_wait",
    "finalize",
    "hitl_check",
    "hitl_park",
    "hitl_register",
    "hitl_resumed",
    "hooks",
    "llm",
    "memory",
    "remote_start",
    "remote_wait",
    "resumed",
    "skills_catalog",
    "stop_reason",
    "tool",
    "tool_starts",
]
