"""The bodies of the persistent-companion steps: every store read and write a companion call makes.

Each runs as one DBOS step (names in :mod:`.step_names`, outputs typed in :mod:`.step_outputs`), so
the parent's workflow replays on what they recorded; each is also safe to re-execute after a crash
before its output was recorded:

- ``open`` writes the child's run with ``request_key = companion:{call key}`` (the tool call with
  the parent's turn and step, ``RunContext.call_key``); a re-execution
  finds that run as the child's current one and returns it (``opened``) instead of writing again.
  So the consult is appended to the child's transcript exactly once, by the store's own dedupe;
- ``status`` and ``wait`` only read (and mark the parent's ref of a finished child, idempotently);
- ``terminate`` stops what is still active (:func:`~.child_control.stop_child`, which cascades to the
  companion's running children); a second pass finds nothing active.

What to do is decided by the pure :func:`~helix_dbos.orchestration.companions.plan_dispatch`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from helix_dbos.agent import AgentConfig
from helix_dbos.errors import HelixError
from helix_dbos.messages import Message, UserMessage
from helix_dbos.orchestration.companions import (
    DispatchPlan,
    auto_name,
    child_session_id,
    companion_status,
    continuation_workflow_id,
    dispatch_request_key,
    plan_dispatch,
    respawn_workflow_id,
)
from helix_dbos.orchestration.state_operations import default_custom_state
from helix_dbos.runtime import services, starts
from helix_dbos.runtime.child_control import interrupt_child, stop_child
from helix_dbos.runtime.run_request import RunIdentity
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.step_outputs import (
    AwaitedChild,
    CompanionChild,
    CompanionOpenOutput,
    CompanionStatusOutput,
)
from helix_dbos.session import AgentInput, SubSessionRef
from helix_dbos.store.base import SessionRecord, StartRun
from helix_dbos.store.engine import now_ms

WAIT_POLL_SECONDS = 0.05
"""How often ``wait`` re-reads the child's session (one small read each)."""


@dataclass(frozen=True)
class OpenRequest:
    """A ``spawnAgent`` / ``sendMessage`` call, as the ``open`` step receives it."""

    kind: Literal["spawnAgent", "sendMessage"]
    tool_call_id: str
    call_key: str
    """What the run's ids and request key derive from (``RunContext.call_key``)."""
    name: str | None
    agent_type: str | None
    message: str


# --- reading companions ---------------------------------------------------------------------------


def _persistent_refs(rt: RuntimeServices, parent_session_id: str) -> dict[str, SubSessionRef]:
    return {
        ref.name: ref
        for ref in rt.store.get_sub_session_refs(parent_session_id)
        if ref.mode == "persistent" and ref.name is not None
    }


def _child(rt: RuntimeServices, ref: SubSessionRef) -> CompanionChild:
    session = rt.store.load_session(ref.sub_session_id)
    run = rt.store.get_current_run(ref.sub_session_id) if session is not None else None
    status = companion_status(session.status if session else None, aborted=bool(session and session.aborted))
    return {
        "name": ref.name or ref.sub_session_id,
        "agent_type": ref.agent_type,
        "session_id": ref.sub_session_id,
        "status": status,
        "run_id": run.run_id if run else None,
        "workflow_id": run.workflow_id if run else None,
        "output": session.output if session is not None and status == "completed" else None,
        "error": (session.abort_reason or session.error) if session is not None and status != "completed" else None,
    }


def _mark_ref(rt: RuntimeServices, parent_session_id: str, child: CompanionChild) -> None:
    """Keep the parent's ref in step with what was read (it is a summary; the session is the truth)."""
    if child["status"] == "running":
        return
    status = "completed" if child["status"] == "completed" else "failed"
    rt.store.update_sub_session_ref(parent_session_id, child["session_id"], status=status, completed_at=now_ms())


def status_step(who: RunIdentity, names: list[str] | None) -> CompanionStatusOutput:
    """Read the named companions (all when ``names`` is ``None``), in the order they were spawned."""
    rt = services.current()
    refs = _persistent_refs(rt, who.session_id)
    chosen = list(refs.values()) if names is None else [refs[n] for n in names if n in refs]
    children = [_child(rt, ref) for ref in chosen]
    for child in children:
        _mark_ref(rt, who.session_id, child)
    return {"now_ms": now_ms(), "children": children}


