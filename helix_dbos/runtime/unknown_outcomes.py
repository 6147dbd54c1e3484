"""Tools that must not run twice: a crash marker before they run, and what a run does when one fired.

Every tool call is a DBOS step, and DBOS steps are at least once: when a worker dies while a call
runs, the recovered run executes the step again. That is right for most tools and wrong for a tool
that charges a card or sends an email. Such a tool is declared ``retry_safe=False``
(:func:`helix_dbos.define_tool`), and its calls go like this:

1. before a phase's not-retry-safe calls run, one step ``{agent}.tool_starts`` records their ids
   (the durable marker: committed before any tool body starts);
2. each call's tool step then runs. Its body knows whether the marker step ran in this very
   execution of the workflow (it ran its body: the call is starting for the first time) or was
   replayed from the record (an earlier execution got past the marker and died before the tool
   step was recorded: the tool may have run, in part or whole). In the second case the body does
   not run the tool: it returns an "outcome unknown" result (with the call's ``idempotency_key``)
   and logs ``tool.outcome_unknown`` at ERROR. That result is the step's record, so later
   replays read it;
3. the tool's ``unknown_outcome`` decides what follows. ``"ask"`` (the default) hands the call to
   human in the loop as a ``rerun`` approval: the run waits (hot, then parked) for an operator;
   approve, and the call runs once more as a tool step (behind a new marker); deny, and the model
   gets the "outcome unknown" result. ``"report"`` gives the model that result at once.

Asking is the default because the operator is the one who can look the call up (by its
idempotency key) in the system the tool writes to; a model told "unknown" tends to call the tool
again, which is the blind re-run this exists to prevent.

A worker that dies after the marker step and before the tool body starts makes the call read as
"outcome unknown" although the tool never ran: the marker errs towards asking, never towards a
second charge. Runs recorded before this existed replay without the marker step (the replay patch
:data:`UNKNOWN_OUTCOMES_PATCH`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dbos import DBOS

from helix_dbos.capability import CollectedAnswers
from helix_dbos.observability import lifecycle
from helix_dbos.orchestration.tool_batch import HitlRequest, ToolBatch
from helix_dbos.runtime import step_names
from helix_dbos.runtime.ids import calls_used_before, scoped_call_key
from helix_dbos.runtime.step_outputs import ToolStartsStepOutput, ToolStepOutput, empty_tool_output
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.store.engine import now_ms
from helix_dbos.tool import Tool

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext
    from helix_dbos.runtime.steps import ToolStepRequest

UNKNOWN_OUTCOMES_PATCH = "helix-unknown-tool-outcomes"
"""The DBOS replay patch under which not-retry-safe calls are preceded by a ``{agent}.tool_starts`` step.

