"""Reading what the planner decides on: sessions and their runs, a page at a time, and the live families.

Reads only. Sessions are paged by id (keyset pagination: a page costs its size however large the
table), each page with every run of its sessions (``UNIQUE(session_id, turn)`` indexes runs by
session). The live families are read once per collection, before the pages: they are few (what
is in flight or parked), and a family made live by a session on another page must be known on
every page.
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy import Engine

from helix_dbos.retention.planner import LIVE_RUN_STATUSES, RunFacts, SessionFacts
from helix_dbos.store.engine import begin_read
from helix_dbos.store.schema import runs, sessions

__all__ = ["live_families", "session_pages"]

_FAMILY = sa.func.coalesce(sessions.c.root_session_id, sessions.c.session_id)


def live_families(engine: Engine) -> set[str]:
    """Families (root session ids) with an ``active`` session or a ``running``/``suspended`` run."""
    by_session = sa.select(_FAMILY).where(sessions.c.status == "active")
    by_run = (
        sa.select(_FAMILY)
        .select_from(runs.join(sessions, sessions.c.session_id == runs.c.session_id))
        .where(runs.c.status.in_(sorted(LIVE_RUN_STATUSES)))
    )
    with begin_read(engine) as conn:
        return {row[0] for row in conn.execute(sa.union(by_session, by_run))}


def session_pages(engine: Engine, page_size: int) -> Iterator[tuple[list[SessionFacts], list[RunFacts]]]:
    """Yield ``(sessions, their runs)`` pages, ``page_size`` sessions each, in session id order."""
    after: str | None = None
    while True:
        query = sa.select(
            sessions.c.session_id,
            sessions.c.agent_type,
            sessions.c.status,
            sessions.c.version,
            sessions.c.stream_id,
            sessions.c.root_session_id,
            sessions.c.updated_at,
        ).order_by(sessions.c.session_id)
        if after is not None:
            query = query.where(sessions.c.session_id > after)
        with begin_read(engine) as conn:
            page = [SessionFacts.model_validate(row._asdict()) for row in conn.execute(query.limit(page_size))]
            if not page:
                return
            run_rows = conn.execute(
                sa.select(
                    runs.c.run_id,
                    runs.c.session_id,
                    runs.c.turn,
                    runs.c.status,
                    runs.c.started_at,
                    runs.c.completed_at,
                    runs.c.workflow_id,
                ).where(runs.c.session_id.in_([s.session_id for s in page]))
            )
            page_runs = [RunFacts.model_validate(row._asdict()) for row in run_rows]
        yield page, page_runs
        after = page[-1].session_id
