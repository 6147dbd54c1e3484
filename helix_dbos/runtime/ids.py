"""Deterministic ids and request keys: how two calls for the same thing meet.

Every id here is persisted (in the store, or as a DBOS workflow id), and duplicate requests are
recognised only because they derive the same one. So the formats are a contract, like step names:
changing one makes a retried request start a second run instead of finding the first. The one
change made so far (ids derived from a tool call took the parent's turn and step) is behind a
named DBOS replay patch, :data:`SCOPED_CALL_IDS_PATCH`, so runs recorded before it keep theirs.
A tool's idempotency key needs none: it keeps the bare form for every call whose id no earlier
call in the session used, and the transcript that decides is the one a replay reads again
(:func:`calls_used_before`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Literal

from helix_dbos.messages import AssistantMessage, Message, ToolResultMessage
from helix_dbos.session import AgentInput

SCOPED_CALL_IDS_PATCH = "helix-call-scoped-ids"
"""The DBOS replay patch under which ids derived from a tool call carry the turn and step.

A run decides once, where it first derives such an id (``RunContext.call_key``): runs recorded
before the patch replay with the bare tool call id, as they were written; every other run records
the patch there (one ``DBOS.patch-helix-call-scoped-ids`` row) and uses :func:`scoped_call_key`.
"""


RECORDED_STOP_REASON_PATCH = "helix-recorded-stop-reason"
"""The DBOS replay patch under which a stopped run reads its stop reason in a step (``{agent}.stop_reason``).

A run that ends because it was aborted while it waited (for a human, or for a budget approval)
takes its error from the abort's reason. Runs recorded before the patch read the reason from the
store in workflow code, unrecorded, so a replay after the reason changed returned another error;
they still do, as they were written. The patch is asked only on that path
(``RunContext.abort_error``), so no other run records it.
"""


REUSED_CALL_IDS_PATCH = "helix-reused-call-ids"
"""The DBOS replay patch under which a suspended batch's calls are paired with results after it only.

A continuation finds the calls it must answer as those of the last model response without a tool
result. Runs recorded before the patch counted a result anywhere in the transcript, so a call whose
id an earlier response used (and was answered) looked answered. The patch is asked only where the two
readings differ (:func:`helix_dbos.runtime.tools.outstanding_calls`), so no other run records it.
"""


def new_session_id() -> str:
    """A fresh session id, for a start with neither a ``session_id`` nor an idempotency key."""
    return f"session-{uuid.uuid4().hex}"


def scoped_session_id(prefix: str, key: str, scope: str) -> str:
    """``{prefix}-{digest}``: the session a caller's own key names, deterministic so a repeat finds it.

    The key is a client's choice (an idempotency key, a chat id, an AG-UI thread id), so ``scope``
    (the caller's identity) keeps equal keys of different callers on different sessions; the digest
    keeps the id short and free of whatever characters the key holds. ``prefix`` says which kind of
    key it was, so two protocols' keys never name one session. The ids are persisted: the format
    must not change.
    """
    digest = hashlib.sha256(f"{scope}\x00{key}".encode()).hexdigest()[:40]
    return f"{prefix}-{digest}"


def session_id_for_key(idempotency_key: str, scope: str = "") -> str:
    """The session a keyed start without a ``session_id`` opens: deterministic, so a repeat finds it.

    ``scope`` keeps equal keys of different callers apart (the service passes the caller's identity).
    """
    return scoped_session_id("idem", idempotency_key, scope)


def workflow_id_for(session_id: str, turn: int) -> str:
    """The deterministic workflow (and run) id of a session's turn."""
    return f"{session_id}-turn-{turn}"


def scoped_call_key(tool_call_id: str, *, turn: int, step: int) -> str:
    """``{turn}.{step}-{tool call id}``: a tool call, unique within its session.

    A model's tool call ids are unique only within one response for many models (scripted ones,
    providers that number their calls): the next turn may call ``r1`` again. The parent run's turn
    (every run of a session has its own) and step (every model response of a run has its own; ``0``
    is a continuation answering the batch its previous run suspended on) make it unique, and both
    are fixed by the recorded run, so a replay derives the same key. Ids derived from a call take
    this key where they took the call id (:func:`child_session_id_for`, companions' continuation
    and respawn ids, the remote session id); ``ToolContext.idempotency_key`` takes it only for a
    call whose id an earlier call in the session used (:func:`calls_used_before`).
    """
    return f"{turn}.{step}-{tool_call_id}"


def calls_used_before(messages: Sequence[Message], call_ids: Iterable[str]) -> set[str]:
    """The ids of ``call_ids`` that a message before the last model response calling them names.

    Such an id was used by an earlier call (an earlier response's tool call, or its result): the
    model reused it. Only the transcript decides, and a run's transcript is the same on replay (the
    session's messages before the run, then what its recorded steps appended).
    """
    wanted = set(call_ids)
    first: dict[str, int] = {}  # where a message names the id first
    last_call: dict[str, int] = {}  # the last response calling it
    # One pass, whatever the number of ids: the batch's tool steps ask this every iteration.
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id in wanted:
                first.setdefault(message.tool_call_id, index)
        elif isinstance(message, AssistantMessage) and message.tool_calls:
            for call in message.tool_calls:
                if call.id in wanted:
                    first.setdefault(call.id, index)
                    last_call[call.id] = index
    return {call_id for call_id, at in last_call.items() if first[call_id] < at}


def child_session_id_for(parent_session_id: str, call_key: str) -> str:
    """The session of the ephemeral child a parent's tool call starts: one per call, found again on replay.

    ``call_key`` is :func:`scoped_call_key` (``{parent}-sub-{turn}.{step}-{call}``), or the bare tool
    call id for a run recorded before :data:`SCOPED_CALL_IDS_PATCH` (``{parent}-sub-{call}``).
    """
    return f"{parent_session_id}-sub-{call_key}"


def child_request_key(tool_call_id: str) -> str:
    """The request key of a child run opened for a parent's tool call: a repeat finds the same run."""
    return f"child:{tool_call_id}"


def keyed_request_key(idempotency_key: str) -> str:
    """The request key of a start with an idempotency key: a repeat finds its run even after it ended."""
    return f"key:{idempotency_key}"


def request_key_for(agent_name: str, parsed: AgentInput, turn: int) -> str:
    """Identify "this request for this turn" when the caller gave no idempotency key.

    Duplicates racing for the same turn meet on it, while the same text sent again after the turn
    finished is a new request.
    """
    payload = json.dumps([agent_name, parsed.model_dump(mode="json"), turn], sort_keys=True)
    return "auto:" + hashlib.sha256(payload.encode()).hexdigest()[:32]


def continuation_request_key(mode: Literal["resume", "retry"], turn: int) -> str:
    """The request key of a resume or retry: at most one continuation per turn."""
    return f"{mode}:{turn}"


__all__ = [
    "RECORDED_STOP_REASON_PATCH",
    "REUSED_CALL_IDS_PATCH",
    "SCOPED_CALL_IDS_PATCH",
    "calls_used_before",
    "child_request_key",
    "child_session_id_for",
    "continuation_request_key",
    "keyed_request_key",
    "new_session_id",
    "request_key_for",
    "scoped_call_key",
    "scoped_session_id",
    "session_id_for_key",
    "workflow_id_for",
]
