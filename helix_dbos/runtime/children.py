"""Child runs: starting and awaiting a child agent run from inside a parent's workflow.

A sub-agent call (and a persistent companion) runs its agent as a **DBOS child workflow** of the
parent's run, in a session of its own. This module is that primitive; what a call *means* (which
input, which result, which chunks) is the caller's (:mod:`.sub_agents`, :mod:`.companions`).

API (stable; all of it is workflow code except where a step is named)::

    child = ChildRun(agent=..., tool_call_id=..., call_key=run.call_key(...), message=..., mode="ephemeral", ...)
    opened = open_child(run, child)      # step {agent}.child.start + DBOS.start_workflow
    ...                                  # the parent does other work meanwhile
    ended = await_child(run, opened)     # step {agent}.child.wait -> ChildWaitOutput

- :func:`open_child` takes one DBOS step (``{agent}.child.start``, :func:`start_child_step`) that
  opens the child's session and run in the store (``SessionStore.start_run`` with
  :func:`~.starts.child_first_turn`, or ``ChildRun.build_start``), records the
  :class:`~helix_dbos.session.SubSessionRef` on the parent, and fixes the deadline. The open is
  idempotent: its request key derives from the parent's tool-call id, so a re-executed step finds
  the run it opened before. Then, in workflow code, it starts the child's ``agent_run_workflow``
  with ``DBOS.start_workflow`` under the child run's deterministic workflow id
  (``{parent session}-sub-{turn}.{step}-{tool call id}-turn-1`` for an ephemeral child: the
  parent's turn and step make it unique in the session, see :func:`~.ids.scoped_call_key`; runs
  recorded before that replay with ``{parent session}-sub-{tool call id}``). DBOS records a start
  made from workflow code, so a replayed parent never starts a second child and a recovered parent
  re-attaches to the one running. The child starts locally, never on the run queue: a parent
  holding a queue slot while its child waits for one could deadlock.
- :func:`await_child` takes one step (``{agent}.child.wait``, :func:`wait_child_step`) that waits
  for the child's outcome event. The step also ends the wait when the deadline recorded at open
  passes (the child is stopped: session aborted, workflow cancelled) and when the parent is aborted
  (the child is stopped too); an interrupt of the parent is passed on to the child, whose run then
  ends ``interrupted``. A wait never hangs on a parent that was stopped.
  A child whose run was opened but whose workflow could not start takes the same step name with
  :func:`close_unstarted_step`, which ends that run ``failed`` (nothing else ever would).
- Stream mirroring is the child's own doing: its ``RunRequest`` carries the parent's stream id,
  and every chunk the child writes (``RunContext.emit``, the LLM step's deltas) is also written to
  the parent's stream, keyed by the child's run so a replay never stores it twice.

Outside workflows, :func:`~.child_control.stop_child` stops a child tree (the executor's cascades use it);
``helix_dbos.store.usage_tree`` sums a session's usage with its children's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from dbos import DBOS, SetWorkflowID

from helix_dbos._clock import now_ms
from helix_dbos.agent import AgentConfig
from helix_dbos.errors import HelixError, public_error_message
from helix_dbos.runtime import services, starts, step_names
from helix_dbos.runtime._dbos_compat import is_dbos_replay_error
from helix_dbos.runtime.abort import durable_stop_reason
from helix_dbos.runtime.child_control import interrupt_child, running_children, stop_child, timeout_error
from helix_dbos.runtime.ids import child_request_key, child_session_id_for
from helix_dbos.runtime.run_request import OUTCOME_EVENT, RunIdentity
from helix_dbos.runtime.step_outputs import ChildStartOutput, ChildWaitOutput
from helix_dbos.session import SubSessionRef
from helix_dbos.store.base import SessionStore, StartRun

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext

ChildMode = Literal["ephemeral", "persistent"]

_WAIT_SLICE_SECONDS = 1.0
"""How long one wait on the child's outcome event lasts before the parent's flags are read again."""
_STILL_RUNNING = ("PENDING", "ENQUEUED", "DELAYED")


@dataclass(frozen=True)
class ChildRun:
    """A child run a parent's tool call asks for."""

    agent: AgentConfig
    """The child's agent (registered in every worker: recovered children resolve it by name)."""
    tool_call_id: str
    """The parent's tool call: the child's request key derives from it."""
    call_key: str
    """What the child's ids derive from (``RunContext.call_key``: unique per turn and step, or the bare
    ``tool_call_id`` for a run recorded before that); required, so no caller derives colliding ids."""
    message: str
    """The child's input (its first user message)."""
    mode: ChildMode = "ephemeral"
    name: str | None = None
    """A persistent companion's name (recorded on the parent's ``SubSessionRef``)."""
    timeout_ms: int | None = None
    """Wall-clock budget from the open; past it the child is stopped and the wait ends ``timeout``."""
    session_id: str | None = None
    """The child's session; ``None``: ``{parent session}-sub-{call key}``."""
    metadata: dict[str, Any] | None = None
    """Stored on a new child session."""
    build_start: Callable[[SessionStore, int], StartRun] | None = None
    """How to open the run, given the store and the time (ms); ``None``: a new session's first turn
    (:func:`~.starts.child_first_turn`). A companion continuing its session passes its own."""


