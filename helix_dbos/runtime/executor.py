"""``DBOSAgentExecutor``: start, continue and inspect durable agent runs.

The executor is the public facade over the runtime's two halves, each method a delegation:

- the **client** (:mod:`.client`): the start protocol (:mod:`.starting`: execute, resume, retry, fork,
  orphaned runs, awaiting results), submissions and run control (:mod:`.control`), reads (:mod:`.reads`,
  also the read API of the service and the CLI) and agent schedules (:mod:`.schedules`). None of it
  needs a workflow running here when runs go on a queue;
- the **worker** (:mod:`.worker`): the agent registrations, the runtime services a workflow finds, the
  background duties (heartbeat, parked-call deadlines, takeover: :mod:`.workers`) and recovery.

Handles (:mod:`.handle`) call back only through the public methods here; awaiting an outcome is :mod:`.outcomes`.
Blocking methods called from async code have an ``*_async`` twin, DBOS-style (execute, resume, retry, fork, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic_core import to_jsonable_python

from helix_dbos._clock import now_ms
from helix_dbos.agent import AgentConfig, AgentHooks
from helix_dbos.double_text import DoubleTextPolicy
from helix_dbos.errors import AgentAlreadyRunningError, RunNotFinishedError, StaleStateError
from helix_dbos.llm.base import LLMAdapter
from helix_dbos.logger import Logger, std_logger
from helix_dbos.orchestration.fork_edits import ForkEdits, MessageMode
from helix_dbos.runtime import workers
from helix_dbos.runtime.backend import Backend
from helix_dbos.runtime.builtin_capabilities import builtin_capabilities
from helix_dbos.runtime.child_deadlines import ChildDeadlines
from helix_dbos.runtime.child_park import ParentWaker
from helix_dbos.runtime.client import AgentClient
from helix_dbos.runtime.handle import AgentExecutionHandle
from helix_dbos.runtime.hitl import DEFAULT_HOT_WINDOW_SECONDS
from helix_dbos.runtime.hooks import per_call_hooks
from helix_dbos.runtime.outcomes import await_outcome
from helix_dbos.runtime.queues import RunQueue, priority_of
from helix_dbos.runtime.rate_limits import ProviderRateLimit, RateLimitCapability
from helix_dbos.runtime.registry import AgentRegistry
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.streaming import RunStreams
from helix_dbos.runtime.wake import TransactionalWaker
from helix_dbos.runtime.worker import AgentWorker
from helix_dbos.runtime.workflow import agent_run_workflow
from helix_dbos.session import (
    AgentInput,
    AgentResult,
    AgentState,
    CanResumeResult,
    SendInput,
    SubmitToolResult,
)
from helix_dbos.store.base import (
    ForkResult,
    PaginatedCheckpoints,
    PendingToolCall,
    RunRecord,
    SessionRecord,
    SessionStore,
    SubmitOutcome,
    UsageRow,
)
from helix_dbos.stream.base import StreamManager
from helix_dbos.stream.chunks import StreamChunk
from helix_dbos.stream.memory import InMemoryStreamManager
from helix_dbos.tenancy import TenantBudget, check_tenant
from helix_dbos.usage import UsageSummary


class DBOSAgentExecutor:
    """Runs agents as DBOS workflows over a :class:`SessionStore`.

    Create it, register agents, then ``DBOS.launch()`` (or use :func:`helix_dbos.launch`, which does
    all three from one database URL). Creating an executor installs it as this process's runtime.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        llm_adapter: LLMAdapter | None = None,
        stream_manager: StreamManager | None = None,
        agents: Sequence[AgentConfig] = (),
        logger: Logger | None = None,
        max_tool_concurrency: int = 16,
        hot_window_seconds: float = DEFAULT_HOT_WINDOW_SECONDS,
        queue: RunQueue | None = None,
        wake_in_submission: bool = False,
        hooks: AgentHooks | dict[str, Any] | None = None,
        rate_limits: Sequence[ProviderRateLimit] = (),
        tenant_budgets: Mapping[str, TenantBudget] | None = None,
    ) -> None:
        """Build the runtime over ``store`` and install it as this process's.

        ``wake_in_submission``: send a hot run's wake-up inside the submission's own transaction
        (:mod:`helix_dbos.runtime.wake`), for a PostgreSQL store in DBOS's system database;
        :func:`helix_dbos.launch` turns it on when it puts them there.

        ``hooks``: executor-wide hooks (the seeds' constructor hooks), an :class:`AgentHooks` or a
        dict of its fields. They fire first (executor, then the agent's, then per-call hooks) for
        every run this process runs, in the same steps as the others. They are process-local: a run
        recovered or continued in another process fires that process's executor hooks.

        ``rate_limits``: provider limits shared by every process on the database
        (:mod:`helix_dbos.runtime.rate_limits`); their queues must be registered after
        ``DBOS.launch()`` (:func:`~helix_dbos.runtime.rate_limits.register_rate_limits`, which
        :func:`helix_dbos.launch` calls). ``tenant_budgets``: :mod:`helix_dbos.runtime.tenant_budgets`.
        """
        manager = stream_manager or InMemoryStreamManager()
        backend = Backend.resolve(manager, store)
        waker = TransactionalWaker.for_backend(backend) if wake_in_submission else None
        if llm_adapter is None:
            from helix_dbos.llm.litellm import LiteLLMAdapter

            llm_adapter = LiteLLMAdapter()
        self.store = store
        self.logger = logger or std_logger("helix_dbos.runtime")
        self.registry = AgentRegistry()
        self.backend = backend
        """What the store and stream manager offer beyond their base protocols (:mod:`.backend`)."""
        self.streams = RunStreams(manager, self.logger, backend)
        self._services = RuntimeServices(
            hot_window_seconds=hot_window_seconds,
            store=store,
            llm=llm_adapter,
            registry=self.registry,
            streams=self.streams,
            logger=self.logger,
            tool_pool=ThreadPoolExecutor(max_workers=max_tool_concurrency, thread_name_prefix="helix-tool"),
            run_workflow=agent_run_workflow,
            capabilities=(*builtin_capabilities(), RateLimitCapability(rate_limits)),
            executor_hooks=AgentHooks.model_validate(hooks) if isinstance(hooks, dict) else hooks,
        )
        handle = functools.partial(AgentExecutionHandle, self)
        self.client = AgentClient(self._services, backend, handle, self._continue_parked, queue=queue, waker=waker)
        self._services.parent_waker = ParentWaker(store, self._continue_parent)
        self._services.child_deadlines = ChildDeadlines(self._services)
        """Starts, answers, controls and reads runs (:mod:`.client`)."""
        self.client.starting.tenant_budgets = {check_tenant(t): b for t, b in (tenant_budgets or {}).items()}
        self.reads = self.client.reads
        """The read API the service and the CLI use (:mod:`.reads`)."""
        self.schedules = self.client.schedules
        """Agent schedules: cron fires that start runs (:mod:`.schedules`)."""
        self.worker = AgentWorker(self._services, self.client.starting)
        """Runs this process's share of workflows (:mod:`.worker`)."""
        for agent in agents:
            self.register(agent)
        self.worker.install()

    @property
    def queue(self) -> RunQueue | None:
        """Where runs are enqueued instead of started here (:mod:`.queues`); ``None``: start locally."""
        return self.client.starting.queue

    @queue.setter
    def queue(self, queue: RunQueue | None) -> None:
        self.client.starting.queue = queue

    # -- agents ----------------------------------------------------------------------------------------
    def register(self, agent: AgentConfig) -> AgentConfig:
        """Make ``agent`` resolvable by name by this process's workflows (including recovered ones)."""
        return self.worker.register(agent)

    # -- starts ----------------------------------------------------------------------------------------
    def execute(
        self,
        agent: AgentConfig | str,
        input: str | AgentInput | dict[str, Any],
        *,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        hooks: AgentHooks | None = None,
        hook_manager: AgentHooks | dict[str, Any] | None = None,
        priority: int | None = None,
        tenant: str | None = None,
        double_text: DoubleTextPolicy | None = None,
    ) -> AgentExecutionHandle:
        """Start a run: a new session, or the next turn of a ``completed`` one.

        A second identical request while the first is running returns the same run; a different one
        follows ``double_text`` (default: the agent's): ``reject`` raises :class:`AgentAlreadyRunningError`,
        the others defer it durably, ``handle.double_text`` says how (:mod:`helix_dbos.double_text`). With an
        ``idempotency_key``, a repeat of the request returns its run even after it finished; without
        a ``session_id`` the key also names the session (:func:`session_id_for_key`). ``priority``
        orders a queued backlog (lower first; see :mod:`.queues`); without a queue it is unused.
        ``hooks`` are per-call hooks, fired after the executor's and the agent's; ``hook_manager`` is
        the same option under the seeds' name (``ExecuteOptions.hookManager``), also as a dict of
        :class:`AgentHooks` fields. Both at once raise :class:`ConflictingOptionsError`.
        An agent named but not registered raises :class:`AgentNotFoundError`; a session of another
        agent :class:`AgentMismatchError`. The start protocol (one store transaction, then the
        workflow under an id derived from the session and turn) is :mod:`.starting`'s.

        ``tenant``: the new session's (:mod:`helix_dbos.tenancy`); another tenant's session is a
        :class:`SessionNotFoundError`; ``None`` is the default tenant and checks nothing (trusted code).
        """
        return self.client.starting.execute(
            agent,
            input,
            session_id=session_id,
            idempotency_key=idempotency_key,
            hooks=per_call_hooks(hooks, hook_manager),
            priority=priority,
            tenant=tenant,
            double_text=double_text,
        )

    async def execute_async(
        self,
        agent: AgentConfig | str,
        input: str | AgentInput | dict[str, Any],
        *,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        hooks: AgentHooks | None = None,
        hook_manager: AgentHooks | dict[str, Any] | None = None,
        priority: int | None = None,
        tenant: str | None = None,
        double_text: DoubleTextPolicy | None = None,
    ) -> AgentExecutionHandle:
        """Async twin of :meth:`execute`."""
        return await asyncio.to_thread(
            self.execute,
            agent,
            input,
            session_id=session_id,
            idempotency_key=idempotency_key,
            hooks=hooks,
            hook_manager=hook_manager,
            priority=priority,
            tenant=tenant,
            double_text=double_text,
        )

    def resume(
        self,
        agent: AgentConfig | str | None,
        session_id: str,
        message: SendInput | None = None,
        *,
        hooks: AgentHooks | None = None,
        hook_manager: AgentHooks | dict[str, Any] | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Continue an interrupted or suspended session in a new run (``previous_run_id`` links them).

        ``agent=None`` continues under the session's own agent. ``hooks`` are per-call hooks for the
        new run, fired after the agent's own (as on ``execute``); ``hook_manager`` and ``priority`` as
        on ``execute``.
        Raises :class:`SessionNotFoundError`, :class:`AgentNotFoundError`,
        :class:`AgentMismatchError`, :class:`AgentAlreadyRunningError` or
        :class:`AgentNotResumableError` when the session cannot continue.
        """
        return self.client.starting.resume(
            agent, session_id, message, hooks=per_call_hooks(hooks, hook_manager), priority=priority
        )

    async def resume_async(
        self,
        agent: AgentConfig | str | None,
        session_id: str,
        message: SendInput | None = None,
        *,
        hooks: AgentHooks | None = None,
        hook_manager: AgentHooks | dict[str, Any] | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Async twin of :meth:`resume`."""
        return await asyncio.to_thread(
            functools.partial(
                self.resume, agent, session_id, message, hooks=hooks, hook_manager=hook_manager, priority=priority
            )
        )

    def retry(
        self,
        session_id: str,
        *,
        checkpoint_id: str | None = None,
        message: SendInput | None = None,
        hooks: AgentHooks | None = None,
        hook_manager: AgentHooks | dict[str, Any] | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Start again from a checkpoint (the latest by default), discarding what followed it.

        An explicit ``checkpoint_id`` that does not belong to the session raises
        :class:`CheckpointNotFoundError`, never a silent restart; an unknown session
        :class:`SessionNotFoundError`. A fresh run starting from the checkpoint's state is used
        rather than DBOS's workflow fork: the checkpoint already is the boundary, and run records
        stay contiguous. ``hooks`` are per-call hooks for the new run; ``hook_manager`` and
        ``priority`` as on ``execute``.
        """
        return self.client.starting.retry(
            session_id,
            checkpoint_id=checkpoint_id,
            message=message,
            hooks=per_call_hooks(hooks, hook_manager),
            priority=priority,
        )

    async def retry_async(
        self,
        session_id: str,
        *,
        checkpoint_id: str | None = None,
        message: SendInput | None = None,
        hooks: AgentHooks | None = None,
        hook_manager: AgentHooks | dict[str, Any] | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Async twin of :meth:`retry`."""
        return await asyncio.to_thread(
            self.retry,
            session_id,
            checkpoint_id=checkpoint_id,
            message=message,
            hooks=hooks,
            hook_manager=hook_manager,
            priority=priority,
        )

    def fork(
        self,
        session_id: str,
        checkpoint_id: str | None = None,
        *,
        new_session_id: str | None = None,
        message: str | None = None,
        message_mode: MessageMode = "replace",
        state: dict[str, Any] | None = None,
        state_patch: dict[str, Any] | None = None,
    ) -> ForkResult:
        """Branch a new session from a checkpoint of ``session_id`` (the latest by default), optionally edited.

        The fork has its own transcript (up to the checkpoint), custom state and stream, and is idle:
        ``execute(agent, message, session_id=fork.session_id)`` continues it, ``retry(fork.session_id)``
        replays the step after the checkpoint. With ``new_session_id`` a repeat returns the same fork.
        Time travel: ``message`` replaces the checkpoint's last user message (``message_mode="replace"``,
        dropping what followed it) or is added after it (``"append"``), so ``retry`` runs the model
        on the edited input; ``state`` replaces the custom state, ``state_patch`` merges into it
        (RFC 7396). Any session forks, a sub-agent's or companion's too: the fork is standalone.
        Rules (unknown ids, a run in flight, a taken id, edits): :mod:`helix_dbos.runtime.forks`.
        """
        edits = ForkEdits(message=message, message_mode=message_mode, state=state, state_patch=state_patch)
        return self.client.starting.fork(session_id, checkpoint_id, new_session_id=new_session_id, edits=edits)

    async def fork_async(
        self,
        session_id: str,
        checkpoint_id: str | None = None,
        *,
        new_session_id: str | None = None,
        message: str | None = None,
        message_mode: MessageMode = "replace",
        state: dict[str, Any] | None = None,
        state_patch: dict[str, Any] | None = None,
    ) -> ForkResult:
        """Async twin of :meth:`fork`."""
        return await asyncio.to_thread(
            functools.partial(
                self.fork,
                session_id,
                checkpoint_id,
                new_session_id=new_session_id,
                message=message,
                message_mode=message_mode,
                state=state,
                state_patch=state_patch,
            )
        )

    def recover_orphaned_runs(self, *, page_size: int = 500) -> list[str]:
        """Start every orphaned run (recorded, its workflow never started); returns their run ids.

        The cost is the number of runs in flight, flat in the number of parked or finished sessions
        (:func:`~helix_dbos.runtime.recovery.runs_without_workflow`).
        """
        return self.worker.recover_orphaned_runs(page_size=page_size)

    def _start_next_run(self, session: SessionRecord, **options: Any) -> AgentExecutionHandle:
        return self.client.starting.start_next_run(session, **options)

    # -- human in the loop ----------------------------------------------------------------------------
    def submit_tool_result(
        self, session_id: str, submission: SubmitToolResult | dict[str, Any]
    ) -> AgentExecutionHandle | None:
        """Answer a pending client-executed or approval-gated tool call, exactly once.

        The answer is recorded durably first. If the run is still waiting (hot), it is woken with a
        DBOS message, written in the answer's own transaction with ``wake_in_submission`` (else sent
        with ``DBOS.send`` after it); if it parked and this answer completes its batch, the continuation run starts
        (deterministic id, so a retried submission can never start two). Returns a handle on the
        run that will use the answer, or ``None`` while other calls of the batch are still open.
        A second submission for the same call, an unknown session or call, or an answer of the wrong
        kind raise a clear :class:`HelixError` and change nothing.
        """
        return self.client.control.submit_tool_result(session_id, submission)

    async def submit_tool_result_async(
        self, session_id: str, submission: SubmitToolResult | dict[str, Any]
    ) -> AgentExecutionHandle | None:
        """Async twin of :meth:`submit_tool_result`."""
        return await asyncio.to_thread(self.submit_tool_result, session_id, submission)

    def _continue_parked(
        self, session_id: str, seen: SubmitOutcome | None = None, *, suspend_wait_seconds: float = 2.0
    ) -> AgentExecutionHandle | None:
        """Start the continuation of a parked run under the session's agent.

        It keeps the per-call hooks the parked run was started with when this process started it
        (the seeds' process-local registry); in any other process it has the agent's hooks only.
        ``seen``: the submission that completed the batch, whose transaction read the session and
        the call's run; when that run is the session's current one and suspended, they are not
        read again (otherwise they are: the run may have suspended since).

        A run parks its calls in one step and ends as ``suspended`` in a later one (its finalize),
        so a submission can complete the batch in between: the call's run is then the session's
        current run and still ``running``, and it will not look at its calls again. The submission
        waits up to ``suspend_wait_seconds`` for that run's outcome (published after the suspend
        commits) and continues it then; a suspend that comes later (a slow or dead worker) is the
        workers' sweep's to continue, which takes only batches answered longer ago than that
        (:func:`.workers.expire_parked_calls`, the same 2 s). The start is one compare-and-set on
        the session's version under the next turn's deterministic run id, so of the submission and
        any sweeps exactly one starts it. Without ``seen`` (a sweep), a session whose agent this
        process does not run is left to a worker that does.
        """
        session = seen.session if seen is not None else None
        run = seen.run if seen is not None else None
        if session is None or run is None or session.run_id != run.run_id or run.status != "suspended":
            session, run = self.store.load_session(session_id), self.store.get_current_run(session_id)
        if seen is not None and run is not None and run.status == "running" and run.run_id == seen.call.run_id:
            with contextlib.suppress(RunNotFinishedError):  # not suspended yet: the sweep continues it
                await_outcome(self.store, run.workflow_id, suspend_wait_seconds)
            session, run = self.store.load_session(session_id), self.store.get_current_run(session_id)
        if session is None or run is None or run.status != "suspended":
            return None
        if seen is None and self.registry.get(session.agent_type) is None:
            return None
        hooks = self._services.call_hooks_of(run.workflow_id)
        priority = priority_of(run.workflow_id) if self.queue is not None else None
        for attempt in range(2):
            try:
                return self._start_next_run(session, mode="resume", message=None, hooks=hooks, priority=priority)
            except AgentAlreadyRunningError:
                break  # someone else started it: same deterministic run
            except StaleStateError:
                # The session and its run are two reads: the run's suspend can commit between them,
                # so the session read may predate it (its version one behind) while the run reads
                # suspended. Read both again once; a start that really lost to another finds it running.
                session = self.store.load_session(session_id)
                if attempt or session is None or session.run_id != run.run_id:
                    break
        return self.get_handle(session_id)

    def _continue_parent(self, session_id: str) -> AgentExecutionHandle | None:
        """Continue a parent parked on children; an interrupt asked while it was parked carries over.

        Starting a run clears the session's interrupt flag, and a parked parent has no run to read
        it: the flag would be lost, where a parent waiting hot ends ``interrupted`` once its
        (interrupted) children have. So it is asked again of the continuation, which honours it at
        its first commit, after recording the children's results.
        """
        session = self.store.load_session(session_id)
        handle = self._continue_parked(session_id)
        if handle is not None and session is not None and session.interrupt_requested:
            reason = session.interrupt_context.reason if session.interrupt_context else None
            self.store.request_interrupt(session_id, reason, now_ms=now_ms())
        return handle

    def expire_parked_calls(self) -> list[str]:
        """Time out parked calls and children past their deadline; continue runs whose batch is now complete.

        Workers call this periodically (``start_background_tasks``); running it in several
        processes at once is safe, as every transition is a compare-and-set.
        """

        def continue_parked(session_id: str) -> str | None:
            handle = self._continue_parked(session_id)
            return None if handle is None else handle.run_id

        def continue_parent(session_id: str) -> str | None:
            handle = self._continue_parent(session_id)
            return None if handle is None else handle.run_id

        if self._services.child_deadlines is not None:  # first: a child stopped here frees its parked parent
            self._services.child_deadlines.sweep()
        return workers.expire_parked_calls(self.store, continue_parked, continue_parent=continue_parent)

    def start_background_tasks(
        self, *, interval_seconds: float = 1.0, takeover_after_seconds: float | None = 30.0
    ) -> None:
        """Start the background thread (idempotent; ``close`` stops it).

        Every ``interval_seconds`` it writes this worker's heartbeat, times out parked tool calls past
        their deadline, and takes over the runs of workers whose heartbeat is older than
        ``takeover_after_seconds`` (``None`` disables takeover).
        """
        self.worker.start_background_tasks(
            self.expire_parked_calls, interval_seconds=interval_seconds, takeover_after_seconds=takeover_after_seconds
        )

    # -- workers -----------------------------------------------------------------------------------------
    @property
    def executor_id(self) -> str:
        """The DBOS executor id of this process."""
        return self.worker.executor_id

    def heartbeat(self) -> None:
        """Record that this worker is alive (an error is logged while another live process holds its id)."""
        self.worker.heartbeat()

    def take_over_dead_workers(self, *, dead_after_seconds: float) -> list[str]:
        """Recover the in-flight runs of workers whose heartbeat stopped (see :mod:`.workers`)."""
        return self.worker.take_over_dead_workers(dead_after_seconds=dead_after_seconds)

    def recover_executors(self, executor_ids: list[str]) -> int:
        """Re-enqueue the pending workflows of these executors for any live worker; returns how many."""
        return self.worker.recover_executors(executor_ids)

    # -- run control -------------------------------------------------------------------------------------
    def interrupt(self, session_id: str, reason: str | None = None) -> bool:
        """Ask the session's run to stop cleanly as ``interrupted`` at its next step (resumable).

        The flag is durable, so it reaches the run from any process. Returns False when no run is
        in flight; raises :class:`SessionNotFoundError` for an unknown session.
        """
        return self.client.control.interrupt(session_id, reason)

    def abort(self, session_id: str, reason: str | None = None) -> None:
        """Stop the session's run now: status ``failed`` (aborted), not resumable.

        The store is updated first (so even a parked run is aborted), open tool calls are cancelled,
        a waiting run is woken (DBOS cancellation alone does not interrupt a blocking ``recv``), and
        the workflow is cancelled at its next step boundary.
        """
        self.client.control.abort(session_id, reason)

    def can_resume(self, session_id: str) -> CanResumeResult:
        """Whether :meth:`resume` would accept the session, with the reason when not."""
        return self.reads.can_resume(session_id)

    # -- inspection ------------------------------------------------------------------------------------
    def get_handle(self, session_id: str) -> AgentExecutionHandle | None:
        """A handle on the session's current (latest) run."""
        return self.client.control.get_handle(session_id)

    def get_state(self, session_id: str) -> AgentState | None:
        """The session's state with its full transcript.

        While tool calls wait for a client or an approval, ``status`` is ``suspended_client_tool``
        (the session itself stays ``active`` in the store, as the seeds say).
        """
        return self.reads.get_state(session_id)

    async def get_state_async(self, session_id: str) -> AgentState | None:
        """Async twin of :meth:`get_state`."""
        return await asyncio.to_thread(self.get_state, session_id)

    def get_session(self, session_id: str) -> SessionRecord | None:
        """The session's store record (status, turn, abort and interrupt details), without messages."""
        return self.reads.get_session(session_id)

    def list_checkpoints(self, session_id: str, *, offset: int = 0, limit: int = 50) -> PaginatedCheckpoints:
        """The session's checkpoints, newest first: the points :meth:`fork` can branch from."""
        return self.reads.list_checkpoints(session_id, offset=offset, limit=limit)

    def list_pending_tool_calls(self, session_id: str) -> list[PendingToolCall]:
        """The session's tool calls still waiting for a client result or an approval, oldest first."""
        return self.reads.list_pending_tool_calls(session_id)

    async def read_stream(self, session_id: str, from_sequence: int = 0) -> AsyncIterator[StreamChunk] | None:
        """The session's stream chunks from ``from_sequence`` (live while a run writes to it)."""
        return await self.streams.read(session_id, from_sequence=from_sequence)

    def wait_for_result(self, run: RunRecord, agent_name: str, timeout_seconds: float | None = None) -> AgentResult:
        """Block until ``run`` ends and return its result (output typed by ``agent_name``'s schema).

        A run started by this process is awaited on its in-process future; any other run is
        awaited on its outcome event, which PostgreSQL's LISTEN/NOTIFY delivers in milliseconds.
        Raises :class:`RunNotFinishedError` when ``timeout_seconds`` pass first.
        """
        return self.client.starting.wait_for_result(run, agent_name, timeout_seconds)

    def get_usage_summary(
        self, session_id: str, run_id: str | None = None, *, include_children: bool = True
    ) -> UsageSummary:
        """What a session (with its sub-agents' sessions) or one of its runs used and cost.

        From the usage recorded with each step commit; ``include_children=False`` leaves the
        sub-agents' sessions out. A run's usage includes the sub-agents and companions that run
        started (what the run cost, delegations included), as ``AgentResult.usage`` reports it.
        Unknown session or run: an empty summary.
        """
        return self.reads.get_usage_summary(session_id, run_id, include_children=include_children)

    async def get_usage_summary_async(
        self, session_id: str, run_id: str | None = None, *, include_children: bool = True
    ) -> UsageSummary:
        """Async twin of :meth:`get_usage_summary`."""
        return await asyncio.to_thread(
            functools.partial(self.get_usage_summary, session_id, run_id, include_children=include_children)
        )

    def get_usage(
        self, session_id: str, *, run_id: str | None = None, include_children: bool = False
    ) -> list[UsageRow]:
        """The session's usage records (or one run's), with its children's when ``include_children``.

        Children are sub-agents and companions, recursively; with ``run_id``, those that run
        started: so a parent run's cost includes what it delegated.
        """
        return self.reads.get_usage(session_id, run_id=run_id, include_children=include_children)

    def get_current_run(self, session_id: str) -> RunRecord | None:
        """The session's most recent run record."""
        return self.reads.get_current_run(session_id)

    def list_runs(self, session_id: str) -> list[RunRecord]:
        """Every run of the session, by turn."""
        return self.reads.list_runs(session_id)

    def stop_background_tasks(self, timeout_seconds: float = 5.0) -> None:
        """Stop the background thread, waiting up to ``timeout_seconds`` for its current round."""
        self.worker.stop_background_tasks(timeout_seconds)

    def close(self) -> None:
        """Stop background tasks and the tool pool, and uninstall this executor.

        DBOS itself is the caller's to destroy, *before* this when workflows may still be running
        here (``shutdown()`` does so): a workflow that finds the runtime uninstalled while DBOS can
        still record would record that as its failure.
        """
        for part in (self._services.parent_waker, self._services.child_deadlines):
            if part is not None:
                part.close()
        self.worker.close()


def jsonable(value: Any) -> Any:
    """JSON-able form of outputs (used by the CLI and the service)."""
    return to_jsonable_python(value)
