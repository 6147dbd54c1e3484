"""The blocking side of the AG-UI routes: start or find a turn, record answers, find a run to re-attach to.

Each function runs in the service's thread pool (``ServiceOperations.call``) and answers an
:class:`AGUIReply`: which stream to read, from where, and the custom state the response starts
from. The decisions themselves are pure (:mod:`helix_dbos.service.agui`).

The state a response starts from is the newest checkpoint's, anchored in the stream by that
checkpoint's ``checkpoint_created`` chunk (the patches before it are in the checkpoint, the ones
after it are not; :class:`~helix_dbos.service.agui_events.AGUIEventTranslator` follows them; so a
replay from a run's start shows the state as of that checkpoint from its first event), or,
before the session's first checkpoint, the session's state read *before* looking for one: had a
step committed in between, the checkpoint would be found, so every patch the stream holds after
the run's start is missing from that state. A ``STATE_DELTA`` never repeats what the
``STATE_SNAPSHOT`` already holds.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from helix_dbos.errors import HelixError, SessionNotFoundError, ToolCallAlreadyAnsweredError
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service.agui import AGUIAnswers, AGUITurn, tool_answers
from helix_dbos.service.operations import served_agent
from helix_dbos.session import AgentInput

__all__ = ["AGUIReply", "StateAnchor", "agui_agent", "answer_calls", "reattach", "start_turn"]


@dataclass(frozen=True)
class StateAnchor:
    """The custom state of a checkpoint, and where in the stream to look for its announcement."""

    state: dict[str, Any]
    checkpoint_id: str | None
    """``None``: the state before the session's first checkpoint (every later patch applies to it)."""
    read_from: int
    """The checkpoint's run started after this sequence: its ``checkpoint_created`` chunk is later."""


@dataclass(frozen=True)
class AGUIReply:
    """Where an AG-UI response reads from and what it starts with."""

    session_id: str
    run_id: str
    """The helix run (message ids derive from it)."""
    stream_id: str
    run_start: int
    """The run's first chunk comes after this stream sequence."""
    emit_after: int
    """The client has seen the run up to this sequence: only later chunks become events."""
    state: StateAnchor
    client_tools: frozenset[str]

    @property
    def read_from(self) -> int:
        """Where to open the stream: early enough for the state's anchor and for the run's open messages."""
        return min(self.run_start, self.emit_after, self.state.read_from)


def agui_agent(executor: DBOSAgentExecutor, forwarded_props: Any) -> str:
    """The agent ``forwardedProps.agent`` names, or the service's only agent when it names none."""
    name = forwarded_props.get("agent") if isinstance(forwarded_props, dict) else None
    return served_agent(
        executor, name, "pass it as forwardedProps (agent.runAgent({ forwardedProps: { agent: '...' } }))"
    )


def _client_tools(executor: DBOSAgentExecutor, agent: str) -> frozenset[str]:
    config = executor.registry.get(agent)
    return frozenset(t.name for t in (config.tools if config is not None else []) if t.is_client)


def _state_anchor(executor: DBOSAgentExecutor, session_id: str) -> StateAnchor:
    state = executor.reads.get_state(session_id)  # first: see the module docstring
    checkpoint = executor.reads.get_latest_checkpoint(session_id)
    current = executor.reads.get_current_run(session_id)
    current_start = current.stream_start_sequence if current is not None else 0
    if checkpoint is None:
        return StateAnchor(state=dict(state.custom_state) if state else {}, checkpoint_id=None, read_from=current_start)
    run = executor.reads.get_run(checkpoint.state.run_id)
    if run is None or run.session_id != session_id:
        # A fork's checkpoint, copied from another session: never announced in this stream, and
        # every patch this session's runs wrote came after it.
        return StateAnchor(state=dict(checkpoint.state.custom_state), checkpoint_id=None, read_from=current_start)
    return StateAnchor(
        state=dict(checkpoint.state.custom_state), checkpoint_id=checkpoint.id, read_from=run.stream_start_sequence
    )


def _reply(
    executor: DBOSAgentExecutor,
    session_id: str,
    run_id: str,
    emit_after: int | None,
    anchor: StateAnchor | None = None,
) -> AGUIReply:
    session = executor.reads.require_session(session_id)
    run = executor.reads.get_run(run_id)
    if run is None:  # pragma: no cover - the callers found the run a moment ago
        raise HelixError(f"Run {run_id!r} was not found", code="framework_internal_error")
    anchor = anchor or _state_anchor(executor, session_id)
    return AGUIReply(
        session_id=session_id,
        run_id=run.run_id,
        stream_id=session.stream_id,
        run_start=run.stream_start_sequence,
        emit_after=run.stream_start_sequence if emit_after is None else emit_after,
        state=anchor,
        client_tools=_client_tools(executor, session.agent_type),
    )


def start_turn(
    executor: DBOSAgentExecutor, session_id: str, forwarded_props: Any, turn: AGUITurn, tenant: str | None = None
) -> AGUIReply:
    """Start the run answering the user's message (in ``tenant``), or find the one an identical post started."""
    name = agui_agent(executor, forwarded_props)
    exists = executor.reads.get_session(session_id) is not None
    # The client's state seeds a new thread only: an existing session's state is the run's, not the client's.
    state = turn.state if not exists else None
    handle = executor.execute(
        name,
        AgentInput(message=turn.text, state=state),
        session_id=session_id,
        idempotency_key=turn.idempotency_key,
        tenant=tenant,
    )
    return _reply(executor, session_id, handle.run_id, None)


def answer_calls(executor: DBOSAgentExecutor, session_id: str, answers: AGUIAnswers) -> AGUIReply:
    """Submit the client's answers to the calls still open; the response is what the run does next.

    The stream position and the state are read *before* the answers are written: the run is parked
    on them, so everything after that position is the continuation the client has not seen, and
    every state change of the continuation reaches the client as a ``STATE_DELTA``.
    """
    session = executor.reads.require_session(session_id)
    anchor = _state_anchor(executor, session_id)
    after = executor.streams.latest_sequence(session.stream_id)
    open_calls = {call.tool_call_id: call.kind for call in executor.reads.list_pending_tool_calls(session_id)}
    for answer in tool_answers(answers, open_calls):
        # Two posts racing with the same answers: the first records it, the second has nothing to do.
        with contextlib.suppress(ToolCallAlreadyAnsweredError):
            executor.submit_tool_result(session_id, answer)
    run = executor.reads.get_current_run(session_id)
    if run is None:
        raise SessionNotFoundError(session_id)
    return _reply(executor, session_id, run.run_id, after, anchor)


def reattach(executor: DBOSAgentExecutor, session_id: str, after: int | None) -> AGUIReply:
    """The session's latest run, from its start or after ``after`` (a reconnect's ``Last-Event-ID``)."""
    executor.reads.require_session(session_id)
    run = executor.reads.get_current_run(session_id)
    if run is None:
        raise SessionNotFoundError(session_id)
    return _reply(executor, session_id, run.run_id, after)
