"""The blocking side of the AI SDK chat routes: start or find a turn, record answers, find a replay.

Each function runs in the service's thread pool (``ServiceOperations.call``) and answers a
:class:`UIReply`: which stream to read, after which sequence, and the message id and tool calls the
reply continues. The decisions themselves are pure (:mod:`helix_dbos.service.ui_chat`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from helix_dbos.double_text import DoubleTextPolicy
from helix_dbos.errors import HelixError, ToolCallAlreadyAnsweredError
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.service.operations import served_agent
from helix_dbos.service.ui_chat import Answers, NewTurn, reply_message_id, tool_answers

__all__ = ["UIReply", "answer_tools", "replay_current_run", "start_turn", "ui_chat_agent"]


@dataclass(frozen=True)
class UIReply:
    """Where a UI message stream reply reads from, and what it continues."""

    session_id: str
    run_id: str | None
    stream_id: str
    after: int
    """Read the chunks after this stream sequence."""
    message_id: str
    known_tool_calls: dict[str, bool] = field(default_factory=dict)
    approval_calls: frozenset[str] = frozenset()


def ui_chat_agent(executor: DBOSAgentExecutor, name: str | None) -> str:
    """The agent a chat post names, or the service's only agent when it names none."""
    return served_agent(
        executor, name, "pass it in the chat transport's body (new DefaultChatTransport({ body: { agent: '...' } }))"
    )


def start_turn(
    executor: DBOSAgentExecutor,
    session_id: str,
    agent: str | None,
    turn: NewTurn,
    tenant: str | None = None,
    double_text: DoubleTextPolicy | None = None,
) -> UIReply:
    """Start the run answering the user's message (in ``tenant``), or find the one an identical post started.

    A message that met a run in flight (``double_text``): a steering one is answered with the
    stream of the run it steers from here on; a queued one waits for its turn, then is answered
    with the run that carries it (a refusal, a failed session, is the reply's ``error``).
    """
    name = ui_chat_agent(executor, agent)
    message = {"message": turn.text}
    handle = executor.execute(
        name,
        message,
        session_id=session_id,
        idempotency_key=turn.idempotency_key,
        tenant=tenant,
        double_text=double_text,
    )
    receipt = handle.double_text
    if receipt is not None and receipt.status == "steering":
        current = executor.reads.require_session(session_id)
        after = executor.streams.latest_sequence(current.stream_id)
        return UIReply(session_id, receipt.run_id, current.stream_id, after, reply_message_id(receipt.run_id))
    run_id = handle.run_id
    if receipt is not None and receipt.status == "queued" and receipt.ticket_id is not None:
        outcome = executor.client.double_text.wait_for_ticket(receipt.ticket_id)
        if outcome.run_id is None:
            raise HelixError(outcome.error or "the message was not run", code="state_conflict", retryable=False)
        run_id = outcome.run_id
    run = executor.reads.get_run(run_id)
    session = executor.reads.get_session(session_id)
    if run is None or session is None:  # pragma: no cover - execute wrote both before returning
        raise HelixError(f"Run {handle.run_id!r} was not found after it started", code="framework_internal_error")
    return UIReply(
        session_id=session_id,
        run_id=run.run_id,
        stream_id=session.stream_id,
        after=run.stream_start_sequence,
        message_id=reply_message_id(run.run_id),
    )


def answer_tools(executor: DBOSAgentExecutor, session_id: str, answers: Answers) -> UIReply:
    """Submit the browser's answers to the calls still open; the reply is what the run does next.

    The stream position is read *before* the answers are written: the run is parked on them, so
    everything after that position is the continuation the browser has not seen.
    """
    session = executor.reads.require_session(session_id)
    after = executor.streams.latest_sequence(session.stream_id)
    open_calls = {call.tool_call_id: call.kind for call in executor.reads.list_pending_tool_calls(session_id)}
    for answer in tool_answers(answers.parts, open_calls):
        # Two posts racing with the same answers: the first records it, the second has nothing to do.
        with contextlib.suppress(ToolCallAlreadyAnsweredError):
            executor.submit_tool_result(session_id, answer)
    run = executor.reads.get_current_run(session_id)
    return UIReply(
        session_id=session_id,
        run_id=run.run_id if run is not None else None,
        stream_id=session.stream_id,
        after=after,
        message_id=answers.message_id,
        known_tool_calls=answers.known_tool_calls,
        approval_calls=answers.approval_calls,
    )


def replay_current_run(executor: DBOSAgentExecutor, session_id: str) -> UIReply | None:
    """The reply of the session's run in flight, from its first chunk; ``None`` when nothing is in flight.

    ``DefaultChatTransport`` treats a resumed stream as a replay of the whole reply (its
    ``resumeStreamIsReplay``), and a ``204`` as "nothing to resume".
    """
    session = executor.reads.get_session(session_id)
    run = executor.reads.get_current_run(session_id) if session is not None else None
    if session is None or run is None or run.status not in ("running", "suspended"):
        return None
    return UIReply(
        session_id=session_id,
        run_id=run.run_id,
        stream_id=session.stream_id,
        after=run.stream_start_sequence,
        message_id=reply_message_id(run.run_id),
    )
