"""The runs in flight, read without scanning sessions: the query behind orphan detection.

An *orphaned* run is recorded ``running`` but its DBOS workflow never started (the process died
between the store transaction and ``DBOS.start_workflow``). Only ``running`` runs can be orphans:
a parked run (``suspended`` on a human) or a finished one cannot, however many there are. The
partial index ``ix_helix_runs_running`` holds exactly the ``running`` runs, and callers page
through it by run id (keyset pagination), so looking costs the number of runs in flight and no run
is ever skipped; the executor then asks DBOS which of a page's workflows exist, in one query.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from helix_dbos.store.base import RunRecord
from helix_dbos.store.schema import runs

# A literal, not a bound parameter: PostgreSQL uses a partial index only when it can prove the
# query's predicate implies the index's, which a generic plan with a parameter cannot.
_RUNNING = runs.c.status == sa.literal_column("'running'")


def list_running_runs(engine: Engine, *, after_run_id: str | None = None, limit: int = 500) -> list[RunRecord]:
    """Runs with status ``running``, by run id, starting after ``after_run_id`` (one page of ``limit``)."""
    stmt = sa.select(runs).where(_RUNNING)
    if after_run_id is not None:
        stmt = stmt.where(runs.c.run_id > after_run_id)
    stmt = stmt.order_by(runs.c.run_id).limit(max(limit, 1))
    with engine.connect() as conn:
        return [RunRecord.model_validate(dict(row._mapping)) for row in conn.execute(stmt)]


__all__ = ["list_running_runs"]
