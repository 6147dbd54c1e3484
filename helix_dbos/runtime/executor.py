"""``DBOSAgentExecutor``: start, continue and inspect durable agent runs.

``execute`` is one store transaction (create or reopen the session, append the input, record the
run) followed by ``DBOS.start_workflow`` under a workflow id derived from the session and turn
(``{session_id}-turn-{turn}``). Two calls with the same request therefore meet at the same turn:
the store lets exactly one of them open it, and DBOS deduplicates the workflow id. A crash between
the transaction and the workflow start leaves an *orphaned* run, which the next ``execute`` on the
session and :meth:`DBOSAgentExecutor.recover_orphaned_runs` (run by workers at start-up) start.

Every blocking method has an ``*_async`` twin, DBOS-style.

This module is the facade (execute / resume / retry / submit / interrupt / abort / status). What a
start writes is built in :mod:`.starts`, the ids it derives in :mod:`.ids`; handles
(:mod:`.handle`) call back only through the public methods here; a worker's background duties are
:mod:`.workers`; awaiting an outcome is :mod:`.outcomes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from dbos import DBOS, SetWorkflowID, WorkflowHandle
from pydantic_core import to_jsonable_python

from helix_dbos.agent import AgentConfig, AgentHooks
from helix_dbos.errors import (
    AgentAlreadyRunningError,
    AgentMismatchError,
    AgentNotResumableError,
    HelixError,
    RunNotFinishedError,
    SessionNotFoundError,
    StaleStateError,
    WakeUpRefusedError,
)
from helix_dbos.llm.base import LLMAdapter, check_input_files
from helix_dbos.llm.files import check_files, message_files
from helix_dbos.logger import Logger, std_logger
from helix_dbos.messages import Message, UserMessage
from helix_dbos.orchestration.state_operations import (
    input_messages,
    normalize_agent_input,
)
from helix_dbos.runtime import children, forks, services, starts, workers
from helix_dbos.runtime._dbos_compat import AwaitedWorkflowCancelledError
from helix_dbos.runtime.backend import Backend
from helix_dbos.runtime.builtin_capabilities import builtin_capabilities
from helix_dbos.runtime.exiting import mark_stopping
from helix_dbos.runtime.handle import AgentExecutionHandle
from helix_dbos.runtime.hitl import DEFAULT_HOT_WINDOW_SECONDS, check_submission_fits, parse_submission, wake_run
from helix_dbos.runtime.ids import (
    keyed_request_key,
    new_session_id,
    request_key_for,
    session_id_for_key,
)
from helix_dbos.runtime.outcomes import await_outcome, to_result
from helix_dbos.runtime.queues import RunQueue, check_priority, enqueue_run, priority_of
from helix_dbos.runtime.recovery import runs_without_workflow
from helix_dbos.runtime.registry import AgentRegistry
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.streaming import RunStreams
from helix_dbos.runtime.wake import TransactionalWaker
from helix_dbos.runtime.workers import BackgroundTasks
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
    StartRun,
    StartRunResult,
    SubmitOutcome,
    UsageRow,
)
from helix_dbos.store.conversation import can_resume_session
from helix_dbos.store.engine import now_ms
from helix_dbos.store.usage_tree import usage_with_children
from helix_dbos.stream.base import StreamManager
from helix_dbos.stream.chunks import StreamChunk
from helix_dbos.stream.memory import InMemoryStreamManager
from helix_dbos.usage import UsageSummary, summarize_usage
from helix_dbos.validation import check_text

_MAX_LOCAL_HANDLES = 4096


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
    ) -> None:
        """Build the runtime over ``store`` and install it as this process's.

        ``wake_in_submission``: send a hot run's wake-up inside the submission's own transaction
        (:mod:`helix_dbos.runtime.wake`), for a PostgreSQL store in DBOS's system database;
        :func:`helix_dbos.launch` turns it on when it puts them there.
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
            capabilities=builtin_capabilities(),
        )
        self._local_handles: OrderedDict[str, WorkflowHandle[Any]] = OrderedDict()
        """In-process futures of runs this process started (the fast way to wait); bounded, because a
        long-running server starts runs nobody waits on here. A dropped entry falls back to the
        outcome event."""
        self._background = BackgroundTasks(self.logger)
        self._waker = waker
        self.queue = queue
        """Where runs are enqueued instead of started here (:mod:`.queues`); ``None``: start locally."""
        for agent in agents:
            self.register(agent)
        mark_stopping(False)  # a shutdown() earlier in this process is over: failures are failures again
        try:
            services.install(self._services)
        except HelixError:
            self._services.tool_pool.shutdown(wait=False)
            raise

    # -- agents ----------------------------------------------------------------------------------------
    def register(self, agent: AgentConfig) -> AgentConfig:
        """Make ``agent`` resolvable by name by this process's workflows (including recovered ones)."""
        return self.registry.register(agent)

    # -- execute ---------------------------------------------------------------------------------------
    def execute(
        self,
        agent: AgentConfig | str,
        input: str | AgentInput | dict[str, Any],
        *,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Start a run: a new session, or the next turn of a ``completed`` one.

        A second identical request while the first is running returns the same run; a different
        request while a run is in flight raises :class:`AgentAlreadyRunningError`. With an
        ``idempotency_key``, a repeat of the request returns its run even after it finished; without
        a ``session_id`` the key also names the session (:func:`session_id_for_key`). ``priority``
        orders a queued backlog (lower first; see :mod:`.queues`); without a queue it is unused.
        """
        check_text(input=input, session_id=session_id, idempotency_key=idempotency_key)
        check_priority(priority)
        config = self.register(agent) if isinstance(agent, AgentConfig) else self.registry.require(agent)
        parsed = normalize_agent_input(input)
        self._check_files(config, [*(parsed.messages or []), *input_messages(parsed.message)])
        if session_id is None:
            session_id = session_id_for_key(idempotency_key) if idempotency_key else new_session_id()
        existing = self.store.load_session(session_id)
        if existing is not None and existing.agent_type != config.name:
            # Before anything is read or written for the request: a session is one agent's.
            raise AgentMismatchError(session_id, existing.agent_type, config.name)
        if idempotency_key:
            for run in self.store.list_runs(session_id):
                if run.request_key == keyed_request_key(idempotency_key):
                    return AgentExecutionHandle(self, run, config.name, hooks)
        # A request racing a run in flight is "for" that run's turn; otherwise it opens the next one.
        next_turn = 1 if existing is None else existing.turn + (0 if existing.status == "active" else 1)
        key = keyed_request_key(idempotency_key) if idempotency_key else request_key_for(config.name, parsed, next_turn)
        if existing is None:
            start = self._first_turn(config, session_id, parsed, key)
            stream_id = session_id
        else:
            start = self._next_turn(config, existing, parsed, key)
            stream_id = existing.stream_id
        try:
            started, opened = self._record_start(start, stream_id)
        except AgentAlreadyRunningError:
            self._start_if_orphaned(session_id)
            raise
        if started.existing:
            self._start_if_orphaned(session_id)
            return AgentExecutionHandle(self, started.run, config.name, hooks)
        self._start_workflow(config, started.run, started.session, hooks, priority=priority, stream_opened=opened)
        return AgentExecutionHandle(self, started.run, config.name, hooks)

    async def execute_async(
        self,
        agent: AgentConfig | str,
        input: str | AgentInput | dict[str, Any],
        *,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Async twin of :meth:`execute`."""
        return await asyncio.to_thread(
            functools.partial(
                self.execute,
                agent,
                input,
                session_id=session_id,
                idempotency_key=idempotency_key,
                hooks=hooks,
                priority=priority,
            )
        )

    def _first_turn(self, config: AgentConfig, session_id: str, parsed: AgentInput, request_key: str) -> StartRun:
        return starts.first_turn(
            config,
            session_id,
            parsed,
            request_key=request_key,
            fingerprint=self.registry.fingerprint(config.name),
            stream_start_sequence=0,  # set by _record_start
            now_ms=now_ms(),
        )

    def _next_turn(
        self, config: AgentConfig, existing: SessionRecord, parsed: AgentInput, request_key: str
    ) -> StartRun:
        current = self.registry.fingerprint(config.name)
        if existing.agent_fingerprint and current and existing.agent_fingerprint != current:
            self.logger.warn(
                "[helix-dbos] continuing a session whose agent definition changed since its last run",
                {
                    "session_id": existing.session_id,
                    "agent": config.name,
                    "was": existing.agent_fingerprint,
                    "now": current,
                },
            )
        return starts.next_turn(
            config,
            existing,
            parsed,
            self.store.get_message_prefix(existing.session_id, existing.message_count),
            request_key=request_key,
            fingerprint=current,
            stream_start_sequence=0,  # set by _record_start
            now_ms=now_ms(),
        )

    def _record_start(self, start: StartRun, stream_id: str) -> tuple[StartRunResult, bool]:
        """Record a run's start with its stream's first sequence; ``True`` when the stream was opened too.

        When the store and the durable stream share a database, the stream's latest sequence is
        read and the stream activated in the store's start transaction (``start_run_with``): one
        transaction instead of a read, the start and an activation. Otherwise the sequence is read
        first and the stream is opened by :meth:`_start_workflow`.
        """
        joint_store = self.backend.joint_start
        joint = None if joint_store is None else self.streams.joint_start(stream_id, joint_store.engine)
        if joint_store is None or joint is None:
            sequence = self.streams.latest_sequence(stream_id)
            return self.store.start_run(start.model_copy(update={"stream_start_sequence": sequence})), False
        started = joint_store.start_run_with(start, joint.latest_sequence, joint.activate)
        if started.existing:
            return started, False
        joint.activated()
        return started, True

    def _check_files(self, agent: AgentConfig, messages: Sequence[Message]) -> None:
        """Refuse files no model takes, or the agent's model does not, before anything is written."""
        files = [f for m in messages if isinstance(m, UserMessage) for f in message_files(m)]
        if files:
            check_input_files(self._services.llm, agent.llm_config, check_files(files))

    def _start_workflow(
        self,
        agent: AgentConfig,
        run: RunRecord,
        session: SessionRecord,
        hooks: AgentHooks | None,
        *,
        resume_messages: list[Message] | None = None,
        priority: int | None = None,
        stream_opened: bool = False,
    ) -> None:
        request = starts.run_request(agent, run, session, hooks, resume_messages)
        if hooks is not None:
            self._services.remember_call_hooks(run.workflow_id, hooks)
        if not stream_opened:  # opened by the start's own transaction (see _record_start)
            self.streams.open(session.stream_id, run.run_id, agent.name)
        if self.queue is not None:  # any worker runs it; its result is awaited on the outcome event
            enqueue_run(self.queue, run.workflow_id, agent_run_workflow, request.model_dump(mode="json"), priority)
            return
        with SetWorkflowID(run.workflow_id):
            handle = DBOS.start_workflow(agent_run_workflow, request.model_dump(mode="json"))
        self._local_handles[run.workflow_id] = handle
        while len(self._local_handles) > _MAX_LOCAL_HANDLES:
            self._local_handles.popitem(last=False)

    def _start_if_orphaned(self, session_id: str) -> bool:
        """Start the workflow of an active run whose workflow never started (crash after the store write)."""
        session = self.store.load_session(session_id)
        run = self.store.get_current_run(session_id)
        if session is None or run is None or session.status != "active" or run.status != "running":
            return False
        if session.parent_session_id is not None:
            # A child run (sub-agent, companion) is started by its parent's workflow, which replays
            # the start on recovery with the child's full input (its parent stream, its mode).
            return False
        if DBOS.get_workflow_status(run.workflow_id) is not None:
            return False
        agent = self.registry.get(session.agent_type)
        if agent is None:
            self.logger.warn("[helix-dbos] orphaned run of an unregistered agent", {"run_id": run.run_id})
            return False
        if session.step_count != 0 or session.message_count < run.start_sequence:
            self.logger.warn("[helix-dbos] orphaned run has progress but no workflow", {"run_id": run.run_id})
            return False
        self.logger.info("[helix-dbos] starting orphaned run", {"run_id": run.run_id})
        self._start_workflow(agent, run, session, None)
        return True

    def recover_orphaned_runs(self, *, page_size: int = 500) -> list[str]:
        """Start every orphaned run (see the module docstring); returns their run ids.

        The cost is the number of runs in flight, flat in the number of parked or finished sessions
        (:func:`~helix_dbos.runtime.recovery.runs_without_workflow`).
        """
        found = runs_without_workflow(self.store, page_size=page_size)
        return [run.run_id for run in found if self._start_if_orphaned(run.session_id)]

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
        check_text(session_id=session_id, submission=submission)
        parsed = parse_submission(submission)
        fits = functools.partial(check_submission_fits, parsed)
        outcome, woken = self._record_answer(session_id, parsed.tool_call_id, parsed.model_dump(mode="json"), fits)
        if outcome.delivery == "hot":
            if not woken:
                wake_run(outcome.call.workflow_id, parsed.tool_call_id, self.logger, outcome.call)
            return self._hot_handle(outcome)
        if outcome.batch_complete:
            return self._continue_parked(session_id, outcome)
        return None

    async def submit_tool_result_async(
        self, session_id: str, submission: SubmitToolResult | dict[str, Any]
    ) -> AgentExecutionHandle | None:
        """Async twin of :meth:`submit_tool_result`."""
        return await asyncio.to_thread(self.submit_tool_result, session_id, submission)

    def _record_answer(
        self, session_id: str, tool_call_id: str, payload: dict[str, Any], fits: Callable[[PendingToolCall], None]
    ) -> tuple[SubmitOutcome, bool]:
        """The store's submission, with a hot run's wake-up in its transaction where it can be.

        Returns the outcome and whether a hot run was woken (else the caller sends the wake-up). A
        wake-up the database refuses rolled the whole transaction back, so the answer is recorded
        again without it; the executor then stops waking in submissions (DBOS's tables are not in
        the store's database after all).
        """
        waker, joint = self._waker, self.backend.transactional_submit
        if waker is not None and joint is not None:
            try:
                outcome = joint.submit_with(session_id, tool_call_id, payload, fits, waker)
                return outcome, outcome.delivery == "hot"
            except WakeUpRefusedError as refused:
                self._waker = None
                self.logger.warn(
                    "[helix-dbos] wake-up refused in the submission's transaction; "
                    "waking runs with DBOS.send from now on",
                    {"workflow_id": refused.workflow_id, "error": repr(refused.__cause__)},
                )
        return self.store.pending.submit(session_id, tool_call_id, payload, fits), False

    def _hot_handle(self, outcome: SubmitOutcome) -> AgentExecutionHandle | None:
        """A handle on the woken run, from what the submission's transaction read (or a fresh read)."""
        run = outcome.run if outcome.run is not None else self.store.get_run(outcome.call.run_id)
        session = outcome.session if outcome.session is not None else self.store.load_session(outcome.call.session_id)
        if run is None or session is None:
            return None
        return AgentExecutionHandle(self, run, session.agent_type, self._services.call_hooks_of(run.workflow_id))

    def _wake(self, workflow_id: str, key: str) -> None:
        wake_run(workflow_id, key, self.logger)

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
        try:
            return self._start_next_run(session, mode="resume", message=None, hooks=hooks, priority=priority)
        except (AgentAlreadyRunningError, StaleStateError):
            return self.get_handle(session_id)  # someone else started it: same deterministic run

    def expire_parked_calls(self) -> list[str]:
        """Time out parked calls past their deadline and continue runs whose batch is now complete.

        Workers call this periodically (``start_background_tasks``); running it in several
        processes at once is safe, as every transition is a compare-and-set.
        """

        def continue_parked(session_id: str) -> str | None:
            handle = self._continue_parked(session_id)
            return None if handle is None else handle.run_id

        return workers.expire_parked_calls(self.store, continue_parked)

    def start_background_tasks(
        self, *, interval_seconds: float = 1.0, takeover_after_seconds: float | None = 30.0
    ) -> None:
        """Start the background thread (idempotent; ``close`` stops it).

        Every ``interval_seconds`` it writes this worker's heartbeat, times out parked tool calls past
        their deadline, and takes over the runs of workers whose heartbeat is older than
        ``takeover_after_seconds`` (``None`` disables takeover).
        """
        tasks: list[tuple[str, Callable[[], object]]] = [
            ("background task heartbeat", self.heartbeat),
            ("background task expire_parked_calls", self.expire_parked_calls),
        ]
        if takeover_after_seconds is not None:
            after = takeover_after_seconds
            tasks.append(("takeover check", lambda: self.take_over_dead_workers(dead_after_seconds=after)))
        self._background.start(tasks, interval_seconds=interval_seconds)

    # -- workers -----------------------------------------------------------------------------------------
    @property
    def executor_id(self) -> str:
        """The DBOS executor id of this process."""
        return workers.executor_id()

    def heartbeat(self) -> None:
        """Record that this worker is alive (an error is logged while another live process holds its id)."""
        workers.heartbeat(self.store, self.logger)

    def take_over_dead_workers(self, *, dead_after_seconds: float) -> list[str]:
        """Recover the in-flight runs of workers whose heartbeat stopped (see :mod:`.workers`)."""
        return workers.take_over_dead_workers(self.store, self.logger, dead_after_seconds=dead_after_seconds)

    def recover_executors(self, executor_ids: list[str]) -> int:
        """Re-enqueue the pending workflows of these executors for any live worker; returns how many."""
        return workers.recover_executors(self.logger, executor_ids)

    # -- run control -------------------------------------------------------------------------------------
    def interrupt(self, session_id: str, reason: str | None = None) -> bool:
        """Ask the session's run to stop cleanly as ``interrupted`` at its next step (resumable).

        The flag is durable, so it reaches the run from any process. Returns False when no run is
        in flight.
        """
        check_text(session_id=session_id, reason=reason)
        if self.store.load_session(session_id) is None:
            raise SessionNotFoundError(session_id)
        requested = self.store.request_interrupt(session_id, reason, now_ms=now_ms())
        if requested:
            self._trip_tool_signals(session_id, f"interrupted: {reason}" if reason else "interrupted")
            run = self.store.get_current_run(session_id)
            if run is not None and run.status == "running":
                self._wake(run.workflow_id, "interrupt")
            for ref in children.running_children(self.store, session_id):  # the cascade (see .children)
                children.interrupt_child(self._services, ref.sub_session_id, reason or "parent interrupted")
        return requested

    def abort(self, session_id: str, reason: str | None = None) -> None:
        """Stop the session's run now: status ``failed`` (aborted), not resumable.

        The store is updated first (so even a parked run is aborted), open tool calls are cancelled,
        a waiting run is woken (DBOS cancellation alone does not interrupt a blocking ``recv``), and
        the workflow is cancelled at its next step boundary.
        """
        check_text(session_id=session_id, reason=reason)
        session = self.store.load_session(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        run = self.store.get_current_run(session_id)
        if session.status != "active" or run is None:
            raise AgentNotResumableError(session_id, session.status, "no run in flight to abort")
        error = f"aborted: {reason}" if reason else "aborted"
        self.store.finish_run(
            session_id,
            run.run_id,
            session_status="failed",
            run_status="failed",
            error=error,
            aborted=True,
            abort_reason=reason,
            now_ms=now_ms(),
        )
        self.store.pending.cancel_open(session_id)
        self._trip_tool_signals(session_id, error)
        self._wake(run.workflow_id, "abort")
        with contextlib.suppress(Exception):
            if DBOS.get_workflow_status(run.workflow_id) is not None:
                DBOS.cancel_workflow(run.workflow_id)
        for ref in children.running_children(self.store, session_id):  # the cascade (see .children)
            children.stop_child(self._services, ref.sub_session_id, f"parent {error}")
        self.streams.fail(session.stream_id, error)

    def _trip_tool_signals(self, session_id: str, reason: str) -> None:
        """Trip the abort signals of the session's tools running here (others see the durable flag)."""
        if self._services.abort_signals is not None:
            self._services.abort_signals.trip(session_id, reason)

    def can_resume(self, session_id: str) -> CanResumeResult:
        """Whether :meth:`resume` would accept the session, with the reason when not."""
        return can_resume_session(self.store.load_session(session_id), self.store.get_current_run(session_id))

    def resume(
        self,
        agent: AgentConfig | str,
        session_id: str,
        message: SendInput | None = None,
        *,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Continue an interrupted or suspended session in a new run (``previous_run_id`` links them).

        ``hooks`` are per-call hooks for the new run, fired after the agent's own (as on ``execute``);
        ``priority`` as on ``execute``.
        """
        check_text(session_id=session_id, message=message)
        check_priority(priority)
        config = self.register(agent) if isinstance(agent, AgentConfig) else self.registry.require(agent)
        session = self.store.load_session(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        if session.agent_type != config.name:
            raise AgentMismatchError(session_id, session.agent_type, config.name)
        verdict = self.can_resume(session_id)
        if not verdict.can_resume:
            if session.status == "active":
                raise AgentAlreadyRunningError(session_id, session.status)
            raise AgentNotResumableError(session_id, session.status, verdict.reason)
        return self._start_next_run(session, mode="resume", message=message, hooks=hooks, priority=priority)

    async def resume_async(
        self,
        agent: AgentConfig | str,
        session_id: str,
        message: SendInput | None = None,
        *,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Async twin of :meth:`resume`."""
        return await asyncio.to_thread(
            functools.partial(self.resume, agent, session_id, message, hooks=hooks, priority=priority)
        )

    def retry(
        self,
        session_id: str,
        *,
        checkpoint_id: str | None = None,
        message: SendInput | None = None,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Start again from a checkpoint (the latest by default), discarding what followed it.

        An explicit ``checkpoint_id`` that does not belong to the session is an error, never a
        silent restart. A fresh run starting from the checkpoint's state is used rather than DBOS's
        workflow fork: the checkpoint already is the boundary, and run records stay contiguous.
        ``hooks`` are per-call hooks for the new run; ``priority`` as on ``execute``.
        """
        check_text(session_id=session_id, checkpoint_id=checkpoint_id, message=message)
        check_priority(priority)
        session = self.store.load_session(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        if session.status == "active":
            raise AgentAlreadyRunningError(session_id, session.status)
        if checkpoint_id is not None:
            checkpoint = self.store.get_checkpoint(checkpoint_id)
            if checkpoint is None or checkpoint.session_id != session_id:
                raise HelixError(
                    f"Checkpoint {checkpoint_id!r} does not exist in session {session_id!r}",
                    code="validation_error",
                    retryable=False,
                )
        else:
            checkpoint = self.store.get_latest_checkpoint(session_id)
            if checkpoint is None:
                raise AgentNotResumableError(session_id, session.status, "no checkpoint to retry from")
        return self._start_next_run(
            session,
            mode="retry",
            message=message,
            truncate_to=checkpoint.message_count,
            reset_state=checkpoint.state.custom_state,
            hooks=hooks,
            priority=priority,
        )

    async def retry_async(
        self,
        session_id: str,
        *,
        checkpoint_id: str | None = None,
        message: SendInput | None = None,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """Async twin of :meth:`retry`."""
        return await asyncio.to_thread(
            functools.partial(
                self.retry, session_id, checkpoint_id=checkpoint_id, message=message, hooks=hooks, priority=priority
            )
        )

    def fork(
        self, session_id: str, checkpoint_id: str | None = None, *, new_session_id: str | None = None
    ) -> ForkResult:
        """Branch a new session from a checkpoint of ``session_id`` (the latest by default).

        The fork has its own transcript (up to the checkpoint), custom state and stream, and is idle:
        ``execute(agent, message, session_id=fork.session_id)`` continues it, ``retry(fork.session_id)``
        replays the step after the checkpoint. With ``new_session_id`` a repeat returns the same fork.
        Rules (unknown ids, a run in flight, a taken id): :mod:`helix_dbos.runtime.forks`.
        """
        return forks.fork_session(self.store, self.streams, session_id, checkpoint_id, new_session_id=new_session_id)

    async def fork_async(
        self, session_id: str, checkpoint_id: str | None = None, *, new_session_id: str | None = None
    ) -> ForkResult:
        """Async twin of :meth:`fork`."""
        return await asyncio.to_thread(
            functools.partial(self.fork, session_id, checkpoint_id, new_session_id=new_session_id)
        )

    def _start_next_run(
        self,
        session: SessionRecord,
        *,
        mode: Literal["resume", "retry"],
        message: SendInput | None,
        truncate_to: int | None = None,
        reset_state: dict[str, Any] | None = None,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        agent = self.registry.require(session.agent_type)
        extra = input_messages(message) if message is not None else []
        self._check_files(agent, extra)
        start = starts.continuation(
            agent,
            session,
            mode=mode,
            extra=extra,
            truncate_to=truncate_to,
            reset_state=reset_state,
            fingerprint=self.registry.fingerprint(agent.name),
            stream_start_sequence=0,  # set by _record_start
            now_ms=now_ms(),
        )
        started, opened = self._record_start(start, session.stream_id)
        if started.existing:
            self._start_if_orphaned(session.session_id)
            return AgentExecutionHandle(self, started.run, agent.name, hooks)
        resume_messages = extra if mode == "resume" else []
        self._start_workflow(
            agent,
            started.run,
            started.session,
            hooks,
            resume_messages=resume_messages,
            priority=priority,
            stream_opened=opened,
        )
        return AgentExecutionHandle(self, started.run, agent.name, hooks)

    # -- inspection ------------------------------------------------------------------------------------
    def get_handle(self, session_id: str) -> AgentExecutionHandle | None:
        """A handle on the session's current (latest) run."""
        run = self.store.get_current_run(session_id)
        session = self.store.load_session(session_id)
        if run is None or session is None:
            return None
        return AgentExecutionHandle(self, run, session.agent_type, self._services.call_hooks_of(run.workflow_id))

    def get_state(self, session_id: str) -> AgentState | None:
        """The session's state with its full transcript.

        While tool calls wait for a client or an approval, ``status`` is ``suspended_client_tool``
        (the session itself stays ``active`` in the store, as the seeds say).
        """
        state = self.store.load_state(session_id)
        if state is not None and state.status == "running" and self.list_pending_tool_calls(session_id):
            state = state.model_copy(update={"status": "suspended_client_tool"})
        return state

    async def get_state_async(self, session_id: str) -> AgentState | None:
        """Async twin of :meth:`get_state`."""
        return await asyncio.to_thread(self.get_state, session_id)

    def get_session(self, session_id: str) -> SessionRecord | None:
        """The session's store record (status, turn, abort and interrupt details), without messages."""
        return self.store.load_session(session_id)

    def list_checkpoints(self, session_id: str, *, offset: int = 0, limit: int = 50) -> PaginatedCheckpoints:
        """The session's checkpoints, oldest first: the points :meth:`fork` can branch from."""
        return self.store.list_checkpoints(session_id, offset=offset, limit=limit)

    def list_pending_tool_calls(self, session_id: str) -> list[PendingToolCall]:
        """The session's tool calls still waiting for a client result or an approval, oldest first."""
        return self.store.pending.open_calls(session_id)

    async def read_stream(self, session_id: str, from_sequence: int = 0) -> AsyncIterator[StreamChunk] | None:
        """The session's stream chunks from ``from_sequence`` (live while a run writes to it)."""
        return await self.streams.read(session_id, from_sequence=from_sequence)

    def wait_for_result(self, run: RunRecord, agent_name: str, timeout_seconds: float | None = None) -> AgentResult:
        """Block until ``run`` ends and return its result (output typed by ``agent_name``'s schema).

        A run started by this process is awaited on its in-process future; any other run is
        awaited on its outcome event, which PostgreSQL's LISTEN/NOTIFY delivers in milliseconds.
        Raises :class:`RunNotFinishedError` when ``timeout_seconds`` pass first.
        """
        local = self._local_handles.get(run.workflow_id)
        try:
            if local is not None and timeout_seconds is None:
                outcome = local.get_result()
            else:
                outcome = await_outcome(self.store, run.workflow_id, timeout_seconds)
            self._local_handles.pop(run.workflow_id, None)
        except AwaitedWorkflowCancelledError:
            session = self.store.load_session(run.session_id)
            error = session.error if session is not None and session.error else "cancelled"
            result = AgentResult(status="failed", error=error)
        else:
            result = to_result(self.registry.get(agent_name), outcome)
        result.usage = self.get_usage_summary(run.session_id, run_id=run.run_id)
        return result

    def get_usage_summary(
        self, session_id: str, run_id: str | None = None, *, include_children: bool = True
    ) -> UsageSummary:
        """What a session (with its sub-agents' sessions) or one of its runs used and cost.

        From the usage recorded with each step commit; ``include_children=False`` leaves the
        sub-agents' sessions out. A run's usage includes the sub-agents and companions that run
        started (what the run cost, delegations included), as ``AgentResult.usage`` reports it.
        Unknown session or run: an empty summary.
        """
        return summarize_usage(self.get_usage(session_id, run_id=run_id, include_children=include_children))

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
        if include_children:
            return usage_with_children(self.store, session_id, run_id=run_id)
        return self.store.get_usage(session_id, run_id=run_id)

    def get_current_run(self, session_id: str) -> RunRecord | None:
        """The session's most recent run record."""
        return self.store.get_current_run(session_id)

    def list_runs(self, session_id: str) -> list[RunRecord]:
        """Every run of the session, by turn."""
        return self.store.list_runs(session_id)

    def stop_background_tasks(self, timeout_seconds: float = 5.0) -> None:
        """Stop the background thread, waiting up to ``timeout_seconds`` for its current round."""
        self._background.stop(timeout_seconds)

    def close(self) -> None:
        """Stop background tasks and the tool pool, and uninstall this executor.

        DBOS itself is the caller's to destroy, *before* this when workflows may still be running
        here (``shutdown()`` does so): a workflow that finds the runtime uninstalled while DBOS can
        still record would record that as its failure.
        """
        self.stop_background_tasks()
        self._services.tool_pool.shutdown(wait=False, cancel_futures=True)
        services.uninstall(self._services)


def jsonable(value: Any) -> Any:
    """JSON-able form of outputs (used by the CLI and the service)."""
    return to_jsonable_python(value)
