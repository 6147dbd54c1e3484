"""The executor's backend: its store and stream manager, with the fast paths they offer, resolved once.

The runtime runs correctly over the base protocols alone (:mod:`helix_dbos.store.base`,
:mod:`helix_dbos.stream.base`). The fast PostgreSQL path is a set of optional, declared
capabilities (:mod:`helix_dbos.store.capabilities`, :mod:`helix_dbos.stream.capabilities`): a
step commit that carries the stream's queued chunks, a run's start that reads and activates its
stream, an answer that wakes its run, all in one transaction. :meth:`Backend.resolve` checks
each once, when the executor is built, and the runtime asks the :class:`Backend` (a field is
``None`` where the slower path applies) instead of looking for methods on the objects it holds.

A joint transaction needs both sides: the store's transaction and a stream that can join it.
``joint_start`` and ``joint_commit`` are therefore set only when the stream manager is a
:class:`~helix_dbos.stream.capabilities.TransactionalStream` too; whether the two share the
engine is still the manager's call on every hold (it refuses another engine), so a store and a
stream on separate databases keep the slower path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from helix_dbos.store.capabilities import (
    JointCommitStore,
    JointStartStore,
    NewSessionStart,
    SharedEngine,
    TransactionalSubmit,
)
from helix_dbos.stream.capabilities import (
    ActivatableStream,
    QueueingStream,
    RecordReader,
    ThreadEndingStream,
    TransactionalStream,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from helix_dbos.store.base import SessionStore
    from helix_dbos.stream.base import StreamManager

__all__ = ["Backend"]


@dataclass(frozen=True)
class Backend:
    """What one executor's store and stream manager offer beyond their base protocols.

    Each field is the object offering the capability (typed as it), or ``None``: the runtime then
    takes the base protocol's path, which is slower, never less correct.
    """

    engine: Engine | None = None
    """The store's engine, when its transactions can be shared (:class:`SharedEngine`)."""
    joint_start: JointStartStore | None = None
    """The store, when a run's start can read and activate the stream in its transaction."""
    new_session_start: NewSessionStart | None = None
    """The store, when a new session's first run (and its stream's start) can be one statement."""
    joint_commit: JointCommitStore | None = None
    """The store, when a step commit can store the stream's queued chunks in its transaction."""
    transactional_submit: TransactionalSubmit | None = None
    """``store.pending``, when an answer can carry its run's wake-up in its transaction."""
    transactional_stream: TransactionalStream | None = None
    """The stream manager, when its writes can join a transaction on the store's engine."""
    queueing: QueueingStream | None = None
    """The stream manager, when a keyed write can be queued from a workflow thread directly."""
    ending: ThreadEndingStream | None = None
    """The stream manager, when a workflow thread can end a stream directly (no hop to the loop)."""
    activation: ActivatableStream | None = None
    """The stream manager, when it caches stream status and a run's start must activate past it."""

    @classmethod
    def resolve(cls, manager: StreamManager, store: SessionStore | None = None) -> Backend:
        """Check once which capabilities ``store`` (when given) and ``manager`` offer.

        The one place the runtime inspects what its store and stream manager can do: everything
        else asks the result.
        """
        joins = isinstance(manager, TransactionalStream)
        pending = None if store is None else store.pending
        return cls(
            engine=store.engine if isinstance(store, SharedEngine) else None,
            joint_start=store if joins and isinstance(store, JointStartStore) else None,
            new_session_start=store if joins and isinstance(store, NewSessionStart) else None,
            joint_commit=store if joins and isinstance(store, JointCommitStore) else None,
            transactional_submit=pending if isinstance(pending, TransactionalSubmit) else None,
            transactional_stream=manager if isinstance(manager, TransactionalStream) else None,
            queueing=manager if isinstance(manager, QueueingStream) else None,
            ending=manager if isinstance(manager, ThreadEndingStream) else None,
            activation=manager if isinstance(manager, ActivatableStream) else None,
        )


if TYPE_CHECKING:
    # Checked by mypy only: the SQL store and stream offer every capability, with these signatures.
    from helix_dbos.store.hitl import SqlPendingCallStore
    from helix_dbos.store.sessions import SqlSessionStore
    from helix_dbos.stream.sql.manager import SqlStreamManager
    from helix_dbos.stream.sql.reader import SqlStreamReader

    def _sql_offers_every_capability(
        store: SqlSessionStore, pending: SqlPendingCallStore, manager: SqlStreamManager, reader: SqlStreamReader
    ) -> None:
        _start: JointStartStore = store
        _new: NewSessionStart = store
        _commit: JointCommitStore = store
        _submit: TransactionalSubmit = pending
        _stream: TransactionalStream = manager
        _queue: QueueingStream = manager
        _end: ThreadEndingStream = manager
        _activate: ActivatableStream = manager
        _records: RecordReader = reader
