"""Carrying out a retention plan: small batches, each its own short transaction, by primary key.

:func:`collect_garbage` reads a page of sessions (:mod:`.inventory`), plans it (:mod:`.planner`)
and deletes what the plan says, page after page. Every delete selects at most ``batch_size``
primary keys and deletes exactly those rows in one short transaction: on PostgreSQL no statement
holds row locks on more than a batch, and on SQLite (one writer at a time) the write lock is held
for one batch, so running agents commit their steps between batches.

**A session deleted whole** goes in this order, so that any crash leaves something the next
collection finishes:

1. *Claim*: one ``DELETE .. WHERE (session_id, version) IN (...) AND status <> 'active'``. A session
   that started a run since it was planned (its version moved, or it is active) is not claimed and
   keeps every row; one claimed is gone for readers at once (a start on its id finds no session).
2. Its messages, checkpoints, usage, sub-session refs, pending tool calls, stream chunks and stream
   row, each delete guarded by "no session row with this id" (a session re-created under the same
   id since is never touched).
3. Its runs' DBOS workflows (:mod:`.workflows`), then its run rows last. A run row left behind
   without its session marks an interrupted collection: the next one finishes it
   (:func:`_orphaned_sessions`).

**A run deleted from a session that lives on** loses its checkpoints, usage, pending tool calls,
stream chunks, DBOS workflows and finally its run row - never the session's messages (the
planner's docstring says why). Its row goes only while it is finished and not the session's
current run.

A run (or session) whose DBOS workflow tree holds an unfinished workflow is skipped whole, and
counted in :attr:`GcReport.skipped`. Two collections at once (two workers) are safe: every
delete names rows by key and a claim succeeds once; the loser deletes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection, Engine

from helix_dbos.retention.inventory import live_families, session_pages
from helix_dbos.retention.planner import RetentionPlan, RunExpiry, SessionExpiry, plan_retention
from helix_dbos.retention.policy import RetentionPolicy
from helix_dbos.retention.workflows import FINISHED_WORKFLOW_STATUSES, WorkflowRows
from helix_dbos.store.engine import begin_read, begin_write, create_engine_for
from helix_dbos.store.rows import TERMINAL_RUN_STATUSES
from helix_dbos.store.schema import (
    checkpoints,
    messages,
    pending_tool_calls,
    runs,
    sessions,
    stream_chunks,
    streams,
    sub_session_refs,
    usage,
)

__all__ = ["DBOS_WORKFLOWS", "GcReport", "collect_garbage", "execute_plan"]

logger = logging.getLogger("helix_dbos.retention")

DBOS_WORKFLOWS = "dbos.workflow_status"
"""The report's key for DBOS workflows deleted (each with its inputs, outputs, steps, events and streams)."""

REPORTED_TABLES: tuple[str, ...] = (
    sessions.name,
    runs.name,
    messages.name,
    checkpoints.name,
    usage.name,
    sub_session_refs.name,
    pending_tool_calls.name,
    streams.name,
    stream_chunks.name,
    DBOS_WORKFLOWS,
)
"""Every table a collection deletes from, in the order a report prints them."""

_GROUP = 200
"""Sessions or runs handled together: one claim statement, one workflow-tree listing."""


class GcReport(BaseModel):
    """What one collection deleted (or, with ``dry_run``, would delete), per table."""

    model_config = ConfigDict(extra="forbid")

    dry_run: bool
    deleted: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(REPORTED_TABLES, 0))
    """Rows per table (``dbos.workflow_status``: DBOS workflows, each with its other DBOS rows)."""
    sessions_deleted: int = 0
    """Sessions deleted whole."""
    runs_deleted: int = 0
    """Runs deleted from sessions that live on."""
    skipped: int = 0
    """Planned sessions or runs left alone: started again since planned, or a DBOS workflow unfinished."""
    live_sessions_kept: int = 0
    """Sessions of live families (in flight, parked, or with a live companion), not looked at."""

    def add(self, table: str, rows: int) -> None:
        """Count ``rows`` more for ``table``."""
        self.deleted[table] = self.deleted.get(table, 0) + rows


