"""Persistent companions, the decisions: names, what a dispatch does, which notices are due. Pure.

The runtime (:mod:`helix_dbos.runtime.companions`) reads the store in checkpointed steps and asks
these functions what to do, so the same recorded inputs always give the same decisions on replay.

A companion's session is ``{parent session}-agent-{name}``; what it is doing is read from that
session (its status is the truth), and what the parent's model was told is read from the parent's
transcript: a non-blocking dispatch's tool result says ``running`` with the child's ``runId``, and
the completion notice is a user message carrying that ``runId`` in its metadata. So "which notices
are still due" is a function of the transcript alone (:func:`notices_due`), and a notice committed
with the parent's next step can never be due again: exactly once without a ledger of its own.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from helix_dbos.companion_tools import companion_tool_name
from helix_dbos.messages import COMMON_METADATA_KEYS, Message, ToolResultMessage, UserMessage
from helix_dbos.orchestration.message_builder import json_stringify
from helix_dbos.session import SessionStatus

CompanionStatus = Literal["running", "completed", "failed", "terminated", "interrupted"]
"""A companion as the parent's model sees it."""

TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "terminated", "interrupted"})

NOTICE_METADATA_KEY = "companion_notice"
"""Metadata key of a completion notice (a user message): ``{name, sessionId, runId, status}``."""

DispatchAction = Literal["create", "continue", "respawn", "resume", "interrupt", "opened", "refuse"]
"""What a spawn/send does to the child session (see :func:`plan_dispatch`)."""

_DISPATCHING = frozenset({companion_tool_name("spawnAgent"), companion_tool_name("sendMessage")})
_COMPANION_PREFIX = "companion__"


def child_session_id(parent_session_id: str, name: str) -> str:
    """The companion's stable session id (the seeds' ``{parentSessionId}-agent-{name}``)."""
    return f"{parent_session_id}-agent-{name}"


def continuation_workflow_id(child_session: str, call_key: str) -> str:
    """The workflow of a re-consult: one per consulting call, so ``DBOS.start_workflow`` dedupes it.

    The seeds' ``{childSessionId}-continue-{toolCallId}``, with the parent's turn and step in the
    call key (``{turn}.{step}-{tool call id}``, ``helix_dbos.runtime.ids.scoped_call_key``): a
    model may use a call id again on the parent's next turn, and the run id must then be a new one.
    A run recorded before that passes the bare tool call id.
    """
    return f"{child_session}-continue-{call_key}"


def respawn_workflow_id(child_session: str, call_key: str) -> str:
    """The workflow of a fresh start on the session of a failed or terminated companion (call key as above)."""
    return f"{child_session}-respawn-{call_key}"


def dispatch_request_key(call_key: str) -> str:
    """The request key of a run a companion call starts: a re-executed dispatch finds its run.

    Per call key, not per tool call id: a call id used again on a later turn is a new dispatch,
    never the earlier turn's run ``opened`` again.
    """
    return f"companion:{call_key}"


def auto_name(agent_type: str, taken: Collection[str]) -> str:
    """``{agent type}-{n}``: the first free ``n`` from the count of that type's names plus one.

    ``taken`` is what the store recorded (read in a checkpointed step), never process memory, so
    the name a replay derives is the one the first execution derived.
    """
    prefix = f"{agent_type}-"
    n = sum(1 for name in taken if name.startswith(prefix)) + 1
    while f"{prefix}{n}" in taken:
        n += 1
    return f"{prefix}{n}"


def companion_status(session_status: SessionStatus | None, *, aborted: bool) -> CompanionStatus:
    """The child session's status in the model's words (an aborted session was terminated)."""
    if session_status == "failed":
        return "terminated" if aborted else "failed"
    if session_status in ("completed", "interrupted"):
        return session_status
    return "running"  # active (or paused): a run is in flight


@dataclass(frozen=True)
class DispatchPlan:
    """What a ``spawnAgent`` / ``sendMessage`` call does to the child session."""

    action: DispatchAction
    error: str | None = None
    """Set for ``refuse``: the tool error the model sees."""


