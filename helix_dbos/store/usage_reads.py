"""A session's usage in one read when it delegated nothing: what ``AgentResult.usage`` needs at a run's end.

The rollup of :func:`helix_dbos.store.usage_tree.usage_with_children` reads a session's usage and
then its child references, and walks the children only when there are any. Most runs delegate
nothing, so on a SQL store the two reads are one statement (:func:`read_usage_unless_delegated`):
the usage rows, each with whether the session has a child reference, over a one-row outer join so
that a session without usage still answers the question.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from helix_dbos.store.base import UsageRow
from helix_dbos.store.schema import sub_session_refs, usage

__all__ = ["read_usage_unless_delegated"]


def read_usage_unless_delegated(conn: Connection, session_id: str, run_id: str | None) -> list[UsageRow] | None:
    """The session's usage (one run's with ``run_id``) in commit order; ``None`` if it has child references."""
    delegated = sa.exists().where(sub_session_refs.c.session_id == session_id).label("delegated")
    joined = usage.c.session_id == session_id
    if run_id is not None:
        joined = sa.and_(joined, usage.c.run_id == run_id)
    one = sa.select(sa.literal(1).label("one")).subquery("one")
    stmt = (
        sa.select(delegated, *usage.c)
        .select_from(one.outerjoin(usage, joined))
        .order_by(usage.c.created_at, usage.c.run_id, usage.c.step, usage.c.ordinal)
    )
    rows = conn.execute(stmt).all()
    if rows and rows[0].delegated:
        return None
    return [_usage_row(row) for row in rows if row.session_id is not None]


def _usage_row(row: sa.Row[Any]) -> UsageRow:
    """A usage row of the join, as ``helix_dbos.store.rows.usage_record`` makes one (without ``delegated``)."""
    data = dict(row._mapping)
    del data["delegated"], data["ordinal"]
    return UsageRow.model_validate(data)
