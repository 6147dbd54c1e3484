"""Every way a run recorded by an older helix-dbos is told apart, in one place.

A worker upgraded while runs are in flight replays what older code recorded: the same steps, in
the same order, with the outputs they recorded. A change that alters what a run records (a new
step, a step in another place, another argument) must therefore keep the old path for old runs.

**From now on, by named patch.** ``DBOS.patch(name)`` (DBOS's public API) records a marker at its
position the first time a run passes it and answers ``True``; a run recorded before the patch has
another step at that position, and it answers ``False``. Each patch is listed in :data:`PATCHES`
(name, what it changes, where it is asked); ``tests/unit/test_replay_versions.py`` fails on a
``DBOS.patch`` whose name is not here. A capability names the patches it asks in its
``replay_patches`` (:mod:`helix_dbos.capability`). Ask a patch only where the changed behaviour
starts, never in every run: a patch records a row in every run that passes it.

**Before that, by missing keys.** Earlier changes were told apart by a key a step output lacked
when an older version recorded it. Those branches stay (runs recorded then may still be parked,
waiting for a human for weeks) and are listed in :data:`LEGACY_OUTPUT_KEYS`; the test checks each
one still names a key of its step output. Retire one only when no run recorded without it can
still be replayed.

**Neither, for a field added inside a recorded result that only describes it.** The LLM step's
``StepResult.model_attempts`` (the attempts of a model chain) changes no step, no order and no
decision of the loop; the usage rows built from it are written by the next commit, which is keyed,
and a result recorded without it validates to an empty list, which builds the rows the older
version built. A patch would only add a row to every run. Nor for the output modes
(``define_agent(output_mode=...)``): the default, ``"tool"``, takes every step and decision it took
before (same tools, same prompt, same fingerprint), and the native and prompted modes exist only in
definitions written after them, whose changed fingerprint tells them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from helix_dbos.compaction.capability import COMPACTION_PATCH
from helix_dbos.guardrails.capability import ALL_CALLS_PATCH, GUARDRAILS_PATCH, HELD_RESULTS_PATCH
from helix_dbos.mcp.capability import MCP_TOOLS_PATCH
from helix_dbos.runtime.admission import RATE_PARK_PATCH
from helix_dbos.runtime.child_park import CHILD_PARK_PATCH
from helix_dbos.runtime.companions import AWAITING_CHILDREN_PATCH
from helix_dbos.runtime.ids import RECORDED_STOP_REASON_PATCH, REUSED_CALL_IDS_PATCH, SCOPED_CALL_IDS_PATCH
from helix_dbos.runtime.rate_limits import RATE_EXACT_PATCH, RATE_LIMITS_PATCH
from helix_dbos.runtime.resumes import RESUMED_AT_START_PATCH
from helix_dbos.runtime.steering import STEER_PATCH
from helix_dbos.runtime.unknown_outcomes import UNKNOWN_OUTCOMES_PATCH


@dataclass(frozen=True)
class ReplayPatch:
    """A named ``DBOS.patch``: what it changes for runs recorded after it, and where it is asked."""

    name: str
    changes: str
    asked_in: str


@dataclass(frozen=True)
class LegacyOutputKey:
    """A step output key whose absence means "recorded by an older version", and what that run does."""

    output: str
    """The ``TypedDict`` in :mod:`helix_dbos.runtime.step_outputs` (or a field of ``RunRequest``)."""
    key: str
    when_absent: str
    read_in: str


PATCHES: tuple[ReplayPatch, ...] = (
    ReplayPatch(
        SCOPED_CALL_IDS_PATCH,
        "ids derived from a tool call id (child sessions, companion continuations and respawns, remote "
        "sessions, a companion's request key) carry the parent run's turn and step",
        "runtime/run_context.py: RunContext.call_key, at the first child.start, remote.start or companion.open",
    ),
    ReplayPatch(
        REUSED_CALL_IDS_PATCH,
        "a continuation counts only the results after its batch's model response as answering it (a call "
        "id the model used again is not answered by an earlier call's result)",
        "runtime/tools.py: outstanding_calls, only where the two readings differ",
    ),
    ReplayPatch(
        RECORDED_STOP_REASON_PATCH,
        "a run stopped by an abort while it waited (HITL answers, a budget approval) reads the abort's reason "
        "in a step ({agent}.stop_reason) instead of from the store in workflow code",
        "runtime/run_context.py: RunContext.abort_error, only when a run ends aborted (loop._after_batch, "
        "budget._end_for)",
    ),
    ReplayPatch(
        RESUMED_AT_START_PATCH,
        "a resume run whose hooks define on_agent_resumed takes the {agent}.resumed step at its start "
        "(it fires the hook when the run waits for no answers: a resume after an interrupt)",
        "runtime/resumes.py: fire_resumed_at_start, only in resume runs that define on_agent_resumed and "
        "do not continue a batch of tool calls",
    ),
    ReplayPatch(
        UNKNOWN_OUTCOMES_PATCH,
        "a phase's not-retry-safe calls (retry_safe=False) are preceded by a {agent}.tool_starts step, and a "
        "call an earlier execution may have run records an 'outcome unknown' result instead of running again",
        "runtime/unknown_outcomes.py: mark_starts, once per run, at its first phase with a not-retry-safe call",
    ),
    ReplayPatch(
        MCP_TOOLS_PATCH,
        "a run of an agent with MCP servers lists each server's tools in a step ({agent}.mcp.list.{server}) "
        "before on_agent_start, and exposes them as tools",
        "mcp/capability.py: MCPCapability.run_tools, only for an agent with mcp_servers",
    ),
    ReplayPatch(
        RATE_LIMITS_PATCH,
        "a model call that a provider rate limit matches first waits for admission on the limit's DBOS queue "
        "(the admission workflow enqueued, its admitted event awaited, a release sent after the call)",
        "runtime/rate_limits.py: RateLimitCapability.before_model_call, at the run's first model call that a "
        "configured limit matches",
    ),
    ReplayPatch(
        AWAITING_CHILDREN_PATCH,
        "a parent whose blocking companion (spawnAgent / sendMessage) ends its wait parked on a human parks as "
        "suspended_awaiting_children, leaving the call open; its continuation takes {agent}.companion.awaited "
        "and awaits the companion's current run instead of dispatching the call again (before: the call's "
        "result was 'running' with notify, and the parent went on)",
        "runtime/companions.py: _ended, only when a blocking wait ended on a human; awaited_companions, only "
        "in a continuation whose batch has spawn/send calls",
    ),
    ReplayPatch(
        CHILD_PARK_PATCH,
        "a parent waits for its sub-agent children at most the hot window ({agent}.child.wait may end "
        "'running'); a child still running then leaves its batch's sub-agent calls open and the parent parks as "
        "suspended_awaiting_children; its continuation takes {agent}.child.awaited and awaits those children "
        "instead of starting them again (before: the wait lasted until the child ended)",
        "runtime/child_park.py: parking_enabled, once per run, at its first wait on a sub-agent child "
        "(sub_agents.await_sub_agents) or in a continuation with open sub-agent calls (awaited_children)",
    ),
    ReplayPatch(
        COMPACTION_PATCH,
        "a run of an agent with a compaction policy takes a {agent}.compaction.check step before every model "
        "call (and {agent}.compaction.compact when it compacts), and sends the model the compacted view",
        "compaction/capability.py: CompactionCapability.model_messages, at the first model call of a run "
        "whose agent has compaction",
    ),
    ReplayPatch(
        GUARDRAILS_PATCH,
        "a run of an agent with guardrails records each checked stage's verdicts in a step "
        "({agent}.guardrails.{stage}) and acts on them (denials, approvals, rewrites, a failed run)",
        "guardrails/capability.py: Guardrails._active, before a run's first guard step, only for an agent "
        "given the Guardrails capability",
    ),
    ReplayPatch(
        RATE_EXACT_PATCH,
        "an exact limit's call is admitted by the queue's rolling count and claims its send slot inside the "
        "model step (no held slot, no release step after the call); before it, a held slot and a release",
        "runtime/rate_limits.py: RateLimitCapability.before_model_call, right after the rate-limits patch, "
        "only when the matching limit's mode is exact (the default; a run recorded with no mode while strict "
        "was the default answers no and replays its held slot)",
    ),
    ReplayPatch(
        RATE_PARK_PATCH,
        "a run waits for a limit's admission for the hot window (hot_window_seconds), then parks: a "
        "{agent}.rate_limit.park step, and its thread leaves the workflow until its process's watch resumes "
        "it once admitted; before it, the run waits until admitted, holding its thread",
        "runtime/rate_limits.py: RateLimitCapability.before_model_call, at the run's first model call that a "
        "limit matches, after the rate-limits (and exact) patches",
    ),
    ReplayPatch(
        HELD_RESULTS_PATCH,
        "a run that asks a person about tool results a guardrail flagged records them (the workflow event "
        "helix.guardrails.held_results); the continuation of a parked question reads them in a "
        "{agent}.guardrails.held_results step and never runs those calls again, and asks about the result "
        "of an approved require_approval call that a guard flags",
        "guardrails/capability.py: Guardrails._ask, before the question is registered; "
        "Guardrails._carry_held_results, in a continuation whose open approvals are of guarded tools",
    ),
    ReplayPatch(
        STEER_PATCH,
        "a run of an agent defined with double_text='steer' takes the steering messages waiting for it "
        "(DBOS.recv on helix.double_text.steer, without waiting) before each model call, appends them as user "
        "messages and publishes the deliveries it took (the workflow event helix.double_text.steered)",
        "runtime/steering.py: SteeringCapability.before_model_call, at the first model call of a run whose "
        "agent listens",
    ),
    ReplayPatch(
        ALL_CALLS_PATCH,
        "a run of an agent with guardrails checks, besides plain tool calls, its sub-agent, companion, "
        "client-executed, approval-gated and finish_with calls at the tool_call stage (before they are "
        "dispatched) and the answers of sub-agents and companions and client-submitted results at the "
        "tool_result stage, in its {agent}.guardrails.{stage} steps (a denied call is never dispatched)",
        "guardrails/capability.py: Guardrails._covers_all_calls, once per run, at the first batch in which a "
        "guard of a tool stage applies to such a call (before the guardrails patch there), only for an agent "
        "given the Guardrails capability",
    ),
)
"""Every named patch, oldest first."""

LEGACY_OUTPUT_KEYS: tuple[LegacyOutputKey, ...] = (
    LegacyOutputKey(
        "RunRequest",
        "hook_names",
        "the run uses the hooks defined now (live), not the ones recorded at its start",
        "runtime/run_context.py: RunContext.__init__",
    ),
    LegacyOutputKey(
        "FinalizeStepOutput",
        "closing_chunks",
        "the loop writes the closing chunks and ends the stream after the finalize step",
        "runtime/loop.py: _finish",
    ),
    LegacyOutputKey(
        "CheckStepOutput",
        "parked",
        "the run parks in its own hitl.park step",
        "runtime/hitl.py: await_answers",
    ),
    LegacyOutputKey(
        "CheckStepOutput",
        "replaces_registration",
        "a continuation registers its batch (hitl.register) even when its first check found it answered",
        "runtime/hitl.py: registration_from_check",
    ),
    LegacyOutputKey(
        "RegisterStepOutput",
        "check",
        "the run takes its first check in its own hitl.check step",
        "runtime/hitl.py: await_answers",
    ),
    LegacyOutputKey(
        "RegisterStepOutput",
        "answers_in_wakes",
        "the run takes a hitl.check after every wake-up, whatever the message carries",
        "runtime/hitl.py: await_answers",
    ),
)
"""Every step output key an older version did not record, and what its absence means."""


__all__ = ["LEGACY_OUTPUT_KEYS", "PATCHES", "LegacyOutputKey", "ReplayPatch"]