def awaited_step(who: RunIdentity, calls: list[tuple[str, str | None]]) -> dict[str, AwaitedChild]:
    """``{agent}.companion.awaited``: the blocking companions the previous run parked awaiting, by call id.

    ``calls``: the continuation's outstanding spawn/send calls (call id, companion name if given). A
    companion is awaited when its ref is still ``running`` (a wait that saw it park on a human
    leaves it so) and was opened by that call (or bears that name). Its current run is what the
    parent now waits on: the run that carried the human's answer, not the one that parked.
    """
    rt = services.current()
    refs = [
        r for r in rt.store.get_sub_session_refs(who.session_id) if r.mode == "persistent" and r.status == "running"
    ]
    found: dict[str, AwaitedChild] = {}
    for call_id, name in calls:
        ref = next((r for r in refs if r.parent_tool_call_id == call_id or (name and r.name == name)), None)
        run = rt.store.get_current_run(ref.sub_session_id) if ref is not None else None
        if ref is None or run is None:
            continue
        found[call_id] = {
            "name": ref.name or ref.sub_session_id,
            "agent_type": ref.agent_type,
            "child": {
                "session_id": ref.sub_session_id,
                "run_id": run.run_id,
                "workflow_id": run.workflow_id,
                "request": None,
                "deadline_ms": None,
                "timeout_ms": None,
                "started_at_ms": ref.started_at,
                "error": None,
            },
        }
    return found


def wait_step(who: RunIdentity, name: str, run_id: str | None, deadline_ms: int | None) -> CompanionStatusOutput:
    """Wait until the companion's run ``run_id`` ended (or another one started), or ``deadline_ms``.

    The session is the truth the parent reads, so this polls it (one small read per
    :data:`WAIT_POLL_SECONDS`) rather than the DBOS workflow's result, which DBOS polls once a second.
    The deadline was recorded before this step, so a re-execution after a crash waits only for what
    is left of it. It also returns when the companion parks on a human (its run ``suspended``) and
    when the parent itself is aborted or interrupted, so a parent is never stuck behind a child.
    """
    rt = services.current()
    ref = _persistent_refs(rt, who.session_id).get(name)
    child: CompanionChild | None = None
    while ref is not None:
        child = _child(rt, ref)
        if child["status"] != "running" or child["run_id"] != run_id:
            break
        if deadline_ms is not None and now_ms() >= deadline_ms:
            break
        run = rt.store.get_run(run_id) if run_id is not None else None
        if run is not None and run.status == "suspended":
            break
        parent = rt.store.load_session(who.session_id)
        if parent is None or parent.aborted or parent.interrupt_requested:
            break
        time.sleep(WAIT_POLL_SECONDS)
    if child is None:
        return {"now_ms": now_ms(), "children": []}
    _mark_ref(rt, who.session_id, child)
    return {"now_ms": now_ms(), "children": [child]}


# --- opening a companion's run ------------------------------------------------------------------------


def open_step(who: RunIdentity, request: OpenRequest) -> CompanionOpenOutput:
    """Decide and write what a spawn/send does to the child session (see the module docstring)."""
    rt = services.current()
    parent = who.agent
    refs = _persistent_refs(rt, who.session_id)
    name = request.name
    if name is None:
        name = auto_name(request.agent_type or "", refs.keys())
    ref = refs.get(name)
    agent_type = request.agent_type or (ref.agent_type if ref is not None else "")
    config = parent.persistent_agent(agent_type)
    child_id = child_session_id(who.session_id, name)
    base: CompanionOpenOutput = {
        "action": "refuse",
        "name": name,
        "agent_type": agent_type,
        "session_id": child_id,
        "notify": config is not None and config.mode == "non-blocking",
        "error": None,
        "workflow_id": None,
        "run_id": None,
        "request": None,
    }
    if config is None:
        known = ", ".join(p.agent.name for p in parent.persistent_agents)
        if request.kind == "sendMessage" and ref is None:
            return {**base, "error": f"No companion named {name!r}. Spawn it with companion__spawnAgent first."}
        return {**base, "error": f"Unknown companion agent type {agent_type!r}. Available: {known}."}
    session = rt.store.load_session(child_id)
    current = rt.store.get_current_run(child_id) if session is not None else None
    plan = plan_dispatch(
        request.kind,
        name=name,
        agent_type=request.agent_type,
        child_agent_type=session.agent_type if session is not None else None,
        status=companion_status(session.status, aborted=session.aborted) if session is not None else None,
        current_request_key=current.request_key if current is not None else None,
        call_key=request.call_key,
    )
    if plan.action == "refuse":
        return {**base, "error": plan.error}
    if plan.action == "interrupt":
        interrupt_child(rt, child_id, f"companion__sendMessage {request.tool_call_id}")
        running = (current.workflow_id, current.run_id) if current is not None else (None, None)
        return {**base, "action": "interrupt", "workflow_id": running[0], "run_id": running[1]}
    try:
        return _open_run(rt, who, request, base, plan, config.agent, session)
    except HelixError as exc:  # a race with another writer of the child session: tell the model
        return {**base, "error": f"Could not start companion {name!r}: {exc.message}"}