def collect_garbage(
    database: Engine | str,
    policy: RetentionPolicy,
    workflows: WorkflowRows | None,
    *,
    now_ms: int,
    batch_size: int = 500,
    dry_run: bool = False,
    page_size: int = 1000,
) -> GcReport:
    """Delete everything ``policy`` says is past it, as of ``now_ms``; return the per-table counts.

    ``database`` is the store's engine or URL (an engine made here is disposed at the end).

    ``workflows`` is DBOS's side (``None``: DBOS rows are left alone, e.g. when DBOS keeps its
    tables elsewhere). Raises :class:`~helix_dbos.retention.policy.RetentionPolicyError` for a
    policy without any limit, ``ValueError`` for a ``batch_size`` below 1.
    """
    policy.require_a_limit()
    if batch_size < 1 or page_size < 1:
        raise ValueError(f"batch_size and page_size must be at least 1, not {batch_size} and {page_size}")
    if isinstance(database, str):
        engine = create_engine_for(database)
        try:
            return collect_garbage(
                engine, policy, workflows, now_ms=now_ms, batch_size=batch_size, dry_run=dry_run, page_size=page_size
            )
        finally:
            engine.dispose()
    engine = database
    report = GcReport(dry_run=dry_run)
    if not dry_run:
        orphans = _orphaned_sessions(engine)
        if orphans:
            logger.info("retention: finishing %d interrupted session deletions", len(orphans))
            _delete_claimed(engine, orphans, {sid: sid for sid in orphans}, workflows, batch_size, report, dry_run)
    live = live_families(engine)
    for page, page_runs in session_pages(engine, page_size):
        plan = plan_retention(page, page_runs, policy, now_ms=now_ms, live_families=live)
        execute_plan(engine, plan, workflows, batch_size=batch_size, dry_run=dry_run, report=report)
    logger.info("retention: %s", report.deleted, extra={"dry_run": dry_run})
    return report


def execute_plan(
    engine: Engine,
    plan: RetentionPlan,
    workflows: WorkflowRows | None,
    *,
    batch_size: int,
    dry_run: bool = False,
    report: GcReport | None = None,
) -> GcReport:
    """Delete what ``plan`` says (counts added to ``report``, a new one when not given)."""
    report = report if report is not None else GcReport(dry_run=dry_run)
    report.live_sessions_kept += plan.live_sessions_kept
    for group in _chunks(plan.sessions, _GROUP):
        _delete_sessions(engine, group, workflows, batch_size, report, dry_run)
    for run_group in _chunks(plan.runs, _GROUP):
        _delete_runs(engine, run_group, workflows, batch_size, report, dry_run)
    return report


# --- sessions deleted whole -------------------------------------------------------------------------


def _delete_sessions(
    engine: Engine,
    group: Sequence[SessionExpiry],
    workflows: WorkflowRows | None,
    batch_size: int,
    report: GcReport,
    dry_run: bool,
) -> None:
    finished = _finished_trees(workflows, {s.session_id: s.workflow_ids for s in group})
    ready = [s for s in group if s.session_id in finished]
    report.skipped += len(group) - len(ready)
    if not ready:
        return
    pairs = [(s.session_id, s.version) for s in ready]
    claimable = sa.tuple_(sessions.c.session_id, sessions.c.version).in_(pairs) & (sessions.c.status != "active")
    if dry_run:
        with begin_read(engine) as conn:
            claimed = [r[0] for r in conn.execute(sa.select(sessions.c.session_id).where(claimable))]
    else:
        with begin_write(engine) as conn:
            claim = sa.delete(sessions).where(claimable).returning(sessions.c.session_id)
            claimed = [r[0] for r in conn.execute(claim)]
    report.skipped += len(ready) - len(claimed)
    report.add(sessions.name, len(claimed))
    report.sessions_deleted += len(claimed)
    if not claimed:
        return
    streams_of = {s.session_id: s.stream_id for s in ready}
    trees = {sid: finished[sid] for sid in claimed}
    _delete_claimed(engine, claimed, streams_of, workflows, batch_size, report, dry_run, trees=trees)