# --- workflow code ----------------------------------------------------------------------------------


def open_child(run: RunContext, child: ChildRun) -> ChildStartOutput:
    """Open the child's run (a step) and start its workflow; ``error`` is set when either failed."""
    opened: ChildStartOutput = DBOS.run_step(
        {"name": step_names.child_start(run.agent.name)}, start_child_step, run.who, child
    )
    if opened["error"] is not None or opened["request"] is None:
        return opened
    workflow = run.rt.run_workflow
    try:
        if workflow is None:
            raise HelixError("no agent-run workflow is installed (create a DBOSAgentExecutor)")
        with SetWorkflowID(opened["workflow_id"]):
            DBOS.start_workflow(workflow, opened["request"])
    except Exception as exc:
        if is_dbos_replay_error(exc):
            raise
        return {**opened, "error": f"could not start the child workflow: {public_error_message(exc)}"}
    return opened


def await_child(run: RunContext, opened: ChildStartOutput, *, hot_window: bool = False) -> ChildWaitOutput:
    """Wait for an opened child to end (a step; see the module docstring).

    ``hot_window``: wait at most the hot window, then answer ``running`` (:func:`wait_child_hot_step`).
    """
    if opened["error"] is not None and not opened["workflow_id"]:
        return {"status": "failed", "output": None, "error": opened["error"], "duration_ms": 0.0}
    wait = wait_child_hot_step if hot_window else wait_child_step
    body = wait if opened["error"] is None else close_unstarted_step
    ended: ChildWaitOutput = DBOS.run_step({"name": step_names.child_wait(run.agent.name)}, body, run.who, opened)
    return ended


# --- step bodies --------------------------------------------------------------------------------------


def start_child_step(parent: RunIdentity, child: ChildRun) -> ChildStartOutput:
    """``{agent}.child.start``: open the child's session and run, record it on the parent.

    Idempotent: a re-executed step meets its own run (same request key) and records nothing twice.
    A refusal by the store (the child's session belongs to another agent, is already running, ...)
    is the output's ``error``, not an exception: the parent's call fails, its run goes on.
    """
    rt = services.current()
    session_id = child.session_id or child_session_id_for(parent.session_id, child.call_key)
    root = parent.root_session_id or parent.session_id
    now = now_ms()
    empty: ChildStartOutput = {
        "session_id": session_id,
        "run_id": "",
        "workflow_id": "",
        "request": None,
        "deadline_ms": None,
        "timeout_ms": child.timeout_ms,
        "started_at_ms": None,
        "error": None,
    }
    try:
        agent = rt.registry.register(child.agent)
        start = (
            child.build_start(rt.store, now)
            if child.build_start is not None
            else starts.child_first_turn(
                agent,
                session_id,
                child.message,
                parent_session_id=parent.session_id,
                root_session_id=root,
                request_key=child_request_key(child.tool_call_id),
                fingerprint=rt.registry.fingerprint(agent.name),
                metadata=child.metadata,
                now_ms=now,
            )
        )
        started = rt.store.start_run(start)
    except HelixError as exc:
        rt.logger.error(
            "[helix-dbos] child session not created",
            {"session_id": parent.session_id, "child_session_id": session_id, "error": exc.message},
        )
        return {**empty, "error": f"the child session could not be created: {public_error_message(exc)}"}
    session, run = started.session, started.run
    deadline = None if child.timeout_ms is None else run.started_at + child.timeout_ms
    ref = SubSessionRef(
        sub_session_id=session.session_id,
        agent_type=agent.name,
        parent_tool_call_id=child.tool_call_id,
        started_at=run.started_at,
        mode=child.mode,
        name=child.name,
        deadline_ms=deadline,
    )
    rt.store.add_sub_session_refs(parent.session_id, [ref])
    if child.mode == "persistent":  # a re-consulted companion's ref exists already: running again
        rt.store.update_sub_session_ref(parent.session_id, session.session_id, status="running")
    rt.streams.open(session.stream_id, run.run_id, agent.name)
    request = starts.child_run_request(
        agent,
        run,
        session,
        parent_session_id=parent.session_id,
        parent_stream_id=parent.stream_id,
        root_session_id=root,
        mode=child.mode,
        executor_hooks=rt.executor_hooks,
    )
    if deadline is not None:
        request = request.model_copy(update={"deadline_ms": deadline, "timeout_ms": child.timeout_ms})
    return {
        "session_id": session.session_id,
        "run_id": run.run_id,
        "workflow_id": run.workflow_id,
        "request": request.model_dump(mode="json"),
        "deadline_ms": deadline,
        "timeout_ms": child.timeout_ms,
        "started_at_ms": run.started_at,
        "error": None,
    }


