"""``on_agent_resumed`` for a resumed run that has no answers to wait for.

Seed 001 ("Resume runId semantics"): when a session is resumed, ``onAgentResumed`` fires with the new
run id, ``previous_run_id`` (the run that stopped) and the checkpoint the run continues from. A run
that continues a suspended batch (human answers, a budget approval) fires it where its wait ends
(:mod:`helix_dbos.runtime.hitl`), once the answers are in. A ``resume`` of a session that stopped
between steps (``interrupt``) waits for nothing, so it fires here, at its start, in its own step
(``{agent}.resumed``): a recovered run does not fire it again.

A ``retry`` does not fire it: the seeds fire it when a session is *resumed*, and a retry starts again
from a checkpoint, discarding what followed (``on_agent_start`` tells its hooks it began).

Runs recorded before this step existed replay without it: it is asked behind
:data:`RESUMED_AT_START_PATCH`, only in a resume that defines the hook and does not continue a batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dbos import DBOS

from helix_dbos.agent import AgentHooks
from helix_dbos.messages import AssistantMessage, Message, ToolResultMessage
from helix_dbos.runtime import services, step_names
from helix_dbos.runtime.hooks import RunPayload, fire
from helix_dbos.runtime.run_request import RunIdentity
from helix_dbos.runtime.step_outputs import ResumedAtStartStepOutput
from helix_dbos.tool import FINISH_TOOL_NAME

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext

RESUMED_AT_START_PATCH = "helix-resumed-hook-at-start"
"""The DBOS replay patch under which a ``resume`` run takes the ``{agent}.resumed`` step at its start."""

_AWAITED = ("pending", "answered", "expired")
"""Statuses of a previous run's human call that the resumed run waits on (and whose wait fires the hook)."""


def resumed_at_start_step(
    who: RunIdentity, hook_sets: list[AgentHooks], previous_run_id: str | None
) -> ResumedAtStartStepOutput:
    """Fire ``on_agent_resumed`` unless the run will wait for its previous run's calls (that wait fires it)."""
    rt = services.current()
    awaited = [
        row for row in rt.store.pending.get(who.session_id) if row.run_id == previous_run_id and row.status in _AWAITED
    ]
    if awaited:
        return {"fired": False}
    latest = rt.store.get_latest_checkpoint(who.session_id)
    payload = RunPayload(
        who.session_id,
        who.run_id,
        who.agent.name,
        "running",
        previous_run_id=previous_run_id,
        resumed_from_checkpoint_id=None if latest is None else latest.id,
    )
    fire(hook_sets, "on_agent_resumed", payload, rt.logger)
    return {"fired": True}


def continues_a_batch(messages: list[Message]) -> bool:
    """Whether the transcript ends with a model response whose tool calls are not all answered.

    Such a run answers that batch first (human calls: its wait fires ``on_agent_resumed``), so it
    takes no step here: a continuation's recorded steps stay as they were.
    """
    at = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AssistantMessage)), None)
    if at is None:
        return False
    last = messages[at]
    assert isinstance(last, AssistantMessage)
    answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ToolResultMessage)}
    return any(c.id not in answered for c in last.tool_calls or [] if c.name != FINISH_TOOL_NAME)


def fire_resumed_at_start(run: RunContext) -> None:
    """Workflow code: in a ``resume`` run whose hooks define ``on_agent_resumed``, take the step.

    Decided from the run's request and transcript, so a replay decides the same. A run that
    continues a batch leaves the hook to that batch's wait; one that waits on a budget approval is
    told apart in the step (the approval is a store row, not a transcript entry).
    """
    if run.request.mode != "resume" or not run.wants("on_agent_resumed") or continues_a_batch(run.messages):
        return
    if not DBOS.patch(RESUMED_AT_START_PATCH):
        return
    DBOS.run_step(
        {"name": step_names.resumed(run.agent.name)},
        resumed_at_start_step,
        run.who,
        run.hooks,
        run.request.previous_run_id,
    )


__all__ = ["RESUMED_AT_START_PATCH", "continues_a_batch", "fire_resumed_at_start", "resumed_at_start_step"]