def _delete_claimed(
    engine: Engine,
    session_ids: Sequence[str],
    stream_of: dict[str, str],
    workflows: WorkflowRows | None,
    batch_size: int,
    report: GcReport,
    dry_run: bool,
    *,
    trees: dict[str, list[str]] | None = None,
) -> None:
    """Step 2 and 3 of a whole deletion, for sessions whose row is gone (or, dry, about to be)."""
    ids = list(session_ids)

    def unclaimed(table: sa.Table) -> sa.ColumnElement[bool]:
        if dry_run:  # nothing was claimed: count what the claim would orphan
            return table.c.session_id.in_(ids)
        return table.c.session_id.in_(ids) & ~sa.exists().where(sessions.c.session_id == table.c.session_id)

    for table in (messages, checkpoints, usage, sub_session_refs, pending_tool_calls):
        report.add(table.name, _delete_in_batches(engine, table, unclaimed(table), batch_size, dry_run))
    stream_ids = _unshared_streams(engine, ids, sorted({stream_of[sid] for sid in ids}), dry_run)
    chunk_rows = stream_chunks.c.stream_id.in_(stream_ids)
    report.add(stream_chunks.name, _delete_in_batches(engine, stream_chunks, chunk_rows, batch_size, dry_run))
    stream_rows = streams.c.stream_id.in_(stream_ids)
    report.add(streams.name, _delete_in_batches(engine, streams, stream_rows, batch_size, dry_run))
    if trees is None:
        with begin_read(engine) as conn:
            run_rows = conn.execute(sa.select(runs.c.session_id, runs.c.workflow_id).where(runs.c.session_id.in_(ids)))
            wanted: dict[str, list[str]] = {}
            for sid, wid in run_rows:
                wanted.setdefault(sid, []).append(wid)
        trees = _finished_trees(workflows, wanted)
    _delete_workflows(workflows, [w for sid in ids for w in trees.get(sid, [])], batch_size, report, dry_run)
    report.add(runs.name, _delete_in_batches(engine, runs, unclaimed(runs), batch_size, dry_run))


def _unshared_streams(engine: Engine, session_ids: list[str], stream_ids: list[str], dry_run: bool) -> list[str]:
    """The streams of these deleted sessions that no remaining session names.

    A stream named after its session (the default) is that session's. Only a custom stream id could
    be shared, and only those are looked up (``sessions.stream_id`` has no index: one scan per
    group, paid only by groups with custom stream ids). On a dry run nothing was claimed.
    """
    custom = sorted(set(stream_ids) - set(session_ids))
    if dry_run or not custom:
        return stream_ids
    query = sa.select(sessions.c.stream_id).where(sessions.c.stream_id.in_(custom))
    with begin_read(engine) as conn:
        named = {r[0] for r in conn.execute(query)}
    return [s for s in stream_ids if s not in named]


def _orphaned_sessions(engine: Engine) -> list[str]:
    """Session ids with run rows but no session row: deletions a crash interrupted (stream id: the session id)."""
    query = (
        sa.select(runs.c.session_id).where(~sa.exists().where(sessions.c.session_id == runs.c.session_id)).distinct()
    )
    with begin_read(engine) as conn:
        return [r[0] for r in conn.execute(query)]


# --- runs deleted from sessions that live on ----------------------------------------------------------


def _delete_runs(
    engine: Engine,
    group: Sequence[RunExpiry],
    workflows: WorkflowRows | None,
    batch_size: int,
    report: GcReport,
    dry_run: bool,
) -> None:
    finished = _finished_trees(workflows, {r.run_id: [r.workflow_id] for r in group})
    ready = [r for r in group if r.run_id in finished]
    report.skipped += len(group) - len(ready)
    if not ready:
        return
    session_ids = sorted({r.session_id for r in ready})
    run_ids = [r.run_id for r in ready]
    for table in (checkpoints, usage, pending_tool_calls):
        rows = table.c.session_id.in_(session_ids) & table.c.run_id.in_(run_ids)
        report.add(table.name, _delete_in_batches(engine, table, rows, batch_size, dry_run))
    chunk_rows = stream_chunks.c.stream_id.in_(sorted({r.stream_id for r in ready})) & stream_chunks.c.run_id.in_(
        run_ids
    )
    chunks_deleted = _delete_in_batches(
        engine, stream_chunks, chunk_rows, batch_size, dry_run, also=_count_out_of_streams
    )
    report.add(stream_chunks.name, chunks_deleted)
    _delete_workflows(workflows, [w for r in ready for w in finished[r.run_id]], batch_size, report, dry_run)
    finished_not_current = (
        runs.c.run_id.in_(run_ids)
        & runs.c.status.in_(sorted(TERMINAL_RUN_STATUSES))
        # Keyed on the session's primary key: a lookup per row, not a scan of sessions.
        & ~sa.exists().where(sessions.c.session_id == runs.c.session_id, sessions.c.run_id == runs.c.run_id)
    )
    deleted = _delete_in_batches(engine, runs, finished_not_current, batch_size, dry_run)
    report.add(runs.name, deleted)
    report.runs_deleted += deleted


