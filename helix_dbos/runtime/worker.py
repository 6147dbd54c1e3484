"""``AgentWorker``: the worker half of the runtime: what lets this process run agent workflows.

It owns the agent registry's registrations, the installation of the runtime services the workflow
finds (:mod:`.services`), the background thread (heartbeat, parked-call deadlines, takeover of dead
workers: :mod:`.workers` holds those duties) and the recovery of orphaned runs at start-up. The
client half (:mod:`.client`) starts, controls and reads runs; this one executes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from helix_dbos.agent import AgentConfig
from helix_dbos.errors import HelixError
from helix_dbos.runtime import services, workers
from helix_dbos.runtime.exiting import mark_stopping
from helix_dbos.runtime.recovery import runs_without_workflow
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.workers import BackgroundTasks

if TYPE_CHECKING:
    from helix_dbos.runtime.starting import RunStarter

__all__ = ["AgentWorker"]


class AgentWorker:
    """Registers agents, installs the runtime, runs the background duties and recovers orphans."""

    def __init__(self, runtime: RuntimeServices, starter: RunStarter) -> None:
        self._services = runtime
        self._starter = starter
        self._background = BackgroundTasks(runtime.logger)

    def install(self) -> None:
        """Install the runtime services as this process's (the tool pool is shut down if that fails)."""
        mark_stopping(False)  # a shutdown() earlier in this process is over: failures are failures again
        try:
            services.install(self._services)
        except HelixError:
            self._services.tool_pool.shutdown(wait=False)
            raise

    def register(self, agent: AgentConfig) -> AgentConfig:
        """Make ``agent`` resolvable by name by this process's workflows (including recovered ones)."""
        return self._services.registry.register(agent)

    def recover_orphaned_runs(self, *, page_size: int = 500) -> list[str]:
        """Start every run recorded without its workflow; returns their run ids.

        The cost is the number of runs in flight, flat in the number of parked or finished sessions
        (:func:`~helix_dbos.runtime.recovery.runs_without_workflow`).
        """
        found = runs_without_workflow(self._services.store, page_size=page_size)
        return [run.run_id for run in found if self._starter.start_if_orphaned(run.session_id)]

    def start_background_tasks(
        self,
        expire_parked_calls: Callable[[], object],
        *,
        interval_seconds: float = 1.0,
        takeover_after_seconds: float | None = 30.0,
    ) -> None:
        """Start the background thread: heartbeat, ``expire_parked_calls``, takeover (idempotent)."""
        tasks: list[tuple[str, Callable[[], object]]] = [
            ("background task heartbeat", self.heartbeat),
            ("background task expire_parked_calls", expire_parked_calls),
        ]
        if takeover_after_seconds is not None:
            after = takeover_after_seconds
            tasks.append(("takeover check", lambda: self.take_over_dead_workers(dead_after_seconds=after)))
        self._background.start(tasks, interval_seconds=interval_seconds)

    def stop_background_tasks(self, timeout_seconds: float = 5.0) -> None:
        """Stop the background thread, waiting up to ``timeout_seconds`` for its current round."""
        self._background.stop(timeout_seconds)

    @property
    def executor_id(self) -> str:
        """The DBOS executor id of this process."""
        return workers.executor_id()

    def heartbeat(self) -> None:
        """Record that this worker is alive (an error is logged while another live process holds its id)."""
        workers.heartbeat(self._services.store, self._services.logger)

    def take_over_dead_workers(self, *, dead_after_seconds: float) -> list[str]:
        """Recover the in-flight runs of workers whose heartbeat stopped (see :mod:`.workers`)."""
        return workers.take_over_dead_workers(
            self._services.store, self._services.logger, dead_after_seconds=dead_after_seconds
        )

    def recover_executors(self, executor_ids: list[str]) -> int:
        """Re-enqueue the pending workflows of these executors for any live worker; returns how many."""
        return workers.recover_executors(self._services.logger, executor_ids)

    def close(self) -> None:
        """Stop the background thread and the tool pool, and uninstall the runtime services."""
        self.stop_background_tasks()
        self._services.tool_pool.shutdown(wait=False, cancel_futures=True)
        services.uninstall(self._services)
