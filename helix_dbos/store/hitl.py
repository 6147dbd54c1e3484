"""Durable pending tool calls: the source of truth for human-in-the-loop answers.

A client-executed or approval-gated tool call is a row here from the moment the run asks for it.
Every transition is one compare-and-set on that row, which is what makes submission exactly-once
and decides, without races, how an answer reaches its run:

- ``pending`` -> ``answered`` by :meth:`SqlPendingCallStore.submit` (one winner; a second
  submission, same payload or not, is rejected and changes nothing);
- ``pending`` -> ``expired`` by :meth:`SqlPendingCallStore.expire` when a deadline passes;
- ``answered``/``expired`` -> ``applied`` when a run turns the answer into a tool result.

Independently, ``delivery`` says where the waiting run is: ``hot`` while its workflow is blocked
in ``DBOS.recv`` (a submitter wakes it with a DBOS message: inside its transaction through
:meth:`SqlPendingCallStore.submit_with`, or with ``DBOS.send`` after), ``parked`` once the workflow ended
after its hot window (a submitter that completes the batch starts the continuation). The workflow
parks through :meth:`SqlPendingCallStore.park`, a CAS on the same rows, so an answer that races
the end of the hot window is seen by exactly one side: the submitter (it saw ``parked``) or the
workflow (its park found the row answered). The answer is always decided here: a wake-up may
carry the row a submission made final, never anything else.

The records (:class:`~helix_dbos.store.base.PendingToolCall`, ``SubmitOutcome``) and the protocol
(:class:`~helix_dbos.store.base.PendingCallStore`) live in ``helix_dbos.store.base``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from helix_dbos.errors import PendingToolCallNotFoundError, SessionNotFoundError, ToolCallAlreadyAnsweredError
from helix_dbos.session import SubSessionRef
from helix_dbos.store.base import PendingToolCall, RunRecord, SessionRecord, SubmitOutcome
from helix_dbos.store.engine import begin_read, begin_write, dialect_for, now_ms
from helix_dbos.store.retry import RetryPolicy, retrying
from helix_dbos.store.rows import session_record, sub_session_ref
from helix_dbos.store.schema import MARK_APPLIED, pending_tool_calls, runs, sessions, sub_session_refs

# The submission's statements, built once: every answer takes them (the hot path of HITL).
_RUN_OF_CALL: Final = (
    sa.select(pending_tool_calls.c.run_id)
    .where(
        pending_tool_calls.c.session_id == sa.bindparam("sid"),
        pending_tool_calls.c.tool_call_id == sa.bindparam("cid"),
    )
    .scalar_subquery()
)
_RUN_PREFIX: Final = "run__"
_BATCH_OF_CALL: Final = (
    sa.select(pending_tool_calls, *[c.label(_RUN_PREFIX + c.name) for c in runs.c])
    .select_from(pending_tool_calls.outerjoin(runs, runs.c.run_id == pending_tool_calls.c.run_id))
    .where(pending_tool_calls.c.session_id == sa.bindparam("sid"), pending_tool_calls.c.run_id == _RUN_OF_CALL)
)
"""Every call of the run the call ``cid`` belongs to (its batch: a run waits on one batch at a time),
each with that run's row (``run__`` columns), so the submission reads the run without a statement."""
_ANSWER: Final = (
    sa.update(pending_tool_calls)
    .where(
        pending_tool_calls.c.session_id == sa.bindparam("sid"),
        pending_tool_calls.c.tool_call_id == sa.bindparam("cid"),
        pending_tool_calls.c.status == "pending",
    )
    .values(
        status="answered",
        submission=sa.bindparam("submission", type_=pending_tool_calls.c.submission.type),
        answered_at=sa.bindparam("now"),
    )
)
"""The answer's compare-and-set: ``pending`` -> ``answered``."""
_ROW_VALUES: Final = tuple(c.name for c in pending_tool_calls.c if not c.primary_key)
FINISHED: Final = frozenset({"answered", "expired", "applied", "cancelled"})
"""Statuses no submission changes any more (the answer's compare-and-set is from ``pending``)."""
_REPLACE: Final = (
    sa.update(pending_tool_calls)
    .where(
        pending_tool_calls.c.session_id == sa.bindparam("sid"),
        pending_tool_calls.c.tool_call_id == sa.bindparam("cid"),
        pending_tool_calls.c.status.in_(sorted(FINISHED)),
    )
    .values({c: sa.bindparam(f"new_{c}", type_=pending_tool_calls.c[c].type) for c in _ROW_VALUES})
)
"""A fresh registration's new call in the row an earlier call of the same id left finished (CAS)."""