def _open_run(
    rt: RuntimeServices,
    who: RunIdentity,
    request: OpenRequest,
    base: CompanionOpenOutput,
    plan: DispatchPlan,
    agent: AgentConfig,
    session: SessionRecord | None,
) -> CompanionOpenOutput:
    child_id = base["session_id"]
    consult: list[Message] = [UserMessage(content=request.message)]
    resume_messages: list[Message] = []
    if plan.action == "opened":
        run = rt.store.get_current_run(child_id)
        child = rt.store.load_session(child_id)
        if run is None or child is None:  # unreachable: "opened" means the run exists
            raise HelixError(f"companion session {child_id!r} lost its run", code="framework_internal_error")
        if run.mode == "resume":
            resume_messages = consult
        started_run, started_session = run, child
    else:
        start = _start_for(rt, who, request, plan, agent, session, consult, child_id)
        if plan.action == "resume":
            resume_messages = consult
        started = rt.store.start_run(start)
        started_run, started_session = started.run, started.session
    # Idempotent both: the ref exists once (insert-ignore), and a re-executed step re-marks it.
    ref = SubSessionRef(
        sub_session_id=child_id,
        agent_type=agent.name,
        parent_tool_call_id=request.tool_call_id,
        started_at=started_run.started_at,
        mode="persistent",
        name=base["name"],
    )
    rt.store.add_sub_session_refs(who.session_id, [ref])
    rt.store.update_sub_session_ref(who.session_id, child_id, status="running", completed_at=None)
    rt.streams.open(started_session.stream_id, started_run.run_id, agent.name)
    run_request = starts.child_run_request(
        agent,
        started_run,
        started_session,
        parent_session_id=who.session_id,
        parent_stream_id=who.stream_id,
        root_session_id=who.root_session_id or who.session_id,
        mode="persistent",
        executor_hooks=rt.executor_hooks,
    ).model_copy(update={"resume_messages": resume_messages})
    return {
        **base,
        "action": plan.action,
        "workflow_id": started_run.workflow_id,
        "run_id": started_run.run_id,
        "request": run_request.model_dump(mode="json"),
    }


def _start_for(
    rt: RuntimeServices,
    who: RunIdentity,
    request: OpenRequest,
    plan: DispatchPlan,
    agent: AgentConfig,
    session: SessionRecord | None,
    consult: list[Message],
    child_id: str,
) -> StartRun:
    """The store write that opens the child's run for ``plan`` (built by :mod:`.starts`)."""
    key = dispatch_request_key(request.call_key)
    fingerprint = rt.registry.fingerprint(agent.name)
    at = now_ms()
    if plan.action == "create" or session is None:
        return starts.child_first_turn(
            agent,
            child_id,
            request.message,
            parent_session_id=who.session_id,
            root_session_id=who.root_session_id or who.session_id,
            request_key=key,
            fingerprint=fingerprint,
            metadata=None,
            now_ms=at,
        )
    sequence = rt.streams.latest_sequence(session.stream_id)
    if plan.action == "continue":
        # The re-consult: completed -> active under the session's version, the dangling __finish__
        # healed, the consult appended, a new turn (its step count starts at 0: a fresh budget).
        history = rt.store.get_message_prefix(session.session_id, session.message_count)
        start = starts.next_turn(
            agent,
            session,
            AgentInput(message=request.message),
            history,
            request_key=key,
            fingerprint=fingerprint,
            stream_start_sequence=sequence,
            now_ms=at,
        )
        workflow_id = continuation_workflow_id(session.session_id, request.call_key)
    elif plan.action == "respawn":
        start = starts.continuation(
            agent,
            session,
            mode="retry",
            extra=consult,
            truncate_to=0,
            reset_state=default_custom_state(agent),
            fingerprint=fingerprint,
            stream_start_sequence=sequence,
            now_ms=at,
        )
        workflow_id = respawn_workflow_id(session.session_id, request.call_key)
    else:
        # resume: an interrupted companion goes on; its workflow appends the consult once the batch it
        # stopped in is answered (a user message never lands between a call and its result).
        start = starts.continuation(
            agent,
            session,
            mode="resume",
            extra=[],
            truncate_to=None,
            reset_state=None,
            fingerprint=fingerprint,
            stream_start_sequence=sequence,
            now_ms=at,
        )
        workflow_id = continuation_workflow_id(session.session_id, request.call_key)
    return start.model_copy(update={"run_id": workflow_id, "workflow_id": workflow_id, "request_key": key})


# --- terminating --------------------------------------------------------------------------------------


def terminate_step(who: RunIdentity, name: str, reason: str | None) -> CompanionStatusOutput:
    """Stop the companion's run (and its running children) if it is active; report how it is now."""
    rt = services.current()
    ref = _persistent_refs(rt, who.session_id).get(name)
    if ref is None:
        return {"now_ms": now_ms(), "children": []}
    stop_child(rt, ref.sub_session_id, f"terminated: {reason}" if reason else "terminated")
    child = _child(rt, ref)
    _mark_ref(rt, who.session_id, child)
    return {"now_ms": now_ms(), "children": [child]}


__all__ = ["OpenRequest", "open_step", "status_step", "terminate_step", "wait_step"]
