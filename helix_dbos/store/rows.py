"""Rows to records and back: the one place that knows how a record is laid out in its table.

Messages are stored as their Python-mode dump (the JSON serialiser, ``helix_dbos.store.codec``,
writes what JSON mode would silently replace); every other record is validated from its row's
mapping, so a column added to a table and to its record needs no code here.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from helix_dbos.messages import Message, MessageAdapter
from helix_dbos.session import InterruptContext, SubSessionRef
from helix_dbos.store.base import RunRecord, SessionRecord, UsageRow
from helix_dbos.tenancy import DEFAULT_TENANT

__all__ = [
    "TERMINAL_RUN_STATUSES",
    "context_json",
    "dump_message",
    "interrupt_reason",
    "load_message",
    "new_session_values",
    "run_record",
    "session_record",
    "sub_session_ref",
    "usage_record",
]


def dump_message(message: Message) -> dict[str, Any]:
    """A message as stored in ``helix_messages.message``."""
    # Python mode: JSON mode would turn a lone surrogate in a dict key (a tool call's argument name)
    # into U+FFFD silently; the JSON serialiser (the codec) stores it faithfully instead.
    return message.model_dump(mode="python", exclude_none=True)


def load_message(data: Any) -> Message:
    """A stored message back as its typed model."""
    return MessageAdapter.validate_python(data)


def session_record(row: sa.Row[Any]) -> SessionRecord:
    """A ``helix_sessions`` row."""
    return SessionRecord.model_validate(dict(row._mapping))


def run_record(row: sa.Row[Any]) -> RunRecord:
    """A ``helix_runs`` row."""
    return RunRecord.model_validate(dict(row._mapping))


def sub_session_ref(row: sa.Row[Any]) -> SubSessionRef:
    """A ``helix_sub_session_refs`` row (without the parent's id, which the caller knows)."""
    data = dict(row._mapping)
    del data["session_id"]
    return SubSessionRef.model_validate(data)


def usage_record(row: sa.Row[Any]) -> UsageRow:
    """A ``helix_usage`` row (without its position in the commit)."""
    data = dict(row._mapping)
    del data["ordinal"]
    return UsageRow.model_validate(data)


def interrupt_reason(context: Any) -> str | None:
    """The reason in a stored ``interrupt_context`` (JSON), if there is one."""
    if isinstance(context, dict):
        reason = context.get("reason")
        return reason if isinstance(reason, str) else None
    return None


def context_json(context: InterruptContext | None) -> dict[str, Any] | None:
    """An interrupt context as stored in ``helix_sessions.interrupt_context``."""
    return None if context is None else context.model_dump(mode="json")


def new_session_values(
    session_id: str,
    *,
    agent_type: str,
    custom_state: dict[str, Any],
    now_ms: int,
    parent_session_id: str | None,
    root_session_id: str | None,
    metadata: dict[str, Any] | None,
    tenant: str = DEFAULT_TENANT,
) -> dict[str, Any]:
    """The ``helix_sessions`` row of a new session: status ``active``, no run yet (turn 0)."""
    return {
        "session_id": session_id,
        "agent_type": agent_type,
        "status": "active",
        "version": 1,
        "run_id": None,
        "stream_id": session_id,
        "turn": 0,
        "step_count": 0,
        "message_count": 0,
        "custom_state": custom_state,
        "output": None,
        "error": None,
        "parent_session_id": parent_session_id,
        "root_session_id": root_session_id,
        "interrupt_requested": False,
        "interrupt_context": None,
        "resume_count": 0,
        "aborted": False,
        "abort_reason": None,
        "agent_fingerprint": None,
        "metadata": metadata,
        "created_at": now_ms,
        "updated_at": now_ms,
        "tenant": tenant,
    }


TERMINAL_RUN_STATUSES: frozenset[str] = frozenset({"completed", "failed", "interrupted"})
"""Run statuses that set ``completed_at`` (``suspended`` does not: the run goes on later)."""