_UNFINISHED_CALL: Final = pending_tool_calls.alias("unfinished")
_COMPLETE_PARKED_BATCHES: Final = (
    sa.select(pending_tool_calls.c.session_id)
    .distinct()
    .select_from(
        pending_tool_calls.join(
            sessions,
            sa.and_(
                sessions.c.session_id == pending_tool_calls.c.session_id,
                sessions.c.run_id == pending_tool_calls.c.run_id,
            ),
        ).join(runs, runs.c.run_id == pending_tool_calls.c.run_id)
    )
    .where(
        pending_tool_calls.c.status.in_(["answered", "expired"]),
        pending_tool_calls.c.delivery == "parked",
        sessions.c.status == "active",
        runs.c.status == "suspended",
        ~sa.exists().where(
            _UNFINISHED_CALL.c.session_id == pending_tool_calls.c.session_id,
            _UNFINISHED_CALL.c.run_id == pending_tool_calls.c.run_id,
            sa.or_(
                _UNFINISHED_CALL.c.status == "pending",
                _UNFINISHED_CALL.c.answered_at > sa.bindparam("before"),
            ),
        ),
    )
    .limit(sa.bindparam("limit"))
)
"""Sessions whose current run is suspended on a parked batch with every call final (see
:meth:`SqlPendingCallStore.complete_parked_batches`). A batch is the run's calls, as a
submission's :data:`_BATCH_OF_CALL`; an ``answered``/``expired`` parked row that no run has applied
yet is where the scan starts (``ix_helix_pending_tool_calls_open``)."""


_EXPIRED_PARKED: Final = (
    sa.select(pending_tool_calls)
    .where(
        pending_tool_calls.c.status == "pending",
        pending_tool_calls.c.delivery == "parked",
        pending_tool_calls.c.deadline_ms.is_not(None),
        pending_tool_calls.c.deadline_ms <= sa.bindparam("now"),
    )
    .limit(sa.bindparam("limit"))
)
"""Parked calls past their deadline (:meth:`SqlPendingCallStore.expired_parked`, run by every sweep)."""


def _parents_with_children_done() -> sa.Select[str]:
    """The statement of :meth:`SqlPendingCallStore.parents_with_children_done` (built once, bound per call).

    The workers' sweep runs it every second in every process, busy or idle: built per call, its
    four aliases and their column collections were most of the sweep's CPU (issue 32).
    """
    parent, child, busy = sessions.alias("parent"), sessions.alias("child"), sessions.alias("busy")
    busy_refs = sub_session_refs.alias("busy_refs")
    return (
        sa.select(parent.c.session_id)
        .distinct()
        .select_from(
            parent.join(runs, runs.c.run_id == parent.c.run_id)
            .join(sub_session_refs, sub_session_refs.c.session_id == parent.c.session_id)
            .join(child, child.c.session_id == sub_session_refs.c.sub_session_id)
        )
        .where(
            parent.c.status == "active",
            runs.c.status == "suspended",
            sub_session_refs.c.status == "running",
            child.c.status != "active",
            ~sa.exists().where(
                pending_tool_calls.c.session_id == parent.c.session_id,
                pending_tool_calls.c.run_id == parent.c.run_id,
                pending_tool_calls.c.status == "pending",
            ),
            ~sa.exists()
            .select_from(busy_refs.join(busy, busy.c.session_id == busy_refs.c.sub_session_id))
            .where(
                busy_refs.c.session_id == parent.c.session_id,
                busy_refs.c.status == "running",
                busy_refs.c.mode == "ephemeral",
                busy.c.status == "active",
            ),
        )
        .limit(sa.bindparam("limit"))
    )


_PARENTS_WITH_CHILDREN_DONE: Final = _parents_with_children_done()
_PARENT_WITH_CHILDREN_DONE: Final = _PARENTS_WITH_CHILDREN_DONE.where(
    _PARENTS_WITH_CHILDREN_DONE.selected_columns.session_id == sa.bindparam("sid")
)
"""The same for one parent (a child's wake)."""