def _count_out_of_streams(conn: Connection, deleted: Sequence[sa.Row[Any]]) -> None:
    """Keep ``helix_streams.chunk_count`` true for a stream that lives on (its readers report it)."""
    per_stream: dict[str, int] = {}
    for row in deleted:
        per_stream[row[0]] = per_stream.get(row[0], 0) + 1
    for stream_id, removed in per_stream.items():
        conn.execute(
            sa.update(streams)
            .where(streams.c.stream_id == stream_id)
            .values(chunk_count=streams.c.chunk_count - removed)
        )


# --- shared --------------------------------------------------------------------------------------------


def _finished_trees(workflows: WorkflowRows | None, wanted: dict[str, list[str]]) -> dict[str, list[str]]:
    """``key -> its DBOS workflow tree`` for the keys whose whole tree is finished (the others left out).

    One listing for the whole group (a generation per query), each workflow attributed to the key
    whose workflow it descends from.
    """
    if workflows is None:
        return {key: [] for key in wanted}
    owner = {wid: key for key, ids in wanted.items() for wid in ids}
    trees: dict[str, list[str]] = {key: [] for key in wanted}
    unfinished: set[str] = set()
    for node in workflows.tree(list(owner)):
        key = owner.get(node.workflow_id)
        if key is None and node.parent_workflow_id is not None:
            key = owner.get(node.parent_workflow_id)
        if key is None:  # listed as a child of something not ours: cannot happen, but never delete it
            continue
        owner[node.workflow_id] = key
        trees[key].append(node.workflow_id)
        if node.status not in FINISHED_WORKFLOW_STATUSES:
            unfinished.add(key)
    return {key: tree for key, tree in trees.items() if key not in unfinished}


def _delete_workflows(
    workflows: WorkflowRows | None, workflow_ids: Sequence[str], batch_size: int, report: GcReport, dry_run: bool
) -> None:
    unique = list(dict.fromkeys(workflow_ids))
    if workflows is not None and not dry_run:
        for batch in _chunks(unique, batch_size):
            workflows.delete(batch)
    report.add(DBOS_WORKFLOWS, len(unique))


def _delete_in_batches(
    engine: Engine,
    table: sa.Table,
    where: sa.ColumnElement[bool],
    batch_size: int,
    dry_run: bool,
    *,
    also: Callable[[Connection, Sequence[sa.Row[Any]]], object] | None = None,
) -> int:
    """Delete the rows of ``table`` matching ``where``, ``batch_size`` primary keys per transaction.

    ``also(conn, keys)`` runs in each batch's transaction with the keys it deleted.
    """
    if dry_run:
        with begin_read(engine) as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(table).where(where)).scalar_one())
    key: list[sa.Column[Any]] = list(table.primary_key.columns)
    total = 0
    while True:
        with begin_write(engine) as conn:
            found = conn.execute(sa.select(*key).where(where).limit(batch_size)).all()
            if not found:
                return total
            by_key = (
                key[0].in_([row[0] for row in found])
                if len(key) == 1
                else sa.tuple_(*key).in_([tuple(row) for row in found])
            )
            total += conn.execute(sa.delete(table).where(by_key)).rowcount
            if also is not None:
                also(conn, found)
        if len(found) < batch_size:
            return total


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