Asked once per run, where its first phase with a not-retry-safe call starts, so a run that has none
records nothing new.
A run recorded before it (a tool declared ``retry_safe=False`` after the run started) replays its
tool steps as they were recorded.
"""

OUTCOME_UNKNOWN_EVENT = "tool.outcome_unknown"
"""The structured log event (ERROR) of a call found in flight by a recovered run."""


def outcome_unknown_message(tool_name: str, idempotency_key: str) -> str:
    """The result the model (and the transcript) gets for a call whose outcome is unknown."""
    return (
        f"Outcome unknown: the worker running tool '{tool_name}' stopped while the call was in flight, "
        "and the tool is not safe to run again automatically, so it was not. It may or may not have "
        f"taken effect. idempotency_key={idempotency_key}"
    )


def idempotency_key_of(run: RunContext, call: ParsedToolCall) -> str:
    """The key a tool step of ``call`` in this run gives ``ToolContext.idempotency_key``.

    For a denied re-run in a continuation this is the continuation's key; it differs from the one
    the call ran under only for a call id the model had used before in the session (then scoped
    by the run's turn and step).
    """
    reused = call.id in calls_used_before(run.messages, [call.id])
    key = scoped_call_key(call.id, turn=run.request.turn, step=run.step) if reused else call.id
    return f"{run.who.session_id}:{key}"


def outcome_unknown_output(call: ParsedToolCall, tool_name: str, idempotency_key: str) -> ToolStepOutput:
    """A call's "outcome unknown" result (no ``after_tool`` hook: the tool did not run here)."""
    output = empty_tool_output(call.id, tool_name)
    output["error"] = outcome_unknown_message(tool_name, idempotency_key)
    output["outcome_unknown"] = True
    output["idempotency_key"] = idempotency_key
    output["after_tool"] = False
    return output


def log_outcome_unknown(session_id: str, run_id: str, agent_type: str, output: ToolStepOutput) -> None:
    """``tool.outcome_unknown`` at ERROR: from the tool step that found the call in flight (logged once)."""
    lifecycle.log_event(
        OUTCOME_UNKNOWN_EVENT,
        session_id,
        run_id,
        logging.ERROR,
        tool_call_id=output["tool_call_id"],
        tool_name=output["tool_name"],
        agent_type=agent_type,
        idempotency_key=output.get("idempotency_key"),
    )


@dataclass
class _MarkerRan:
    """Set by the marker step's body: it ran in this execution (not replayed from the record)."""

    ran: bool = False


def record_tool_starts(call_ids: list[str], marker: _MarkerRan) -> ToolStartsStepOutput:
    """The ``{agent}.tool_starts`` step: records the calls about to start (its commit is the marker)."""
    marker.ran = True
    return {"tool_call_ids": call_ids, "started_at_ms": now_ms()}


def mark_starts(run: RunContext, requests: list[ToolStepRequest]) -> list[ToolStepRequest]:
    """Workflow code: record a phase's not-retry-safe calls before they run; flag the ones that ran before.

    Returns the requests, the not-retry-safe ones marked ``started_before`` when the marker was
    recorded by an earlier execution (their tool step then reports the outcome unknown instead of
    running the tool). Does nothing (and asks no patch) when the phase has no such call.
    """
    unsafe = [r.call.id for r in requests if not r.tool.retry_safe]
    if not unsafe:
        return requests
    if run.unknown_outcomes_patched is None:  # once per run: the first ask decides, a row per ask costs
        run.unknown_outcomes_patched = bool(DBOS.patch(UNKNOWN_OUTCOMES_PATCH))
    if not run.unknown_outcomes_patched:
        return requests
    marker = _MarkerRan()
    DBOS.run_step({"name": step_names.tool_starts(run.agent.name)}, record_tool_starts, unsafe, marker)
    if marker.ran:
        return requests
    return [r if r.tool.retry_safe else replace(r, started_before=True) for r in requests]


RunPhase = Callable[["RunContext", list[tuple[ParsedToolCall, Tool]], dict[str, ToolStepOutput]], object]


def settle_unknown_outcomes(
    run: RunContext,
    calls: list[ParsedToolCall],
    tools_by_name: dict[str, Tool],
    results: dict[str, ToolStepOutput],
    run_phase: RunPhase,
) -> CollectedAnswers:
    """Workflow code: put the batch's "outcome unknown" calls of ``"ask"`` tools to an operator.

    Each such call becomes a ``rerun`` approval of the run's human-in-the-loop capability
    (registered, awaited hot, parked); approved calls run once more through ``run_phase`` (and are
    asked about again should that run die too), denied ones keep the "outcome unknown" result.
    Returns the answers' stop when the run must end waiting (its asked calls stay open).
    """
    if not any(out.get("outcome_unknown") for out in results.values()):
        return CollectedAnswers()  # the usual batch: nothing to ask (and no lookups to make)
    from helix_dbos.runtime.hitl_capability import HitlCapability  # the run's own instance decides

    hitl = next((c for c in run.capabilities if isinstance(c, HitlCapability)), None)
    by_id = {c.id: c for c in calls}
    decided: set[str] = set()
    while hitl is not None:
        asking = [
            HitlRequest(by_id[cid], tools_by_name[out["tool_name"]], "rerun")
            for cid, out in results.items()
            if out.get("outcome_unknown")
            and cid not in decided
            and cid in by_id
            and tools_by_name.get(out["tool_name"]) is not None
            and tools_by_name[out["tool_name"]].unknown_outcome == "ask"
        ]
        if not asking:
            break
        for request in asking:
            del results[request.call.id]  # the operator's answer decides its result
        registered = hitl.register_calls(run, ToolBatch(hitl=asking), resuming=False)
        answers = hitl.collect_answers(run, registered, results)
        if answers.stop is not None:
            return answers
        rerun = {c.id for c, _ in answers.run_as_steps}
        decided |= {r.call.id for r in asking if r.call.id not in rerun}
        run_phase(run, answers.run_as_steps, results)
    return CollectedAnswers()


__all__ = [
    "OUTCOME_UNKNOWN_EVENT",
    "UNKNOWN_OUTCOMES_PATCH",
    "idempotency_key_of",
    "log_outcome_unknown",
    "mark_starts",
    "outcome_unknown_message",
    "outcome_unknown_output",
    "record_tool_starts",
    "settle_unknown_outcomes",
]