_CHILD = sessions.alias("child")
_CHILDREN_PAST_DEADLINE: Final = (
    sa.select(sub_session_refs)
    .join(_CHILD, _CHILD.c.session_id == sub_session_refs.c.sub_session_id)
    .where(
        sub_session_refs.c.status == "running",
        sub_session_refs.c.deadline_ms.is_not(None),
        sub_session_refs.c.deadline_ms <= sa.bindparam("now"),
        _CHILD.c.status == "active",
    )
    .order_by(sub_session_refs.c.deadline_ms)
    .limit(sa.bindparam("limit"))
)
"""Running children past their parent's deadline (:meth:`SqlPendingCallStore.children_past_deadline`);
the partial index ``ix_helix_sub_session_refs_deadline`` holds exactly the references it looks at."""


def mark_applied_in(conn: Connection, session_id: str, tool_call_ids: list[str]) -> None:
    """``answered``/``expired`` -> ``applied`` inside the caller's transaction (a step commit's)."""
    if tool_call_ids:
        conn.execute(MARK_APPLIED, {"sid": session_id, "ids": tool_call_ids})


_PENDING_COLUMNS: Final = tuple(c.name for c in pending_tool_calls.c)


def _row(row: Any) -> PendingToolCall:
    return PendingToolCall.model_validate(dict(row._mapping))


