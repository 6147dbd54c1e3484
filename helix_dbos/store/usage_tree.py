"""A session's usage with its children's: the rollup across sub-agents and companions.

It lives with the store, not the runtime, because it needs nothing but the :class:`SessionStore`
protocol: the executor's ``AgentResult.usage`` and the CLI's ``sessions show`` compute a run's cost
with the same function, and the CLI does not import DBOS to do it.
"""

from __future__ import annotations

from helix_dbos.store.base import SessionStore, UsageRow
from helix_dbos.store.capabilities import LeafUsageStore


def usage_with_children(store: SessionStore, session_id: str, *, run_id: str | None = None) -> list[UsageRow]:
    """The session's usage records followed by its children's, depth first (all of a tree's spend).

    With ``run_id``: that run's records and those of the children it started (children opened
    while it ran), so a parent run's cost includes its delegations.
    """
    if isinstance(store, LeafUsageStore):  # one read instead of two when nothing was delegated
        leaf = store.get_usage_unless_delegated(session_id, run_id=run_id)
        if leaf is not None:
            return leaf
    records = list(store.get_usage(session_id, run_id=run_id))
    refs = store.get_sub_session_refs(session_id)
    if not refs:  # the common case: no delegation, and no need to read the run's time window
        return records
    run = store.get_run(run_id) if run_id is not None else None
    for ref in refs:
        if run is not None and not (
            run.started_at <= ref.started_at and (run.completed_at is None or ref.started_at <= run.completed_at)
        ):
            continue
        records.extend(usage_with_children(store, ref.sub_session_id))
    return records


__all__ = ["usage_with_children"]
