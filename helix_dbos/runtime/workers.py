"""A worker's background duties: heartbeat, the parked-call deadline sweep, takeover of dead workers.

They run on one daemon thread (:class:`BackgroundTasks`), apart from the executor, because they are
the only work a process does that nobody asked for: each round must survive a failing task (the
database away for a moment) and stop promptly at shutdown, before a drain, so that no takeover or
sweep starts work while the process is leaving.

Every duty is safe to run in several processes at once: the store's transitions are
compare-and-sets, and DBOS's re-enqueue of a dead executor's workflows is idempotent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from dbos import DBOS

from helix_dbos._clock import now_ms
from helix_dbos.errors import ExecutorIdInUseError
from helix_dbos.logger import Logger
from helix_dbos.runtime.client_tool_log import log_call_event, timeout_ms_of
from helix_dbos.runtime.identity import claim_executor_id
from helix_dbos.runtime.recovery import requeue_pending_runs
from helix_dbos.store.base import SessionStore


def executor_id() -> str:
    """The DBOS executor id of this process."""
    return str(DBOS.executor_id)


def heartbeat(store: SessionStore, logger: Logger | None = None) -> None:
    """Record that this worker is alive, in the row that names this process as the id's holder.

    The id was claimed at launch (:mod:`.identity`); an executor built inside an application's own
    DBOS claims it at its first heartbeat. When another live process holds it (two processes given
    one id, or one judged dead that was not), both would run each other's runs: that is logged as
    an error at every round, since only an operator can tell which process should go.
    """
    me, version = executor_id(), str(DBOS.application_version)
    if store.workers.renew(me, version, now_ms()):
        return
    try:
        claim_executor_id(store.workers, app_version=version, requested=me)
    except ExecutorIdInUseError as exc:
        if logger is not None:
            logger.error(f"[helix-dbos] {exc.message}", {"executor_id": me})


def recover_executors(logger: Logger, executor_ids: list[str]) -> int:
    """Re-enqueue the pending workflows of these executors for any live worker; returns how many."""
    requeued, _ = requeue_pending_runs(DBOS, executor_ids, str(DBOS.application_version))
    logger.warn("[helix-dbos] took over runs of dead workers", {"executors": executor_ids, "runs": len(requeued)})
    return len(requeued)


def take_over_dead_workers(store: SessionStore, logger: Logger, *, dead_after_seconds: float) -> list[str]:
    """Recover the in-flight runs of workers whose heartbeat stopped; returns their executor ids.

    DBOS recovers an executor's workflows only when a process with the same executor id starts;
    for a worker that never comes back, this re-enqueues its pending workflows so that any live
    worker (this one included) picks them up. The same as ``helix-dbos recover --executor-id``.
    """
    dead = store.workers.claim_dead(
        me=executor_id(),
        app_version=str(DBOS.application_version),
        now_ms=now_ms(),
        dead_after_ms=int(dead_after_seconds * 1000),
    )
    if dead:
        recover_executors(logger, dead)
    return dead


def expire_parked_calls(
    store: SessionStore,
    continue_parked: Callable[[str], str | None],
    *,
    settle_seconds: float = 2.0,
    continue_parent: Callable[[str], str | None] | None = None,
) -> list[str]:
    """Time out parked calls past their deadline, and continue every suspended run whose batch is complete.

    ``continue_parked(session_id)`` starts the continuation run and returns its run id (``None``
    when there is nothing to continue); ``continue_parent`` does so for a parent parked on children
    (default: ``continue_parked``). Returns the run ids started.

    The continuation of a batch that this round's expiries completed starts at once. Beyond
    those, the sweep continues any suspended run whose parked batch has no open call left
    (:meth:`~helix_dbos.store.base.PendingCallStore.complete_parked_batches`): a run parks its calls
    in one step and suspends in a later one, and an answer that commits in between finds the run
    still ``running``, so its submission cannot start the continuation, and the run, once
    suspended, never looks at its calls again. The submission waits up to ``settle_seconds`` for
    the suspend (``DBOSAgentExecutor._continue_parked``, the same 2 s) and continues the run itself
    when it comes in time; the sweep takes only batches whose last answer is older than that.
    Whichever side starts it, the store records the continuation under the session's next turn
    with one compare-and-set on the session's version, so a second attempt (the submission, another
    worker's sweep) starts nothing; and a run with a call still open is never returned.
    """
    continued: list[str] = []
    now = now_ms()
    for call in store.pending.expired_parked(now):
        expired = store.pending.expire(call.session_id, [call.tool_call_id], now)
        if expired:
            log_call_event("timeout", call, logging.WARNING, timeout_ms=timeout_ms_of(call))
        if expired and not store.pending.open_calls(call.session_id):
            run_id = continue_parked(call.session_id)
            if run_id is not None:
                continued.append(run_id)
    for session_id in store.pending.complete_parked_batches(now - int(settle_seconds * 1000)):
        run_id = continue_parked(session_id)
        if run_id is not None:
            continued.append(run_id)
    # A parent parked awaiting a companion that has since ended, or sub-agent children that all have
    # (``suspended_awaiting_children``): the same continuation, started by the same compare-and-set,
    # so exactly once whoever starts it (this sweep is the safety net of the child's own wake).
    for session_id in store.pending.parents_with_children_done():
        run_id = (continue_parent or continue_parked)(session_id)
        if run_id is not None:
            continued.append(run_id)
    return continued


class BackgroundTasks:
    """One daemon thread running its tasks every ``interval_seconds`` until :meth:`stop`.

    A task that raises is logged and the round goes on: a failed heartbeat must not stop the sweep.
    ``stop`` before ``start`` is remembered (the thread then runs one round and ends), so a shutdown
    racing a start never leaves a thread behind.
    """

    THREAD_NAME = "helix-deadline-sweeper"

    def __init__(self, logger: Logger) -> None:
        self._logger = logger
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """Whether :meth:`start` has been called (a stopped thread stays started: no restart)."""
        return self._thread is not None

    @property
    def running(self) -> bool:
        """Whether the thread is alive (false before ``start`` and once ``stop`` has joined it)."""
        return self._thread is not None and self._thread.is_alive()

    def run_once(self, tasks: Sequence[tuple[str, Callable[[], object]]]) -> None:
        """One round of ``(log label, task)``, each failure logged and swallowed."""
        for label, task in tasks:
            try:
                task()
            except Exception as exc:
                self._logger.warn(f"[helix-dbos] {label} failed", {"error": repr(exc)})

    def start(self, tasks: Sequence[tuple[str, Callable[[], object]]], *, interval_seconds: float) -> None:
        """Start the thread (idempotent: a second call keeps the first thread and its tasks)."""
        if self._thread is not None:
            return
        rounds = list(tasks)

        def loop() -> None:
            while True:
                self.run_once(rounds)
                if self._stop.wait(interval_seconds):
                    return

        self._thread = threading.Thread(target=loop, name=self.THREAD_NAME, daemon=True)
        self._thread.start()

    def stop(self, timeout_seconds: float = 5.0) -> None:
        """Stop the thread, waiting up to ``timeout_seconds`` for its current round."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_seconds)


__all__ = [
    "BackgroundTasks",
    "executor_id",
    "expire_parked_calls",
    "heartbeat",
    "recover_executors",
    "take_over_dead_workers",
]
