"""Waking a run that waits hot: the wake-up sent in the submission's own transaction.

A hot run blocks in ``DBOS.recv``; the submission that answers its call wakes it with a DBOS
message. Sent with ``DBOS.send`` once the answer has committed (:func:`~helix_dbos.runtime.hitl.
wake_run`), the wake-up is a second transaction, and a process that dies between the two leaves the
run asleep until its hot window ends (the answer is durable, so the run finds it then).

When the store lives in DBOS's system database, which is what ``launch()`` sets up on PostgreSQL,
DBOS's public ``DBOSClient.send_in_transaction`` writes the wake-up in the answer's transaction:
both commit or neither does, with one transaction fewer, and DBOS's notification trigger wakes the
run as they commit. A wake-up the database refuses there (DBOS's tables are not in this database
after all) raises :class:`~helix_dbos.errors.WakeUpRefusedError`, which rolls the whole transaction
back; the executor then records the answer on its own and sends the wake-up with ``DBOS.send``,
so a refusal never costs the answer (and a savepoint, two round trips on every answer, is not
needed to guard against a misconfiguration). A refusal means DBOS's tables are not where the
executor was told they are, so the executor stops trying after the first one.
"""

from __future__ import annotations

import threading
import uuid

from dbos import DBOSClient
from sqlalchemy import Connection, Engine

from helix_dbos.errors import WakeUpRefusedError
from helix_dbos.runtime.backend import Backend
from helix_dbos.runtime.hitl import HITL_TOPIC, wake_message
from helix_dbos.store.base import PendingToolCall
from helix_dbos.store.retry import is_transient

__all__ = ["TransactionalWaker"]


class TransactionalWaker:
    """Writes a hot run's wake-up through the submission's connection (``SqlPendingCallStore.submit_with``).

    The client is DBOS's own, on the store's engine, built on first use: the wake-up is serialized
    and stored exactly as ``DBOS.send`` would, in the schema DBOS uses by default.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._client: DBOSClient | None = None
        self._lock = threading.Lock()

    @classmethod
    def for_backend(cls, backend: Backend) -> TransactionalWaker:
        """The waker over the store's engine, or a clear refusal when the store cannot host it.

        It needs a store on PostgreSQL whose ``store.pending`` takes work into an answer's
        transaction (:class:`~helix_dbos.store.capabilities.TransactionalSubmit`).
        """
        engine = backend.engine
        if engine is None or engine.dialect.name != "postgresql" or backend.transactional_submit is None:
            raise ValueError(
                "wake_in_submission needs a PostgreSQL store (SqlSessionStore) in DBOS's system database; "
                "leave it off to wake runs with DBOS.send"
            )
        return cls(engine)

    def _dbos_client(self) -> DBOSClient:
        with self._lock:
            if self._client is None:
                self._client = DBOSClient(system_database_engine=self._engine, lazy=True)
            return self._client

    def __call__(self, conn: Connection, answered: PendingToolCall) -> None:
        """Write the wake-up of ``answered``'s run; raises :class:`WakeUpRefusedError` if refused.

        A transient database error (a dropped connection, a deadlock) is not a refusal: it passes
        through, so the store's retry runs the whole submission again, wake-up included.
        """
        workflow_id = answered.workflow_id
        key = answered.tool_call_id
        try:
            self._dbos_client().send_in_transaction(
                conn,
                workflow_id,
                wake_message(key, answered),
                HITL_TOPIC,
                idempotency_key=f"{workflow_id}:{key}:{uuid.uuid4().hex}",
            )
        except Exception as exc:
            if is_transient(exc):
                raise
            raise WakeUpRefusedError(workflow_id, exc) from exc
