"""Persistent companions inside the parent's workflow: the companion phase and completion notices.

A parent with ``persistent_agents`` calls the ``companion__*`` tools; their calls run here, in a
phase of their own (seeds 001 "Tool Execution Order"), one after another in call order, after the
regular tools and before the finish_with ones. Each call is workflow code over checkpointed steps
(:mod:`.companion_steps`), so a replay takes the same decisions:

- spawn/send: the ``open`` step writes the child's run; the parent then starts the child's
  ``agent_run`` workflow as a DBOS child workflow under the run's deterministic id
  (``{child}-turn-1``, ``{child}-continue-{call key}``, ``{child}-respawn-{call key}``, the call key
  being the tool call id with the parent's turn and step: ``RunContext.call_key``), which
  ``DBOS.start_workflow`` dedupes, so a replayed or recovered parent never starts it twice; its
  chunks are mirrored into the parent's stream (:mod:`.children`). A blocking companion is awaited
  with :func:`~.children.await_child` (which stops it if the parent is aborted and passes an
  interrupt of the parent on to it); a non-blocking one returns
  ``running`` at once. sendMessage to a running companion interrupts it, waits for it to stop, and
  resumes it with the message;
- waitForResult waits for the companion's run, up to a deadline recorded before the wait;
- listChildren / getChildStatus read; terminateChild aborts the companion and what it started.

Non-blocking completions reach the model as notices (user messages) before its next call:
:func:`deliver_notices` asks the pure :func:`~helix_dbos.orchestration.companions.notices_due`
which runs the transcript still awaits, reads them in one step and appends a notice for each that
ended. The notice is committed with the parent's next step, and from then on is part of the very
transcript that decides what is due: delivered exactly once, on replay and across turns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dbos import DBOS, SetWorkflowID
from pydantic import BaseModel, ValidationError

from helix_dbos.capability import RunCapability
from helix_dbos.companion_tools import (
    GetChildStatusInput,
    ListChildrenInput,
    SendMessageInput,
    SpawnAgentInput,
    TerminateChildInput,
    WaitForResultInput,
    companion_tool_name,
)
from helix_dbos.errors import HelixError, public_error_message
from helix_dbos.orchestration.companions import (
    TERMINAL_STATUSES,
    CompanionStatus,
    companion_result,
    notice_message,
    notices_due,
)
from helix_dbos.orchestration.tool_batch import HitlKind, ToolBatch
from helix_dbos.runtime import step_names
from helix_dbos.runtime._dbos_compat import is_dbos_replay_error
from helix_dbos.runtime.children import await_child
from helix_dbos.runtime.companion_steps import (
    OpenRequest,
    awaited_step,
    open_step,
    status_step,
    terminate_step,
    wait_step,
)
from helix_dbos.runtime.ids import SCOPED_CALL_IDS_PATCH
from helix_dbos.runtime.step_outputs import (
    AwaitedChild,
    ChildStartOutput,
    ChildWaitOutput,
    CompanionChild,
    CompanionOpenOutput,
    CompanionStatusOutput,
    ToolStepOutput,
)
from helix_dbos.session import SuspendedChildWait
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.tool import Tool, validation_error_message

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext

_REDIRECT_FAILED = (
    "The companion {name!r} could not be redirected: it is waiting (for a human or a client tool). "
    "Use companion__waitForResult or companion__terminateChild."
)


AWAITING_CHILDREN_PATCH = "helix-park-awaiting-children"
"""Replay patch: a parent whose blocking companion waits on a human parks as ``suspended_awaiting_children``
(and its continuation awaits that companion's current run) instead of reading it as ``running``."""

_WAITS_ON_A_HUMAN = ("suspended_client_tool", "suspended_awaiting_children")
_DISPATCHING = (companion_tool_name("spawnAgent"), companion_tool_name("sendMessage"))
"""The calls that start a companion's run and (blocking) wait for it."""


def run_companion_phase(
    run: RunContext, calls: list[tuple[ParsedToolCall, Tool]], awaited: dict[str, AwaitedChild] | None = None
) -> dict[str, ToolStepOutput]:
    """Run the step's companion calls in order; returns their results by call id.

    ``awaited``: a continuation's calls whose companion its previous run parked awaiting; they are
    not dispatched again, their companion's current run is awaited. A call whose companion (now)
    waits on a human has no result: it is in ``run.awaiting_children`` and the run parks.
    """
    results: dict[str, ToolStepOutput] = {}
    for call, tool in calls:
        if awaited and call.id in awaited:
            out = _await_again(run, call, awaited[call.id])
        else:
            out = _run_call(run, call, tool)
        if out is not None:
            results[call.id] = out
    return results


def awaited_companions(run: RunContext, calls: list[ParsedToolCall]) -> dict[str, AwaitedChild]:
    """A continuation's spawn/send calls whose companion its previous run parked awaiting (one step).

    Takes the step (behind :data:`AWAITING_CHILDREN_PATCH`) only when the batch has such calls: before
    this change a continuation only had them when a human call of the same batch had parked it.
    """
    candidates = [(c.id, _name_of(c)) for c in calls if c.name in _DISPATCHING]
    if not candidates or not DBOS.patch(AWAITING_CHILDREN_PATCH):
        return {}
    found: dict[str, AwaitedChild] = DBOS.run_step(
        {"name": step_names.companion_awaited(run.agent.name)}, awaited_step, run.who, candidates
    )
    return found


def _name_of(call: ParsedToolCall) -> str | None:
    name = call.arguments.get("name") if isinstance(call.arguments, dict) else None
    return name if isinstance(name, str) else None


def deliver_notices(run: RunContext) -> None:
    """Append a notice for each non-blocking companion run that ended since the model last heard.

    Takes a step only when the transcript awaits a run, so agents without non-blocking companions
    (and parents whose companions were all heard from) record nothing here.
    """
    if not run.agent.persistent_agents:
        return
    due = notices_due(run.messages)
    if not due:
        return
    out: CompanionStatusOutput = DBOS.run_step(
        {"name": step_names.companion_status(run.agent.name)},
        status_step,
        run.who,
        sorted({d.name for d in due}),
    )
    by_session = {c["session_id"]: c for c in out["children"]}
    for awaited in due:
        child = by_session.get(awaited.session_id)
        if child is None:
            run.append(notice_message(awaited, "failed", error="The companion's session no longer exists."))
        elif child["run_id"] != awaited.run_id:
            run.append(notice_message(awaited, "interrupted", error="A later run of the companion superseded it."))
        elif child["status"] in TERMINAL_STATUSES:
            run.append(notice_message(awaited, child["status"], output=child["output"], error=child["error"]))


# --- one call -----------------------------------------------------------------------------------------


def _run_call(run: RunContext, call: ParsedToolCall, tool: Tool) -> ToolStepOutput | None:
    try:
        args = tool.validate_input(call.arguments if isinstance(call.arguments, dict) else {})
    except ValidationError as exc:
        return _output(call, error=validation_error_message(call.name, exc))
    if isinstance(args, SpawnAgentInput):
        request = OpenRequest("spawnAgent", call.id, run.call_key(call.id), args.name, args.agent_type, args.message)
        return _dispatch(run, call, request)
    if isinstance(args, SendMessageInput):
        request = OpenRequest("sendMessage", call.id, run.call_key(call.id), args.name, None, args.message)
        return _dispatch(run, call, request)
    if isinstance(args, WaitForResultInput):
        return _wait_for_result(run, call, args)
    if isinstance(args, TerminateChildInput):
        out = DBOS.run_step(
            {"name": step_names.companion_terminate(run.agent.name)}, terminate_step, run.who, args.name, args.reason
        )
        return _child_output(call, out, args.name)
    if isinstance(args, GetChildStatusInput):
        return _child_output(call, _status(run, [args.name]), args.name)
    if isinstance(args, ListChildrenInput):
        children = _status(run, None)["children"]
        return _output(call, result={"children": [_view(c) for c in children]})
    return _output(call, error=f"Unsupported companion tool {call.name!r}")  # unreachable: all six handled


def _status(run: RunContext, names: list[str] | None) -> CompanionStatusOutput:
    out: CompanionStatusOutput = DBOS.run_step(
        {"name": step_names.companion_status(run.agent.name)}, status_step, run.who, names
    )
    return out


def _dispatch(run: RunContext, call: ParsedToolCall, request: OpenRequest) -> ToolStepOutput | None:
    """Spawn or send: open the child's run, start its workflow, wait for it when blocking."""
    opened = _open(run, request)
    if opened["action"] == "interrupt":
        # A running companion: it was asked to stop at its next step; once it has, resume it with the
        # message (the second decision reads the interrupted session and opens the resume).
        _wait(run, opened["name"], opened["run_id"], None)
        opened = _open(run, request)
        if opened["action"] == "interrupt":
            return _output(call, error=_REDIRECT_FAILED.format(name=opened["name"]))
    if opened["action"] == "refuse" or opened["workflow_id"] is None or opened["request"] is None:
        return _output(call, error=opened["error"] or "The companion could not be started.")
    child: ChildStartOutput = {
        "session_id": opened["session_id"],
        "run_id": opened["run_id"] or "",
        "workflow_id": opened["workflow_id"],
        "request": opened["request"],
        "deadline_ms": None,
        "timeout_ms": None,
        "started_at_ms": None,
        "error": _start_child(run, opened["workflow_id"], opened["request"]),
    }
    if child["error"] is not None:
        await_child(run, child)  # ends the opened run: no workflow will (see children.close_unstarted_step)
        return _output(call, error=f"The companion could not be started: {child['error']}")
    running = companion_result(
        name=opened["name"],
        agent_type=opened["agent_type"],
        session_id=opened["session_id"],
        status="running",
        run_id=opened["run_id"],
    )
    if opened["notify"]:
        return _output(call, result={**running, "notify": True})
    return _ended(run, call, running, child, await_child(run, child))


def _await_again(run: RunContext, call: ParsedToolCall, awaited: AwaitedChild) -> ToolStepOutput | None:
    """A continuation's call whose companion the previous run parked awaiting: await its current run."""
    child = awaited["child"]
    running = companion_result(
        name=awaited["name"],
        agent_type=awaited["agent_type"],
        session_id=child["session_id"],
        status="running",
        run_id=child["run_id"],
    )
    return _ended(run, call, running, child, await_child(run, child))


def _ended(
    run: RunContext, call: ParsedToolCall, running: dict[str, Any], child: ChildStartOutput, ended: ChildWaitOutput
) -> ToolStepOutput | None:
    """A blocking call's result from how its companion's run ended; ``None``: it waits on a human, park."""
    if ended["status"] in _WAITS_ON_A_HUMAN and DBOS.patch(AWAITING_CHILDREN_PATCH):
        wait = SuspendedChildWait(
            child_session_id=child["session_id"],
            parent_tool_call_id=call.id,
            spawned_at=child["started_at_ms"] or 0,
        )
        run.awaiting_children.append(wait.model_dump(mode="json"))
        return None
    status = _ENDED_AS.get(ended["status"], "failed")
    if ended["status"] == "failed" and str(ended["error"] or "").startswith(("aborted", "terminated")):
        status = "terminated"
    result = {**running, "status": status}
    if status == "completed":
        result["output"] = ended["output"]
    elif ended["error"] is not None:
        result["error"] = ended["error"]
    if status == "running":  # parked on a human: its end is announced later, like a non-blocking one
        result["notify"] = True
    return _output(call, result=result)


_ENDED_AS: dict[str, CompanionStatus] = {
    "completed": "completed",
    "failed": "failed",
    "interrupted": "interrupted",
    "suspended_client_tool": "running",
    "suspended_awaiting_children": "running",
    "aborted": "terminated",
    "timeout": "terminated",
}
"""A child run's end (:class:`~.step_outputs.ChildWaitOutput`) as the parent's model reads it."""


def _start_child(run: RunContext, workflow_id: str, request: dict[str, Any]) -> str | None:
    """Start the companion's run as a DBOS child workflow (a replay gets the recorded child back).

    Returns why it could not be started, if it could not (the call fails; the parent goes on).
    """
    workflow = run.rt.run_workflow
    try:
        if workflow is None:
            raise HelixError("no agent-run workflow is installed (create a DBOSAgentExecutor)")
        with SetWorkflowID(workflow_id):
            DBOS.start_workflow(workflow, request)
    except Exception as exc:
        if is_dbos_replay_error(exc):
            raise
        return public_error_message(exc)
    return None


def _wait(run: RunContext, name: str, run_id: str | None, deadline_ms: int | None) -> CompanionStatusOutput:
    out: CompanionStatusOutput = DBOS.run_step(
        {"name": step_names.companion_wait(run.agent.name)}, wait_step, run.who, name, run_id, deadline_ms
    )
    return out


def _open(run: RunContext, request: OpenRequest) -> CompanionOpenOutput:
    out: CompanionOpenOutput = DBOS.run_step(
        {"name": step_names.companion_open(run.agent.name)}, open_step, run.who, request
    )
    return out


def _wait_for_result(run: RunContext, call: ParsedToolCall, args: WaitForResultInput) -> ToolStepOutput:
    """Wait for the named companion's current run; with ``timeoutMs``, at most that long."""
    first = _status(run, [args.name])
    if not first["children"]:
        return _output(call, error=f"No companion named {args.name!r}.")
    child = first["children"][0]
    if child["status"] != "running" or child["workflow_id"] is None:
        return _output(call, result=_view(child))
    deadline = None if args.timeout_ms is None else first["now_ms"] + args.timeout_ms
    return _child_output(call, _wait(run, args.name, child["run_id"], deadline), args.name)


# --- results ------------------------------------------------------------------------------------------


def _view(child: CompanionChild) -> dict[str, Any]:
    return companion_result(
        name=child["name"],
        agent_type=child["agent_type"],
        session_id=child["session_id"],
        status=child["status"],
        run_id=child["run_id"],
        output=child["output"],
        error=child["error"],
    )


def _child_output(call: ParsedToolCall, out: CompanionStatusOutput, name: str) -> ToolStepOutput:
    if not out["children"]:
        return _output(call, error=f"No companion named {name!r}.")
    return _output(call, result=_view(out["children"][0]))


def _output(call: ParsedToolCall, *, result: Any = None, error: str | None = None) -> ToolStepOutput:
    """A companion call's result in the shape of a tool step's output (recorded by the tool phase)."""
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json")
    return {
        "tool_call_id": call.id,
        "tool_name": call.name,
        "success": error is None,
        "result": result if error is None else None,
        "error": error,
        "writes": {"ops": [], "warnings": []},
        "patches": [],
        "events": [],
        "duration_ms": 0.0,
        "finish_output": None,
        "transform_error": None,
    }


class CompanionsCapability(RunCapability):
    """Persistent companions on the seam: notices before each model call, ``companion__*`` calls after the humans.

    Before a model call, a non-blocking companion run that ended since the model last heard is
    announced (one status step, only when the transcript awaits one). A step's ``companion__*`` calls
    run in their own phase, in call order, after the batch's human-answered calls.
    """

    name = "companions"
    replay_patches = (SCOPED_CALL_IDS_PATCH, AWAITING_CHILDREN_PATCH)

    def __init__(self) -> None:
        self.awaited: dict[str, AwaitedChild] = {}

    def before_model_call(self, run: RunContext) -> None:
        deliver_notices(run)

    def calls_left_pending(self, run: RunContext, calls: list[ParsedToolCall]) -> dict[str, HitlKind]:
        # Not a human's call: the companions the previous run parked awaiting, kept for this batch.
        self.awaited = awaited_companions(run, calls) if run.agent.persistent_agents else {}
        return {}

    def after_human_calls(self, run: RunContext, batch: ToolBatch, results: dict[str, ToolStepOutput]) -> None:
        awaited, self.awaited = self.awaited, {}
        results.update(run_companion_phase(run, list(batch.companion), awaited))


__all__ = [
    "AWAITING_CHILDREN_PATCH",
    "CompanionsCapability",
    "awaited_companions",
    "deliver_notices",
    "run_companion_phase",
]