def wait_child_step(parent: RunIdentity, opened: ChildStartOutput) -> ChildWaitOutput:
    """``{agent}.child.wait``: the child's outcome, or ``timeout`` / ``aborted`` (the child stopped).

    Everything it decides on is durable: the deadline was recorded by the open, the parent's abort
    and interrupt flags live in the store, and the outcome is a DBOS event. A step re-executed after
    a crash therefore waits for the same child against the same deadline.
    """
    return _wait_for_child(parent, opened, hot_until_ms=None)


def wait_child_hot_step(parent: RunIdentity, opened: ChildStartOutput) -> ChildWaitOutput:
    """``{agent}.child.wait`` holding the thread for at most the hot window: else ``running``.

    The window (``hot_window_seconds``, the one human waits use) counts from the child's start,
    which the open recorded: a step re-executed after a crash, and the waits of a batch's later
    children, end by the same instant. ``running`` (or a child parked itself) means the parent
    parks on the child (:mod:`.sub_agents`): the ref stays ``running`` for the wake and the sweep.
    """
    started = opened["started_at_ms"] or now_ms()
    hot_until = started + int(services.current().hot_window_seconds * 1000)
    return _wait_for_child(parent, opened, hot_until_ms=hot_until)


def _wait_for_child(parent: RunIdentity, opened: ChildStartOutput, *, hot_until_ms: int | None) -> ChildWaitOutput:
    rt = services.current()
    child_session, workflow_id = opened["session_id"], opened["workflow_id"]
    deadline = opened["deadline_ms"]
    interrupt_passed_on = False
    while True:
        now = now_ms()
        if deadline is not None and now >= deadline:
            # A child that ended before its deadline keeps its own end, even when its parent (parked)
            # looks only now: the result is the one a parent waiting hot would have seen.
            outcome = _ended_before(rt.store, opened, deadline)
            if outcome is not None:
                return _child_ended(rt.store, parent, opened, outcome)
            error = timeout_error(opened["timeout_ms"])
            stop_child(rt, child_session, error)
            _close_ref(rt.store, parent.session_id, child_session, "failed")
            return {"status": "timeout", "output": None, "error": error, "duration_ms": _since(opened)}
        limits = [_WAIT_SLICE_SECONDS]
        limits += [] if deadline is None else [(deadline - now) / 1000]
        limits += [] if hot_until_ms is None else [(hot_until_ms - now) / 1000]
        outcome = DBOS.get_event(workflow_id, OUTCOME_EVENT, timeout_seconds=max(0.01, min(limits)))
        if outcome is None:
            outcome = _ended_without_event(rt.store, workflow_id, child_session)
        if outcome is not None:
            if deadline is not None and now_ms() >= deadline:
                continue  # the deadline passed meanwhile: the top tells an end before it from a timeout
            return _child_ended(rt.store, parent, opened, outcome)
        stop = durable_stop_reason(rt.store, parent.session_id)
        if stop is not None and stop.startswith("aborted"):
            stop_child(rt, child_session, f"parent {stop}")
            _close_ref(rt.store, parent.session_id, child_session, "failed")
            return {"status": "aborted", "output": None, "error": f"parent {stop}", "duration_ms": _since(opened)}
        if stop is not None and not interrupt_passed_on:
            interrupt_child(rt, child_session, stop)
            interrupt_passed_on = True
        if hot_until_ms is not None and now_ms() >= hot_until_ms and _session_active(rt.store, child_session):
            # A child whose session has ended but whose outcome is not out yet (its workflow died
            # between the two and is being recovered) is awaited hot: parking on it would have the
            # wake, which reads the session, continue the parent at once, to find it so again.
            return {"status": "running", "output": None, "error": None, "duration_ms": _since(opened)}


