"""The optional fast paths a store may offer beyond :mod:`helix_dbos.store.base`: joint transactions.

A :class:`~helix_dbos.store.base.SessionStore` is complete without any of these: the runtime runs
every run correctly over the base protocols alone. A store that also offers one of them lets the
runtime fold another writer's work into the store's own transaction (the durable stream's chunks
into a step commit, the stream's activation into a run's start, a hot run's wake-up into the
answer that wakes it): fewer transactions on a run's critical path, and two writes that commit
together or not at all.

They are declared here, rather than discovered by attribute, so that a store's author can see
what to implement and what it must guarantee, mypy checks the signatures, and
:class:`helix_dbos.testing.store_contract.JointTransactionContract` tests the guarantees. The
runtime checks them once, when an executor is built (:mod:`helix_dbos.runtime.backend`).

Every capability hands the store callables that run inside its transaction, on its
:attr:`SharedEngine.engine`: only a writer on the same engine can join, and a writer on another
engine refuses (the stream manager compares engines). What each must guarantee:

- the callables run inside the store's transaction, after its own reads or writes as documented,
  and run again whenever the store retries the transaction (they must be idempotent per attempt);
- an exception from a callable rolls the whole transaction back and reaches the caller unchanged,
  so the caller can fall back to the base method without the joint write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from helix_dbos.store.base import (
    CommitResult,
    PendingToolCall,
    StartRun,
    StartRunResult,
    StepCommit,
    SubmitOutcome,
    UsageRow,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from helix_dbos.store.dialect import RidingStart, RidingWrite

__all__ = [
    "JointCommitStore",
    "JointStartStore",
    "LeafUsageStore",
    "NewSessionStart",
    "SharedEngine",
    "TransactionalSubmit",
]


@runtime_checkable
class SharedEngine(Protocol):
    """A store whose transactions run on a SQLAlchemy engine other writers can share."""

    @property
    def engine(self) -> Engine:
        """The engine every transaction of the store runs on (what a joining writer must use too)."""
        ...


@runtime_checkable
class JointStartStore(SharedEngine, Protocol):
    """A store that starts a run and a stream in one transaction (``start_run_with``).

    Without it a run's start costs three transactions: a read of the stream's latest sequence, the
    store's ``start_run`` and the stream's activation.
    """

    def start_run_with(
        self,
        request: StartRun,
        stream_sequence: Callable[[Connection], int],
        also: Callable[[Connection], object],
        riding: RidingStart | None = None,
    ) -> StartRunResult:
        """:meth:`~helix_dbos.store.base.SessionStore.start_run`, with the stream's start in its transaction.

        Must: call ``stream_sequence(conn)`` while holding the session's lock and record what it
        returns as the run's ``stream_start_sequence`` (``request.stream_start_sequence`` is
        ignored); call ``also(conn)`` after the run's writes, and only when a run was actually
        started (a repeated request, ``existing``, calls it not at all, so it activates nothing).
        ``riding`` is the same stream start as SQL (:class:`~helix_dbos.store.dialect.RidingStart`);
        a store may do it instead of the two callables, in one statement with the run's writes.
        """
        ...


@runtime_checkable
class NewSessionStart(SharedEngine, Protocol):
    """A store that starts a new session's first run as one statement, or writes nothing (``start_new_session``).

    The runtime tries it before reading the session when a start names a session id it has not
    seen: for a new session, the common case, that saves the read and the transaction's
    ``BEGIN`` / ``COMMIT``; for an existing one it costs one failed statement.
    """

    def start_new_session(self, request: StartRun, riding: RidingStart | None = None) -> StartRunResult | None:
        """Create ``request``'s session with its first run, or return ``None`` having written nothing.

        Must: write exactly what ``start_run(request)`` writes for a session that does not exist,
        with ``riding``'s stream start in the same atomic write when given; return ``None`` with
        nothing written (no stream activation either) when the session exists, and may return
        ``None`` whenever it has no such write (the caller then takes ``start_run``'s path).
        """
        ...


@runtime_checkable
class JointCommitStore(SharedEngine, Protocol):
    """A store that commits a step with another writer's rows in the same transaction (``commit_step_with``).

    The runtime stores a run's queued stream chunks this way: they cost no transaction of their own.
    """

    def commit_step_with(self, commit: StepCommit, also: Callable[[Connection], object] | RidingWrite) -> CommitResult:
        """:meth:`~helix_dbos.store.base.SessionStore.commit_step`, with ``also``'s writes in its transaction.

        Must: return exactly what ``commit_step(commit)`` would (the step's recorded output depends
        on it); run ``also(conn)`` after the commit's writes, also when the step was already
        committed (a re-executed commit still carries the chunks written since), or put a
        :class:`~helix_dbos.store.dialect.RidingWrite`'s CTEs in the commit's own statement and call
        its ``finish`` with the values of its columns (a store that cannot must refuse a
        ``RidingWrite`` with an error, never drop it).
        """
        ...


@runtime_checkable
class LeafUsageStore(Protocol):
    """A store that reads a session's usage and whether it delegated in one read (``get_usage_unless_delegated``).

    ``AgentResult.usage`` rolls a run's usage up with its children's; most runs have none, and this
    answers both at once (:func:`helix_dbos.store.usage_tree.usage_with_children`).
    """

    def get_usage_unless_delegated(self, session_id: str, *, run_id: str | None = None) -> list[UsageRow] | None:
        """``get_usage`` in one read when the session delegated nothing; ``None`` when it did.

        Must: return exactly ``get_usage(session_id, run_id=run_id)`` when the session has no child
        reference (``get_sub_session_refs`` empty), else ``None``.
        """
        ...


@runtime_checkable
class TransactionalSubmit(Protocol):
    """A pending-call store (``store.pending``) that runs a writer's work in an answer's transaction.

    The runtime sends a hot run's wake-up this way (:mod:`helix_dbos.runtime.wake`): the answer and
    the wake-up commit together, so a crash between them cannot leave the run asleep.
    """

    def submit_with(
        self,
        session_id: str,
        tool_call_id: str,
        submission: dict[str, Any],
        check: Callable[[PendingToolCall], None] | None,
        if_hot: Callable[[Connection, PendingToolCall], object],
    ) -> SubmitOutcome:
        """:meth:`~helix_dbos.store.base.PendingCallStore.submit`, with ``if_hot`` in its transaction.

        Must: behave exactly as ``submit`` (checks, refusals, outcome); call
        ``if_hot(conn, answered)`` after the answer is written, with the call as answered, and only
        when the call's delivery is ``hot``; let an exception from ``if_hot`` roll the answer back.
        """
        ...
