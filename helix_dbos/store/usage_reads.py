"""A session's usage in one read when it delegated nothing: what ``AgentResult.usage`` needs at a run's end.

The rollup of :func:`helix_dbos.store.usage_tree.usage_with_children` reads a session's usage and
then its child references, and walks the children only when there are any. Most runs delegate
nothing, so on a SQL store the two reads are one statement (:func:`read_usage_unless_delegated`):
the usage rows, each with whether the session has a child reference, over a one-row outer join so
that a session without usage still answers the question.
"""

from __future__ import annotations

from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection

from helix_dbos.store.base import UsageRow
from helix_dbos.store.schema import sub_session_refs, usage

__all__ = ["read_usage_unless_delegated"]


def _usage_unless_delegated(one_run: bool) -> sa.Select[Any]:
    """The statement of :func:`read_usage_unless_delegated`, for a session or one of its runs.

    Built once per shape and bound per call: every run's end reads its usage, and building the join,
    its subquery and its ordering each time cost more CPU than the read's round trip (issue 32).
    """
    session_id = sa.bindparam("session_id", type_=sa.String())
    delegated = sa.exists().where(sub_session_refs.c.session_id == session_id).label("delegated")
    joined = usage.c.session_id == session_id
    if one_run:
        joined = sa.and_(joined, usage.c.run_id == sa.bindparam("run_id"))
    one = sa.select(sa.literal(1).label("one")).subquery("one")
    return (
        sa.select(delegated, *usage.c)
        .select_from(one.outerjoin(usage, joined))
        .order_by(usage.c.created_at, usage.c.run_id, usage.c.step, usage.c.ordinal)
    )


_SESSION_USAGE: Final = _usage_unless_delegated(one_run=False)
_RUN_USAGE: Final = _usage_unless_delegated(one_run=True)


def read_usage_unless_delegated(conn: Connection, session_id: str, run_id: str | None) -> list[UsageRow] | None:
    """The session's usage (one run's with ``run_id``) in commit order; ``None`` if it has child references."""
    if run_id is None:
        rows = conn.execute(_SESSION_USAGE, {"session_id": session_id}).all()
    else:
        rows = conn.execute(_RUN_USAGE, {"session_id": session_id, "run_id": run_id}).all()
    if rows and rows[0].delegated:
        return None
    return [_usage_row(row) for row in rows if row.session_id is not None]


def _usage_row(row: sa.Row[Any]) -> UsageRow:
    """A usage row of the join, as ``helix_dbos.store.rows.usage_record`` makes one (without ``delegated``)."""
    data = dict(row._mapping)
    del data["delegated"], data["ordinal"]
    return UsageRow.model_validate(data)
