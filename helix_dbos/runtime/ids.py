"""Deterministic ids and request keys: how two calls for the same thing meet.

Every id here is persisted (in the store, or as a DBOS workflow id), and duplicate requests are
recognised only because they derive the same one. So the formats are a contract, like step names:
changing one makes a retried request start a second run instead of finding the first.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Literal

from helix_dbos.session import AgentInput


def new_session_id() -> str:
    """A fresh session id, for a start with neither a ``session_id`` nor an idempotency key."""
    return f"session-{uuid.uuid4().hex}"


def session_id_for_key(idempotency_key: str, scope: str = "") -> str:
    """The session a keyed start without a ``session_id`` opens: deterministic, so a repeat finds it.

    ``scope`` keeps equal keys of different callers apart (the service passes the caller's identity).
    """
    digest = hashlib.sha256(f"{scope}\x00{idempotency_key}".encode()).hexdigest()[:40]
    return f"idem-{digest}"


def workflow_id_for(session_id: str, turn: int) -> str:
    """The deterministic workflow (and run) id of a session's turn."""
    return f"{session_id}-turn-{turn}"


def child_session_id_for(parent_session_id: str, tool_call_id: str) -> str:
    """The session of the ephemeral child a parent's tool call starts: one per call, found again on replay."""
    return f"{parent_session_id}-sub-{tool_call_id}"


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
    "child_request_key",
    "child_session_id_for",
    "continuation_request_key",
    "keyed_request_key",
    "new_session_id",
    "request_key_for",
    "session_id_for_key",
    "workflow_id_for",
]