def plan_dispatch(
    kind: Literal["spawnAgent", "sendMessage"],
    *,
    name: str,
    agent_type: str | None,
    child_agent_type: str | None,
    status: CompanionStatus | None,
    current_request_key: str | None,
    call_key: str,
    interrupt_requested: bool = False,
) -> DispatchPlan:
    """Decide a dispatch from the child's recorded state (``status`` ``None``: no such child).

    ``call_key`` identifies the call (:func:`dispatch_request_key`).

    - the child's current run is this call's own (a re-executed step): ``opened``;
    - no child: spawn ``create``s one, send refuses (there is nobody to talk to);
    - ``completed``: ``continue`` its session (the re-consult: a new turn, memory intact);
    - ``failed`` / ``terminated``: spawn ``respawn``s it afresh; send refuses;
    - ``interrupted``: ``resume`` it with the message;
    - ``running``: send ``interrupt``s it (then resumes it with the message once it stopped);
      spawn refuses (the name is taken by a companion at work).
    """
    if current_request_key == dispatch_request_key(call_key):
        return DispatchPlan("opened")
    if status is None:
        if kind == "sendMessage":
            return DispatchPlan("refuse", f"No companion named {name!r}. Spawn it with companion__spawnAgent first.")
        return DispatchPlan("create")
    if kind == "spawnAgent" and agent_type is not None and child_agent_type not in (None, agent_type):
        return DispatchPlan(
            "refuse", f"The companion {name!r} is a {child_agent_type}, not a {agent_type}; choose another name."
        )
    if status == "completed":
        return DispatchPlan("continue")
    if status in ("failed", "terminated"):
        if kind == "spawnAgent":
            return DispatchPlan("respawn")
        return DispatchPlan(
            "refuse", f"The companion {name!r} {status}; spawn it again with companion__spawnAgent to start afresh."
        )
    if status == "interrupted":
        return DispatchPlan("resume")
    if kind == "spawnAgent":
        return DispatchPlan(
            "refuse",
            f"The companion {name!r} is already running; use companion__sendMessage to redirect it "
            "or companion__waitForResult for its result.",
        )
    return DispatchPlan("interrupt")


def companion_result(
    *,
    name: str,
    agent_type: str,
    session_id: str,
    status: CompanionStatus,
    run_id: str | None = None,
    output: Any = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The JSON a companion tool returns (what the model reads; ``runId`` keys the notice ledger)."""
    result: dict[str, Any] = {"name": name, "agentType": agent_type, "sessionId": session_id, "status": status}
    if run_id is not None:
        result["runId"] = run_id
    if status == "completed":
        result["output"] = output
    if error is not None and status != "completed":
        result["error"] = error
    return result


@dataclass(frozen=True)
class AwaitedRun:
    """A non-blocking companion run whose completion the parent has not been told of yet."""

    name: str
    agent_type: str
    session_id: str
    run_id: str


def _parse(message: ToolResultMessage) -> dict[str, Any] | None:
    if not message.tool_name.startswith(_COMPANION_PREFIX):
        return None
    if message.metadata and message.metadata.get(COMMON_METADATA_KEYS.IS_ERROR):
        return None
    try:
        value = json.loads(message.content)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("sessionId"), str) else None


def notices_due(messages: Sequence[Message]) -> list[AwaitedRun]:
    """Non-blocking companion runs the transcript dispatched but has no outcome for, oldest first.

    A dispatch whose result says ``running`` (and ``notify``) awaits a notice for its ``runId``;
    any later companion result that reports a terminal status of that session, a later dispatch of
    the same session, or a notice for that run clears it.
    """
    awaited: dict[str, AwaitedRun] = {}
    for message in messages:
        if isinstance(message, UserMessage) and message.metadata and NOTICE_METADATA_KEY in message.metadata:
            notice = message.metadata[NOTICE_METADATA_KEY]
            session = notice.get("sessionId") if isinstance(notice, dict) else None
            if isinstance(session, str) and session in awaited and awaited[session].run_id == notice.get("runId"):
                del awaited[session]
            continue
        if not isinstance(message, ToolResultMessage):
            continue
        result = _parse(message)
        if result is None:
            continue
        session = result["sessionId"]
        if message.tool_name in _DISPATCHING:
            awaited.pop(session, None)
            if result.get("status") == "running" and result.get("notify") and isinstance(result.get("runId"), str):
                awaited[session] = AwaitedRun(
                    name=str(result.get("name")),
                    agent_type=str(result.get("agentType")),
                    session_id=session,
                    run_id=result["runId"],
                )
        elif result.get("status") in TERMINAL_STATUSES:
            awaited.pop(session, None)
    return list(awaited.values())


def notice_message(
    run: AwaitedRun, status: CompanionStatus, *, output: Any = None, error: str | None = None
) -> UserMessage:
    """The message that tells the parent's model a non-blocking companion finished."""
    result = companion_result(
        name=run.name,
        agent_type=run.agent_type,
        session_id=run.session_id,
        status=status,
        run_id=run.run_id,
        output=output,
        error=error,
    )
    return UserMessage(
        content=f"[Companion {run.name!r} ({run.agent_type}) {status}] {json_stringify(result)}",
        metadata={
            NOTICE_METADATA_KEY: {
                "name": run.name,
                "sessionId": run.session_id,
                "runId": run.run_id,
                "status": status,
            }
        },
    )


__all__ = [
    "NOTICE_METADATA_KEY",
    "TERMINAL_STATUSES",
    "AwaitedRun",
    "CompanionStatus",
    "DispatchAction",
    "DispatchPlan",
    "auto_name",
    "child_session_id",
    "companion_result",
    "companion_status",
    "continuation_workflow_id",
    "dispatch_request_key",
    "notice_message",
    "notices_due",
    "plan_dispatch",
    "respawn_workflow_id",
]
