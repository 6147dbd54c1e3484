"""``AgentClient``: the client half of the runtime: start runs, answer and control them, read them.

Like DBOS's ``DBOSClient`` next to ``DBOS``, none of it needs a workflow running in this process:
reads are store queries, submissions and control are store writes plus a DBOS message to the run,
and with a run queue a start is an enqueue that any worker picks up. Without a queue a start runs
the workflow here, which needs the worker half (:mod:`.worker`) installed.

Three jobs, one module each: :mod:`.starting` (the start protocol: execute, resume, retry, fork,
orphans, awaiting results), :mod:`.control` (submissions, interrupt, abort) and :mod:`.reads`
(sessions, runs, state, checkpoints, pending calls, usage); plus the agent schedules
(:mod:`.schedules`), whose fires start runs through ``starting``. The service and the CLI read
through ``reads`` and never touch the store themselves.
"""

from __future__ import annotations

from dbos import DBOS

from helix_dbos.runtime.backend import Backend
from helix_dbos.runtime.control import ContinueParked, RunController
from helix_dbos.runtime.double_text import DoubleTexting
from helix_dbos.runtime.queues import RunQueue
from helix_dbos.runtime.reads import RunReads
from helix_dbos.runtime.schedules import ScheduleBook
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.starting import HandleFactory, RunStarter
from helix_dbos.runtime.wake import TransactionalWaker

__all__ = ["AgentClient"]


class AgentClient:
    """Starts, answers, controls and reads runs over one set of runtime services."""

    def __init__(
        self,
        services: RuntimeServices,
        backend: Backend,
        handle: HandleFactory,
        continue_parked: ContinueParked,
        *,
        queue: RunQueue | None = None,
        waker: TransactionalWaker | None = None,
    ) -> None:
        self.reads = RunReads(services.store)
        """Sessions, runs, state, transcripts, checkpoints, pending calls and usage."""
        self.starting = RunStarter(services, backend, self.reads, handle, queue=queue)
        """execute, resume, retry, fork, orphaned runs, and awaiting a run's result."""
        services.starter = self.starting  # what a schedule's fire workflow starts its run through
        self.schedules = ScheduleBook(DBOS, check_agent=self.starting.agent)
        """Agent schedules: create, list, pause, resume, delete, backfill (:mod:`.schedules`)."""
        self.control = RunController(services, backend, self.reads, handle, continue_parked, waker=waker)
        """Answers to pending tool calls, interrupt and abort."""
        self.double_text = DoubleTexting(services, self.starting, self.control, handle)
        """Messages posted while a run is in flight, under a policy other than ``reject``."""
        self.starting.double_text = services.double_text = self.double_text
