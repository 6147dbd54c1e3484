"""How helix's durable records read as A2A tasks: a task is a run, its context the run's session.

Pure functions over the store's records (no database, no network): the request handler reads the
records, these build the protocol's messages. The mapping:

==============================================  ====================================================
helix                                           A2A
==============================================  ====================================================
session id                                      ``contextId``
run id                                          task ``id``
run ``running``                                 ``TASK_STATE_WORKING``
run waiting for a client tool or an approval    ``TASK_STATE_INPUT_REQUIRED`` (the pending calls
(``suspended``, or pending tool calls)          in the status message, as text and as data)
run ``completed``                               ``TASK_STATE_COMPLETED``, the output as the
                                                ``output`` artifact (text, or data when structured)
run ``failed``                                  ``TASK_STATE_FAILED``, the error in the status message
run aborted (``tasks/cancel``) or interrupted   ``TASK_STATE_CANCELED``
==============================================  ====================================================

An interrupted run reads as canceled: it stopped on request and will not go on by itself; a new
message on the same context continues the session (helix resumes it) as a new task.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from a2a.types.a2a_pb2 import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value
from pydantic_core import to_jsonable_python

from helix_dbos.a2a.transport import integral_numbers
from helix_dbos.errors import public_error_message
from helix_dbos.store.base import PendingToolCall, RunRecord, SessionRecord

OUTPUT_ARTIFACT_ID = "output"
"""The artifact that carries a completed run's output."""
TEXT_ARTIFACT_ID = "text"
"""The artifact a streamed run's text deltas are appended to."""

TERMINAL_STATES = frozenset(
    {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED}
)
"""States a task never leaves (``tasks/cancel`` refuses them)."""


def task_state(run: RunRecord, session: SessionRecord, pending: Sequence[PendingToolCall]) -> TaskState:
    """The run's state in the protocol's words (see the module's table)."""
    if session.aborted and session.run_id == run.run_id:
        return TaskState.TASK_STATE_CANCELED
    if run.status == "running":
        return TaskState.TASK_STATE_INPUT_REQUIRED if pending else TaskState.TASK_STATE_WORKING
    if run.status == "suspended":
        return TaskState.TASK_STATE_INPUT_REQUIRED
    if run.status == "completed":
        return TaskState.TASK_STATE_COMPLETED
    if run.status == "interrupted":
        return TaskState.TASK_STATE_CANCELED
    return TaskState.TASK_STATE_FAILED


def agent_message(context_id: str, task_id: str, parts: Sequence[Part], message_id: str) -> Message:
    """A message from the agent (status messages carry the error or the pending calls)."""
    return Message(message_id=message_id, context_id=context_id, task_id=task_id, role=Role.ROLE_AGENT, parts=parts)


def value_parts(value: Any) -> list[Part]:
    """A run's output as parts: text for a string, data (JSON) for anything structured."""
    if value is None:
        return []
    if isinstance(value, str):
        return [Part(text=value)]
    return [Part(data=ParseDict(value, Value()))]


def task_status(run: RunRecord, session: SessionRecord, pending: Sequence[PendingToolCall]) -> TaskStatus:
    """The run's status, with a message saying why it failed, stopped or waits."""
    state = task_state(run, session, pending)
    status = TaskStatus(state=state)
    parts: list[Part] = []
    if state == TaskState.TASK_STATE_FAILED:
        parts = [Part(text=public_error_message(run.error or session.error or "the run failed"))]
    elif state == TaskState.TASK_STATE_CANCELED:
        reason = session.abort_reason if session.aborted else "interrupted"
        parts = [Part(text=public_error_message(reason or "canceled"))]
    elif state == TaskState.TASK_STATE_INPUT_REQUIRED:
        parts = waiting_parts(pending)
    if parts:
        status.message.CopyFrom(agent_message(session.session_id, run.run_id, parts, f"{run.run_id}-status"))
    return status


def waiting_parts(pending: Sequence[PendingToolCall]) -> list[Part]:
    """What an input-required task waits for: one line per pending call, and the calls as data."""
    if not pending:
        return [Part(text="The run is waiting for input.")]
    lines = [f"Waiting for {call.kind} tool call {call.tool_call_id!r} ({call.tool_name})." for call in pending]
    calls = [
        {"toolCallId": c.tool_call_id, "toolName": c.tool_name, "kind": c.kind, "arguments": c.arguments}
        for c in pending
    ]
    return [Part(text="\n".join(lines)), Part(data=ParseDict({"pendingToolCalls": calls}, Value()))]


def output_artifact(session: SessionRecord) -> Artifact:
    """A completed run's output (the session's output is the latest run's)."""
    return Artifact(artifact_id=OUTPUT_ARTIFACT_ID, name="output", parts=value_parts(_jsonable(session.output)))


def build_task(run: RunRecord, session: SessionRecord, pending: Sequence[PendingToolCall]) -> Task:
    """The run as an A2A task: id, context, status and (once completed) the output artifact."""
    status = task_status(run, session, pending)
    task = Task(id=run.run_id, context_id=session.session_id, status=status)
    latest = session.run_id == run.run_id
    if status.state == TaskState.TASK_STATE_COMPLETED and latest:
        task.artifacts.append(output_artifact(session))
    return task


def message_text(message: Message) -> str:
    """The user's message as helix input: its text parts joined, structured parts as JSON."""
    pieces: list[str] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            pieces.append(json.dumps(integral_numbers(MessageToDict(part.data)), sort_keys=True))
    return "\n".join(piece for piece in pieces if piece)


def _jsonable(value: Any) -> Any:
    return to_jsonable_python(value)


__all__ = [
    "OUTPUT_ARTIFACT_ID",
    "TERMINAL_STATES",
    "TEXT_ARTIFACT_ID",
    "agent_message",
    "build_task",
    "message_text",
    "output_artifact",
    "task_state",
    "task_status",
    "value_parts",
    "waiting_parts",
]