def _session_active(store: SessionStore, session_id: str) -> bool:
    session = store.load_session(session_id)
    return session is not None and session.status == "active"


def _child_ended(
    store: SessionStore, parent: RunIdentity, opened: ChildStartOutput, outcome: dict[str, Any]
) -> ChildWaitOutput:
    status = outcome.get("status", "failed")
    if not str(status).startswith("suspended"):  # a child parked on a human is still running
        _close_ref(store, parent.session_id, opened["session_id"], "completed" if status == "completed" else "failed")
    return {
        "status": status,
        "output": outcome.get("output"),
        "error": outcome.get("error"),
        "duration_ms": _since(opened),
    }


def _ended_before(store: SessionStore, opened: ChildStartOutput, deadline_ms: int) -> dict[str, Any] | None:
    """The outcome of a child run that ended (not suspended) before ``deadline_ms``; ``None`` otherwise."""
    run = store.get_run(opened["run_id"]) if opened["run_id"] else None
    if run is None or run.status in ("running", "suspended") or run.completed_at is None:
        return None
    if run.completed_at >= deadline_ms:
        return None
    outcome = DBOS.get_event(opened["workflow_id"], OUTCOME_EVENT, timeout_seconds=0)
    return outcome if outcome is not None else _ended_without_event(store, opened["workflow_id"], opened["session_id"])


def close_unstarted_step(parent: RunIdentity, opened: ChildStartOutput) -> ChildWaitOutput:
    """``{agent}.child.wait`` for a child whose run was opened but whose workflow could not start.

    Nothing would ever end that run: no workflow runs it, and the orphan sweep leaves child runs to
    their parent. So the parent ends it ``failed`` here (and closes its stream and its ref); a
    companion left like this would otherwise look busy forever, and ``sendMessage`` would wait on it.
    """
    rt = services.current()
    error = opened["error"] or "the child workflow could not be started"
    child_session = opened["session_id"]
    session = rt.store.load_session(child_session)
    current = rt.store.get_current_run(child_session)
    if (
        session is not None
        and current is not None
        and current.run_id == opened["run_id"]
        and session.status == "active"
    ):
        rt.store.finish_run(
            child_session, current.run_id, session_status="failed", run_status="failed", error=error, now_ms=now_ms()
        )
        rt.streams.fail(session.stream_id, error)
    _close_ref(rt.store, parent.session_id, child_session, "failed")
    return {"status": "failed", "output": None, "error": error, "duration_ms": 0.0}


def _since(opened: ChildStartOutput) -> float:
    started = opened.get("started_at_ms")
    return float(max(0, now_ms() - started)) if started is not None else 0.0


def _ended_without_event(store: SessionStore, workflow_id: str, child_session: str) -> dict[str, Any] | None:
    """How a child's workflow ended when it published no outcome (cancelled, errored); ``None`` if running."""
    status = DBOS.get_workflow_status(workflow_id)
    if status is None or status.status in _STILL_RUNNING:
        return None
    if status.status == "SUCCESS":
        result: dict[str, Any] = DBOS.retrieve_workflow(workflow_id).get_result()
        return result
    session = store.load_session(child_session)
    error = session.error if session is not None and session.error else f"the child workflow ended {status.status}"
    return {"status": "failed", "output": None, "error": error}


def _close_ref(store: SessionStore, parent_session: str, child_session: str, status: str) -> None:
    store.update_sub_session_ref(parent_session, child_session, status=status, completed_at=now_ms())


__all__ = [
    "ChildMode",
    "ChildRun",
    "await_child",
    "close_unstarted_step",
    "interrupt_child",
    "open_child",
    "running_children",
    "start_child_step",
    "stop_child",
    "wait_child_hot_step",
    "wait_child_step",
]