class SqlPendingCallStore:
    """:class:`~helix_dbos.store.base.PendingCallStore` over the store's engine (PostgreSQL or SQLite)."""

    def __init__(self, engine: Engine, *, retry: RetryPolicy | None = None) -> None:
        self._engine = engine
        self._dialect = dialect_for(engine)
        self._retry = retry if retry is not None else RetryPolicy()

    @property
    def retry_policy(self) -> RetryPolicy:
        """How operations retry transient database errors (see ``helix_dbos.store.retry``)."""
        return self._retry

    def _begin(self) -> Any:
        return begin_write(self._engine)

    @retrying
    def register(self, calls: list[PendingToolCall], *, fresh: bool = False) -> None:
        """Record calls as pending, idempotently.

        A call that already has a row keeps its arguments, digest, deadline and any answer; if it is
        still open it is handed to the registering run (a continuation taking over a parked batch),
        which is now the one to wake.

        ``fresh``: the calls come from a model response the registering run just received (not a
        continuation taking over the batch its previous run suspended on). Models reuse call ids
        across responses, so a row of the same id may be an earlier call's: one that is finished
        (:data:`FINISHED`) and was left by another run, or ``applied`` (its answer is in the
        transcript already), is that earlier call, and is replaced by the new one. A row of the
        registering run that is not ``applied`` is this registration's own, written by an attempt
        of the same step, and a live (``pending``) row is never replaced.
        """
        if not calls:
            return
        session_id = calls[0].session_id
        with self._begin() as conn:
            self._require_session(conn, session_id)
            existing = {
                r.tool_call_id: (r.run_id, r.status)
                for r in conn.execute(
                    sa.select(
                        pending_tool_calls.c.tool_call_id, pending_tool_calls.c.run_id, pending_tool_calls.c.status
                    ).where(
                        pending_tool_calls.c.session_id == session_id,
                        pending_tool_calls.c.tool_call_id.in_([c.tool_call_id for c in calls]),
                    )
                )
            }
            fresh_rows = [c.model_dump(mode="json") for c in calls if c.tool_call_id not in existing]
            if fresh_rows:
                conn.execute(pending_tool_calls.insert(), fresh_rows)
            for call in calls:
                if call.tool_call_id not in existing:
                    continue
                run_id, status = existing[call.tool_call_id]
                if fresh and status in FINISHED and (run_id != call.run_id or status == "applied"):
                    row = call.model_dump(mode="json")
                    values = {f"new_{c}": row[c] for c in _ROW_VALUES}
                    conn.execute(_REPLACE, {**values, "sid": session_id, "cid": call.tool_call_id})
                    continue
                conn.execute(
                    sa.update(pending_tool_calls)
                    .where(
                        pending_tool_calls.c.session_id == session_id,
                        pending_tool_calls.c.tool_call_id == call.tool_call_id,
                        pending_tool_calls.c.status == "pending",
                    )
                    .values(run_id=call.run_id, workflow_id=call.workflow_id, delivery="hot")
                )

    @retrying
    def get(self, session_id: str, tool_call_ids: list[str] | None = None) -> list[PendingToolCall]:
        """Rows of the session (optionally only these ids), oldest first."""
        query = sa.select(pending_tool_calls).where(pending_tool_calls.c.session_id == session_id)
        if tool_call_ids is not None:
            query = query.where(pending_tool_calls.c.tool_call_id.in_(tool_call_ids))
        with self._engine.connect() as conn:
            return [_row(r) for r in conn.execute(query.order_by(pending_tool_calls.c.created_at))]

    @retrying
    def get_with_session(
        self, session_id: str, tool_call_ids: list[str]
    ) -> tuple[list[PendingToolCall], SessionRecord | None]:
        """These calls of the session, oldest first, and the session record, in one read."""
        query = (
            sa.select(pending_tool_calls)
            .where(pending_tool_calls.c.session_id == session_id, pending_tool_calls.c.tool_call_id.in_(tool_call_ids))
            .order_by(pending_tool_calls.c.created_at)
        )
        with begin_read(self._engine) as conn:
            rows = [_row(r) for r in conn.execute(query)]
            session = conn.execute(sa.select(sessions).where(sessions.c.session_id == session_id)).first()
        return rows, None if session is None else session_record(session)

    def open_calls(self, session_id: str) -> list[PendingToolCall]:
        """Calls still waiting for an answer."""
        return [c for c in self.get(session_id) if c.status == "pending"]

    @retrying
    def open_calls_in_tree(self, root_session_id: str) -> list[PendingToolCall]:
        """Open calls of the session and of every session under it (sub-agents, companions), oldest first.

        What a client answering the root sees: every call the tree waits on, each with its owning
        session (``session_id``). The tree is walked along ``parent_session_id`` (indexed), so a
        session of another tree never shows up, whatever its call ids.
        """
        tree = _session_tree(root_session_id)
        with self._engine.connect() as conn:
            session_ids = list(conn.execute(sa.select(tree.c.session_id)).scalars())
            # Per session, as ``open_calls`` reads them (a batch's calls share their record time and
            # keep their call order); then merged by record time, a stable sort keeping that order.
            rows = [
                _row(r)
                for sid in [root_session_id, *sorted(set(session_ids) - {root_session_id})]
                for r in conn.execute(
                    sa.select(pending_tool_calls)
                    .where(pending_tool_calls.c.session_id == sid)
                    .order_by(pending_tool_calls.c.created_at)
                )
            ]
        return sorted((row for row in rows if row.status == "pending"), key=lambda row: row.created_at)

    @retrying
    def owner_in_tree(self, root_session_id: str, tool_call_id: str) -> str | None:
        """The session of the root's tree that owns the call ``tool_call_id``; ``None`` when none does.

        The ownership is the call's own row (written by the registration step that parks or waits on
        it) together with the owning session's parent chain, both durable before any client can see
        the call: there is no second record to write, clear or keep in step. Models reuse call ids,
        so several sessions of a tree may hold one: an open call wins, then the root's own row, then
        the newest.
        """
        tree = _session_tree(root_session_id)
        query = (
            sa.select(pending_tool_calls.c.session_id)
            .join(tree, tree.c.session_id == pending_tool_calls.c.session_id)
            .where(pending_tool_calls.c.tool_call_id == tool_call_id)
            .order_by(
                sa.case((pending_tool_calls.c.status == "pending", 0), else_=1),
                sa.case((pending_tool_calls.c.session_id == root_session_id, 0), else_=1),
                pending_tool_calls.c.created_at.desc(),
            )
            .limit(1)
        )
        with self._engine.connect() as conn:
            owner: str | None = conn.execute(query).scalar()
        return owner

    @retrying
    def submit(
        self,
        session_id: str,
        tool_call_id: str,
        submission: dict[str, Any],
        check: Callable[[PendingToolCall], None] | None = None,
    ) -> SubmitOutcome:
        """Record an answer exactly once (see the module docstring), in one transaction.

        Under the session lock it reads the call with the other calls of its run and that run's
        row (one statement), runs ``check`` on the call (an exception refuses the answer, nothing
        written) and flips the call with a compare-and-set, so the caller has the session and the
        run it needs to wake or continue without reading them again.
        """
        return self._submit(session_id, tool_call_id, submission, check, None)

    @retrying
    def submit_with(
        self,
        session_id: str,
        tool_call_id: str,
        submission: dict[str, Any],
        check: Callable[[PendingToolCall], None] | None,
        if_hot: Callable[[Connection, PendingToolCall], object],
    ) -> SubmitOutcome:
        """:meth:`submit`, with ``if_hot(conn, answered)`` run in the same transaction when the run waits hot.

        For writers on this store's engine whose rows must commit with the answer, or not
        at all: the runtime sends the hot run's wake-up this way (``helix_dbos.runtime.wake``).
        ``if_hot`` runs again if the transaction is retried.
        """
        return self._submit(session_id, tool_call_id, submission, check, if_hot)

    def _submit(
        self,
        session_id: str,
        tool_call_id: str,
        submission: dict[str, Any],
        check: Callable[[PendingToolCall], None] | None,
        if_hot: Callable[[Connection, PendingToolCall], object] | None,
    ) -> SubmitOutcome:
        with self._begin() as conn:
            session = self._dialect.lock_session(conn, session_id)
            if session is None:
                raise SessionNotFoundError(session_id)
            rows = conn.execute(_BATCH_OF_CALL, {"sid": session_id, "cid": tool_call_id}).all()
            batch = [PendingToolCall.model_validate({c: r._mapping[c] for c in _PENDING_COLUMNS}) for r in rows]
            call = next((c for c in batch if c.tool_call_id == tool_call_id), None)
            if call is None:
                raise PendingToolCallNotFoundError(session_id, tool_call_id)
            if check is not None:
                check(call)
            if call.status != "pending":
                raise ToolCallAlreadyAnsweredError(session_id, tool_call_id, call.status)
            now = now_ms()
            params = {"sid": session_id, "cid": tool_call_id, "submission": submission, "now": now}
            if conn.execute(_ANSWER, params).rowcount != 1:
                raise ToolCallAlreadyAnsweredError(session_id, tool_call_id, "answered")
            run = {c.name: rows[0]._mapping[_RUN_PREFIX + c.name] for c in runs.c}
            answered = call.model_copy(update={"status": "answered", "submission": submission, "answered_at": now})
            if if_hot is not None and call.delivery == "hot":
                if_hot(conn, answered)
        return SubmitOutcome(
            call=answered,
            delivery=call.delivery,
            batch_complete=not any(c.status == "pending" for c in batch if c.tool_call_id != tool_call_id),
            session=session_record(session),
            run=None if run["run_id"] is None else RunRecord.model_validate(run),
        )

    @retrying
    def park(self, session_id: str, run_id: str) -> list[PendingToolCall]:
        """The workflow's end of the hot window: mark unanswered calls parked; return all rows of the run."""
        with self._begin() as conn:
            self._require_session(conn, session_id)
            conn.execute(
                sa.update(pending_tool_calls)
                .where(
                    pending_tool_calls.c.session_id == session_id,
                    pending_tool_calls.c.run_id == run_id,
                    pending_tool_calls.c.status == "pending",
                )
                .values(delivery="parked")
            )
            rows = conn.execute(
                sa.select(pending_tool_calls).where(
                    pending_tool_calls.c.session_id == session_id, pending_tool_calls.c.run_id == run_id
                )
            )
            return [_row(r) for r in rows]

    @retrying
    def expire(self, session_id: str, tool_call_ids: list[str], now_ms: int) -> list[str]:
        """Expire calls whose deadline passed (CAS from ``pending``); returns the ids this call expired."""
        with self._begin() as conn:
            self._require_session(conn, session_id)
            result = conn.execute(
                sa.update(pending_tool_calls)
                .where(
                    pending_tool_calls.c.session_id == session_id,
                    pending_tool_calls.c.tool_call_id.in_(tool_call_ids),
                    pending_tool_calls.c.status == "pending",
                    pending_tool_calls.c.deadline_ms.is_not(None),
                    pending_tool_calls.c.deadline_ms <= now_ms,
                )
                .values(status="expired", answered_at=now_ms)
                .returning(pending_tool_calls.c.tool_call_id)
            )
            return [r.tool_call_id for r in result]

    @retrying
    def expired_parked(self, now_ms: int, limit: int = 100) -> list[PendingToolCall]:
        """Parked calls past their deadline (for the deadline sweeper)."""
        with self._engine.connect() as conn:
            rows = conn.execute(_EXPIRED_PARKED, {"now": now_ms, "limit": limit})
            return [_row(r) for r in rows]

    @retrying
    def complete_parked_batches(self, answered_before_ms: int, limit: int = 100) -> list[str]:
        """Sessions whose suspended run's parked batch has no open call left (for the sweep).

        A parked run ends its workflow in a step of its own after its park, and a submission that
        commits in between finds the run still ``running``: it cannot start the continuation, and
        the run that then suspends does not look at its calls again. This finds such a run: the
        session's current run, ``suspended``, whose calls are all ``answered`` or ``expired``, the
        last of them at or before ``answered_before_ms`` (so a submission that is about to start
        the continuation itself is left to do so). Read from the final parked rows no run has
        applied yet (the open-calls index), so it costs the answers in flight, not the parked runs.
        """
        with self._engine.connect() as conn:
            return list(
                conn.execute(_COMPLETE_PARKED_BATCHES, {"before": answered_before_ms, "limit": limit}).scalars()
            )

    @retrying
    def parents_with_children_done(self, limit: int = 100, *, session_id: str | None = None) -> list[str]:
        """Suspended parents a child they await no longer keeps waiting (for the sweep and the wake).

        A parent whose blocking companion waited on a human parked as ``suspended_awaiting_children``
        with the companion's ref left ``running``; once the human's answer has carried the companion
        to its end (its session no longer ``active``), the parent is to be continued. A parent parked
        on sub-agent children (ephemeral refs left ``running``) is continued once *all* of them have
        ended, so parallel children continue it once. A parent with a human call of its own still
        open is a parked batch, not this. ``session_id``: only that parent (a child's wake).
        """
        query, params = _PARENTS_WITH_CHILDREN_DONE, dict[str, object](limit=limit)
        if session_id is not None:
            query, params = _PARENT_WITH_CHILDREN_DONE, {"limit": limit, "sid": session_id}
        with self._engine.connect() as conn:
            return list(conn.execute(query, params).scalars())

    @retrying
    def children_past_deadline(self, now_ms: int, limit: int = 100) -> list[tuple[str, SubSessionRef]]:
        """Children still ``active`` past the deadline their parent's reference records, oldest first.

        The process running a child keeps its deadline in memory (``runtime.child_deadlines``); a
        child parked on its own children runs nowhere, so when the process that kept it dies, this
        is how the workers' sweep finds it. Each as ``(parent_session_id, ref)``.
        """
        with self._engine.connect() as conn:
            rows = conn.execute(_CHILDREN_PAST_DEADLINE, {"now": now_ms, "limit": limit})
            return [(row.session_id, sub_session_ref(row)) for row in rows]

    @retrying
    def mark_applied(self, session_id: str, tool_call_ids: list[str]) -> None:
        """Answers turned into tool results (idempotent)."""
        if not tool_call_ids:
            return
        with self._begin() as conn:
            mark_applied_in(conn, session_id, tool_call_ids)

    @retrying
    def cancel_open(self, session_id: str) -> list[str]:
        """Cancel every open call of the session (abort); returns their ids."""
        with self._begin() as conn:
            result = conn.execute(
                sa.update(pending_tool_calls)
                .where(pending_tool_calls.c.session_id == session_id, pending_tool_calls.c.status == "pending")
                .values(status="cancelled")
                .returning(pending_tool_calls.c.tool_call_id)
            )
            return [r.tool_call_id for r in result]

    def _require_session(self, conn: Connection, session_id: str) -> None:
        """Serialise HITL transitions of one session (row lock on PostgreSQL; SQLite writes are serial)."""
        if self._dialect.lock_session(conn, session_id, sessions.c.session_id) is None:
            raise SessionNotFoundError(session_id)


def _session_tree(root_session_id: str) -> sa.CTE:
    """The session ``root_session_id`` and every session under it, as a recursive CTE of ``session_id``."""
    tree = sa.select(sessions.c.session_id).where(sessions.c.session_id == root_session_id).cte("tree", recursive=True)
    return tree.union_all(sa.select(sessions.c.session_id).where(sessions.c.parent_session_id == tree.c.session_id))


if TYPE_CHECKING:
    from helix_dbos.store.base import PendingCallStore

    _protocol_check: type[PendingCallStore] = SqlPendingCallStore
