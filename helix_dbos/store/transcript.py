"""The transcript and child references inside an open transaction: what an ``AgentState`` is made of.

Shared by the session reads, ``start_run``, the portable ``commit_step`` and the checkpoint reads,
so that a state is always rebuilt the same way: messages bounded by a count read in the same
transaction (a step committed in between must not leak half its messages), refs oldest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import sqlalchemy as sa
from sqlalchemy import Connection

from helix_dbos.messages import Message
from helix_dbos.session import SubSessionRef
from helix_dbos.store.rows import dump_message, load_message, sub_session_ref
from helix_dbos.store.schema import messages, sub_session_refs

__all__ = ["insert_messages", "read_prefix", "read_refs"]


def insert_messages(
    conn: Connection,
    session_id: str,
    run_id: str | None,
    step: int,
    first_sequence: int,
    new_messages: Sequence[Message],
    now_ms: int,
) -> None:
    """Append ``new_messages`` from ``first_sequence`` on (one ``executemany``)."""
    if not new_messages:
        return
    conn.execute(
        messages.insert(),
        [
            {
                "session_id": session_id,
                "sequence": first_sequence + i,
                "run_id": run_id,
                "step": step,
                "role": message.role,
                "message": dump_message(message),
                "created_at": now_ms,
            }
            for i, message in enumerate(new_messages)
        ],
    )


def read_prefix(conn: Connection, session_id: str, count: int) -> list[Message]:
    """The first ``count`` messages of the transcript, in sequence order."""
    if count <= 0:
        return []
    rows = conn.execute(_READ_PREFIX, {"sid": session_id, "count": count})
    return [load_message(data) for (data,) in rows]


_READ_PREFIX: Final = (
    sa.select(messages.c.message)
    .where(messages.c.session_id == sa.bindparam("sid"), messages.c.sequence < sa.bindparam("count"))
    .order_by(messages.c.sequence)
)
"""Built once: every run's start reads its transcript with it."""


def read_refs(conn: Connection, session_id: str) -> list[SubSessionRef]:
    """The session's child references, oldest first."""
    rows = conn.execute(
        sa.select(sub_session_refs)
        .where(sub_session_refs.c.session_id == session_id)
        .order_by(sub_session_refs.c.started_at, sub_session_refs.c.sub_session_id)
    )
    return [sub_session_ref(row) for row in rows]
