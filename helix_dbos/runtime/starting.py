"""``RunStarter``: the start protocol of a run (execute, resume, retry, fork) and awaiting its end.

A start is one store write (create or reopen the session, append the input, record the run: for a
new session on PostgreSQL one statement, :meth:`RunStarter._start_new_session`, else a transaction)
followed by ``DBOS.start_workflow`` under a workflow id derived from the session and turn
(``{session_id}-turn-{turn}``), or an enqueue on the run queue (:mod:`.queues`), which any worker
runs. Two calls with the same request therefore meet at the same turn: the store lets exactly one of
them open it, and DBOS deduplicates the workflow id. A crash between the transaction and the
workflow start leaves an *orphaned* run, which the next start on the session and the worker's
recovery (:meth:`RunStarter.start_if_orphaned`) start.

What a start writes is built in :mod:`.starts`, the ids it derives in :mod:`.ids`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from dbos import DBOS, SetWorkflowID, WorkflowHandle
from pydantic import BaseModel

from helix_dbos._clock import now_ms
from helix_dbos.agent import AgentConfig, AgentHooks
from helix_dbos.checkpoint import Checkpoint
from helix_dbos.double_text import DoubleTextPolicy, DoubleTextReceipt, check_double_text
from helix_dbos.errors import (
    AgentAlreadyRunningError,
    AgentMismatchError,
    AgentNotFoundError,
    AgentNotResumableError,
    CheckpointNotFoundError,
    HelixError,
    RunParked,
    SessionNotFoundError,
    TenantBudgetExceededError,
)
from helix_dbos.llm.base import check_input_files
from helix_dbos.llm.files import check_files, message_files
from helix_dbos.messages import Message, UserMessage
from helix_dbos.orchestration.fork_edits import ForkEdits
from helix_dbos.orchestration.state_operations import input_messages, normalize_agent_input
from helix_dbos.runtime import forks, starts
from helix_dbos.runtime._dbos_compat import AwaitedWorkflowCancelledError
from helix_dbos.runtime.backend import Backend
from helix_dbos.runtime.child_park import continued_child
from helix_dbos.runtime.handle import AgentExecutionHandle
from helix_dbos.runtime.ids import keyed_request_key, new_session_id, request_key_for, session_id_for_key
from helix_dbos.runtime.outcomes import await_outcome, to_result
from helix_dbos.runtime.queues import RunQueue, check_priority, enqueue_run
from helix_dbos.runtime.reads import RunReads
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.tenant_budgets import check_tenant_budget
from helix_dbos.session import AgentInput, AgentResult, SendInput
from helix_dbos.store.base import ForkResult, RunRecord, SessionRecord, StartRun, StartRunResult
from helix_dbos.stream.chunks import StreamResyncChunk
from helix_dbos.tenancy import DEFAULT_TENANT, TenantBudget, check_tenant
from helix_dbos.validation import check_text

if TYPE_CHECKING:
    from helix_dbos.runtime.double_text import DoubleTexting

__all__ = ["HandleFactory", "RunStarter"]

HandleFactory = Callable[[RunRecord, str, AgentHooks | None], AgentExecutionHandle]
"""Builds the handle of a run (bound to the facade the handle calls back)."""

_MAX_LOCAL_HANDLES = 4096


class RunStarter:
    """Starts runs (here, or on the run queue) and awaits their results."""

    def __init__(
        self,
        services: RuntimeServices,
        backend: Backend,
        reads: RunReads,
        handle: HandleFactory,
        *,
        queue: RunQueue | None = None,
    ) -> None:
        self._services = services
        self._store = services.store
        self._registry = services.registry
        self._streams = services.streams
        self._logger = services.logger
        self._backend = backend
        self._reads = reads
        self._handle = handle
        self.queue = queue
        """Where runs are enqueued instead of started here (:mod:`.queues`); ``None``: start locally."""
        self.tenant_budgets: dict[str, TenantBudget] = {}
        """Each tenant's spend cap, checked when it asks for a new run (:mod:`.tenant_budgets`)."""
        if services.run_workflow is None:
            raise HelixError("The runtime services name no agent-run workflow", code="framework_internal_error")
        self._workflow = services.run_workflow
        """The agent-run DBOS workflow (from the services, so this module need not import the loop)."""
        self.double_text: DoubleTexting | None = None
        """Where a message that meets a run in flight goes, under a policy but ``reject`` (:mod:`.double_text`)."""
        self._local_handles: OrderedDict[str, WorkflowHandle[Any]] = OrderedDict()
        """In-process futures of runs this process started (the fast way to wait); bounded, because a
        long-running server starts runs nobody waits on here. A dropped entry falls back to the
        outcome event."""

    def agent(self, agent: AgentConfig | str) -> AgentConfig:
        """The agent to run: registered when given as a config, looked up when named (:class:`AgentNotFoundError`)."""
        if isinstance(agent, AgentConfig):
            return self._registry.register(agent)
        found = self._registry.get(agent)
        if found is None:
            raise AgentNotFoundError(agent, self._registry.names())
        return found

    def admit(self, tenant: str) -> None:
        """Refuse a new run of ``tenant`` once its spend reached its budget (``tenant_budget_exceeded``)."""
        budget = self.tenant_budgets.get(tenant)
        if budget is not None:
            check_tenant_budget(self._store, tenant, budget, now_ms())

    # -- starts ----------------------------------------------------------------------------------------
    def execute(
        self,
        agent: AgentConfig | str,
        input: str | AgentInput | dict[str, Any],
        *,
        session_id: str | None = None,
        idempotency_key: str | None = None,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
        tenant: str | None = None,
        double_text: DoubleTextPolicy | None = None,
    ) -> AgentExecutionHandle:
        """A run of a new session, or the next turn of a finished one (see ``DBOSAgentExecutor.execute``)."""
        check_text(input=input, session_id=session_id, idempotency_key=idempotency_key)
        check_priority(priority)
        if tenant is not None:
            check_tenant(tenant)
        config = self.agent(agent)
        policy = check_double_text(double_text) or config.double_text
        parsed = normalize_agent_input(input)
        self._check_files(config, [*(parsed.messages or []), *input_messages(parsed.message)])
        fresh = session_id is None and not idempotency_key
        if session_id is None:
            session_id = session_id_for_key(idempotency_key) if idempotency_key else new_session_id()
        guessed = self._backend.new_session_start is not None
        created = self._start_new_session(config, session_id, parsed, idempotency_key, tenant) if guessed else None
        if created is not None:
            self._start_workflow(config, created.run, created.session, hooks, priority=priority, stream_opened=True)
            handle = self._handle(created.run, config.name, hooks)
            handle.double_text = DoubleTextReceipt(policy=policy, status="started", run_id=created.run.run_id)
            return handle
        # The session exists (or no one-statement start here): plan the turn from it. A session id
        # made here from a new UUID names no session yet: its read would cost a round trip for a
        # certain ``None`` (and the start's insert is the guard all the same).
        existing = None if fresh else self._store.load_session(session_id)
        if existing is not None and tenant is not None and existing.tenant != tenant:
            # Another tenant's session is not there for this caller: the same answer as an unknown id.
            raise SessionNotFoundError(session_id)
        if existing is not None and existing.agent_type != config.name:
            # Before anything is read or written for the request: a session is one agent's.
            raise AgentMismatchError(session_id, existing.agent_type, config.name)
        if idempotency_key:
            for run in self._store.list_runs(session_id):
                if run.request_key == keyed_request_key(idempotency_key):
                    if guessed:
                        # The one-statement start may have committed unheard (a lost acknowledgement,
                        # then its retry found the session): its workflow may still be to start.
                        self.start_if_orphaned(session_id)
                    return self._handle(run, config.name, hooks)
        # A request racing a run in flight is "for" that run's turn; otherwise it opens the next one.
        next_turn = 1 if existing is None else existing.turn + (0 if existing.status == "active" else 1)
        key = keyed_request_key(idempotency_key) if idempotency_key else request_key_for(config.name, parsed, next_turn)
        self.admit(existing.tenant if existing is not None else tenant or DEFAULT_TENANT)
        if existing is None:
            start = self._first_turn(config, session_id, parsed, key)
            stream_id = session_id
        else:
            start = self._next_turn(config, existing, parsed, key)
            stream_id = existing.stream_id
        if tenant is not None:  # checked again under the row lock: a racing creator may be another tenant
            start = start.model_copy(update={"tenant": tenant})
        try:
            started, opened = self._record_start(start, stream_id)
        except AgentAlreadyRunningError:
            self.start_if_orphaned(session_id)
            if policy == "reject" or self.double_text is None:
                raise
            return self.double_text.defer(config, session_id, parsed, policy, idempotency_key, hooks)
        if started.existing:
            self.start_if_orphaned(session_id)
        else:
            self._start_workflow(config, started.run, started.session, hooks, priority=priority, stream_opened=opened)
        handle = self._handle(started.run, config.name, hooks)
        handle.double_text = DoubleTextReceipt(policy=policy, status="started", run_id=started.run.run_id)
        return handle

    def _start_new_session(
        self,
        config: AgentConfig,
        session_id: str,
        parsed: AgentInput,
        idempotency_key: str | None,
        tenant: str | None,
    ) -> StartRunResult | None:
        """The start of ``execute`` as one statement, on the guess that ``session_id`` names no session yet.

        Most starts create their session (a new id, the first message of a conversation), and the
        session's read before the start would then cost a round trip for ``None``. The guess needs
        no read: the store's insert of the session is the guard, and writes nothing at all when the
        session exists (``NewSessionStart``). ``None`` then, and ``execute`` plans the turn from the
        session as before: every rule for an existing session (its tenant, its agent, an
        idempotency key met before, a run in flight) is checked there, on its row. A new session
        has no earlier run, so a guessed turn 1 and its request key are what that path would
        compute. ``None`` as well where the store or the stream cannot do it in one statement.
        """
        store = self._backend.new_session_start
        joint = None if store is None else self._streams.joint_start(session_id, store.engine)
        riding = None if joint is None else joint.riding()
        if store is None or joint is None or riding is None:
            return None
        try:  # the tenant a new session gets; an existing session's own is checked on its path
            self.admit(tenant or DEFAULT_TENANT)
        except TenantBudgetExceededError:
            return None
        key = keyed_request_key(idempotency_key) if idempotency_key else request_key_for(config.name, parsed, 1)
        start = self._first_turn(config, session_id, parsed, key)
        if tenant is not None:
            start = start.model_copy(update={"tenant": tenant})
        started = store.start_new_session(start, riding)
        if started is not None:
            joint.activated()
        return started

    def resume(
        self,
        agent: AgentConfig | str | None,
        session_id: str,
        message: SendInput | None = None,
        *,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """A new run of an interrupted or suspended session (``agent=None``: the session's own)."""
        check_text(session_id=session_id, message=message)
        check_priority(priority)
        session = self._reads.require_session(session_id)
        config = self.agent(session.agent_type if agent is None else agent)
        if session.agent_type != config.name:
            raise AgentMismatchError(session_id, session.agent_type, config.name)
        verdict = self._reads.can_resume(session_id)
        if not verdict.can_resume:
            answered = self._run_an_answer_continued(session_id) if message is None else None
            if answered is not None:
                return self._handle(answered, config.name, hooks)
            if session.status == "active":
                raise AgentAlreadyRunningError(session_id, session.status)
            raise AgentNotResumableError(session_id, session.status, verdict.reason)
        self.admit(session.tenant)
        return self.start_next_run(session, mode="resume", message=message, hooks=hooks, priority=priority)

    def _run_an_answer_continued(self, session_id: str) -> RunRecord | None:
        """The session's current run when a tool call's answer continued it, else ``None``.

        The seeds' portable pattern is ``submit_tool_result`` then ``resume(agent, session_id)``, since
        their submission is a durable write only. Here the submission already continues the run: it
        wakes a hot run, or starts a parked run's continuation (a ``resume`` run after a ``suspended``
        one). ``resume`` without new input then stands for that run, running or finished, instead of
        refusing it as a run in flight or a session that cannot continue.
        """
        run = self._store.get_current_run(session_id)
        if run is None:
            return None
        if run.mode == "resume" and run.previous_run_id is not None:
            previous = self._store.get_run(run.previous_run_id)
            if previous is not None and previous.status == "suspended":
                return run
        answered = ("answered", "applied")
        calls = self._store.pending.get(session_id)
        if any(c.run_id == run.run_id and c.status in answered and c.submission is not None for c in calls):
            return run
        return None

    def retry(
        self,
        session_id: str,
        *,
        checkpoint_id: str | None = None,
        message: SendInput | None = None,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
    ) -> AgentExecutionHandle:
        """A new run from a checkpoint of the session (the latest by default)."""
        check_text(session_id=session_id, checkpoint_id=checkpoint_id, message=message)
        check_priority(priority)
        session = self._reads.require_session(session_id)
        self.agent(session.agent_type)
        checkpoint = None if checkpoint_id is None else self._store.get_checkpoint(checkpoint_id)
        if checkpoint_id is not None and (checkpoint is None or checkpoint.session_id != session_id):
            raise CheckpointNotFoundError(session_id, checkpoint_id)
        if session.status == "active":
            raise AgentAlreadyRunningError(session_id, session.status)
        if checkpoint is None:
            checkpoint = self._store.get_latest_checkpoint(session_id)
            if checkpoint is None:
                raise AgentNotResumableError(session_id, session.status, "no checkpoint to retry from")
        self.admit(session.tenant)
        return self.start_next_run(
            session,
            mode="retry",
            message=message,
            truncate_to=checkpoint.message_count,
            reset_state=checkpoint.state.custom_state,
            hooks=hooks,
            priority=priority,
            rollback=checkpoint,
        )

    def fork(
        self,
        session_id: str,
        checkpoint_id: str | None = None,
        *,
        new_session_id: str | None = None,
        edits: ForkEdits | None = None,
    ) -> ForkResult:
        """A new idle session branched from a checkpoint, edited (rules: :mod:`helix_dbos.runtime.forks`)."""
        return forks.fork_session(
            self._store,
            self._streams,
            session_id,
            checkpoint_id,
            new_session_id=new_session_id,
            edits=edits,
            state_schema_of=self._state_schema_of,
        )

    def _state_schema_of(self, agent_type: str) -> type[BaseModel] | None:
        """The registered agent's state schema (``None`` for an agent this process does not serve)."""
        agent = self._registry.get(agent_type)
        return agent.state_schema if agent is not None else None

    def start_next_run(
        self,
        session: SessionRecord,
        *,
        mode: Literal["resume", "retry"],
        message: SendInput | None,
        truncate_to: int | None = None,
        reset_state: dict[str, Any] | None = None,
        hooks: AgentHooks | None = None,
        priority: int | None = None,
        rollback: Checkpoint | None = None,
    ) -> AgentExecutionHandle:
        """Record and start the session's next run in ``mode`` (a resume, a retry, a parked run's continuation).

        ``rollback``: the checkpoint a retry starts from; the stream is rolled back to it first
        (:meth:`_roll_back_stream`).
        """
        agent = self.agent(session.agent_type)
        extra = input_messages(message) if message is not None else []
        self._check_files(agent, extra)
        start = starts.continuation(
            agent,
            session,
            mode=mode,
            extra=extra,
            truncate_to=truncate_to,
            reset_state=reset_state,
            fingerprint=self._registry.fingerprint(agent.name),
            stream_start_sequence=0,  # set by _record_start
            now_ms=now_ms(),
        )
        started, opened = self._record_start(start, session.stream_id)
        if started.existing:
            self.start_if_orphaned(session.session_id)
            return self._handle(started.run, agent.name, hooks)
        resume_messages = extra if mode == "resume" else []
        if rollback is not None:
            if not opened:
                self._streams.open(session.stream_id, started.run.run_id, agent.name)
                opened = True
            self._roll_back_stream(started.run, session.stream_id, agent.name, rollback)
        child = continued_child(self._store, session, session.run_id) if mode == "resume" else {}  # as it was before
        self._start_workflow(
            agent,
            started.run,
            started.session,
            hooks,
            resume_messages=resume_messages,
            priority=priority,
            stream_opened=opened,
            child=child,
        )
        return self._handle(started.run, agent.name, hooks)

    def _roll_back_stream(self, run: RunRecord, stream_id: str, agent_type: str, checkpoint: Checkpoint) -> None:
        """Remove what the stream holds past ``checkpoint`` and announce it (seed 002 ``stream_resync``).

        Past the checkpoint are the chunks of its run's later steps and everything of the runs after
        that run. Steps count from 1 in each run, so the cut is the sequence of the first such chunk,
        not a step: chunks after it go (``StreamTruncatedError`` for readers that had not reached
        them), then a ``stream_resync`` chunk with ``reason="rollback"`` and that sequence as
        ``from_sequence`` tells clients to rebuild their view. The retry's own chunks follow it.
        """
        runs = {r.run_id: r for r in self._store.list_runs(run.session_id) if r.run_id != run.run_id}
        source = runs.get(checkpoint.state.run_id or "")
        cut = run.stream_start_sequence
        if source is None:
            cut = min(cut, checkpoint.stream_sequence)
        else:
            later = [r.stream_start_sequence for r in runs.values() if r.turn > source.turn]
            next_start = min(later) if later else None
            for record in self._streams.stored_records(stream_id, source.stream_start_sequence):
                chunk = record.chunk
                past_step = (
                    chunk.agent_id == source.run_id and chunk.step is not None and chunk.step > checkpoint.step_count
                )
                if record.sequence <= run.stream_start_sequence and (
                    past_step or (next_start is not None and record.sequence > next_start)
                ):
                    cut = record.sequence - 1
                    break
        resync = StreamResyncChunk(
            agent_id=run.run_id,
            agent_type=agent_type,
            checkpoint_id=checkpoint.id,
            step_count=checkpoint.step_count,
            message_count=checkpoint.message_count,
            from_sequence=cut,
            reason="rollback",
        )
        self._streams.roll_back(stream_id, cut, checkpoint.step_count, resync, dedupe_key=f"rollback:{run.run_id}")

    def _first_turn(self, config: AgentConfig, session_id: str, parsed: AgentInput, request_key: str) -> StartRun:
        return starts.first_turn(
            config,
            session_id,
            parsed,
            request_key=request_key,
            fingerprint=self._registry.fingerprint(config.name),
            stream_start_sequence=0,  # set by _record_start
            now_ms=now_ms(),
        )

    def _next_turn(
        self, config: AgentConfig, existing: SessionRecord, parsed: AgentInput, request_key: str
    ) -> StartRun:
        current = self._registry.fingerprint(config.name)
        if existing.agent_fingerprint and current and existing.agent_fingerprint != current:
            self._logger.warn(
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
            self._store.get_message_prefix(existing.session_id, existing.message_count),
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
        joint_store = self._backend.joint_start
        joint = None if joint_store is None else self._streams.joint_start(stream_id, joint_store.engine)
        if joint_store is None or joint is None:
            sequence = self._streams.latest_sequence(stream_id)
            return self._store.start_run(start.model_copy(update={"stream_start_sequence": sequence})), False
        started = joint_store.start_run_with(start, joint.latest_sequence, joint.activate, joint.riding())
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
        child: dict[str, Any] | None = None,
    ) -> None:
        """Record the run's request as its workflow's input and start it (here, or on the run queue).

        ``child``: a child session's continuation's place in its tree (:func:`.child_park.continued_child`).
        """
        request = starts.run_request(
            agent, run, session, hooks, resume_messages, executor_hooks=self._services.executor_hooks
        )
        if child:
            request = request.model_copy(update=child)
        if hooks is not None:
            self._services.remember_call_hooks(run.workflow_id, hooks)
        if not stream_opened:  # opened by the start's own transaction (see _record_start)
            self._streams.open(session.stream_id, run.run_id, agent.name)
        if self.queue is not None:  # any worker runs it; its result is awaited on the outcome event
            enqueue_run(
                self.queue,
                run.workflow_id,
                self._workflow,
                request.model_dump(mode="json"),
                priority,
                partition_key=session.tenant,
            )
            return
        with SetWorkflowID(run.workflow_id):
            handle = DBOS.start_workflow(self._workflow, request.model_dump(mode="json"))
        self._local_handles[run.workflow_id] = handle
        while len(self._local_handles) > _MAX_LOCAL_HANDLES:
            self._local_handles.popitem(last=False)

    def start_if_orphaned(self, session_id: str) -> bool:
        """Start the workflow of an active run whose workflow never started (crash after the store write)."""
        session = self._store.load_session(session_id)
        run = self._store.get_current_run(session_id)
        if session is None or run is None or session.status != "active" or run.status != "running":
            return False
        if DBOS.get_workflow_status(run.workflow_id) is not None:
            return False
        child: dict[str, Any] = {}
        if session.parent_session_id is not None:
            # A child's first run (sub-agent, companion) is started by its parent's workflow, which
            # replays the start on recovery with the child's full input (its parent stream, its
            # mode). A parked child's continuation is not: whoever woke it started it, so here it
            # is started as that waker would have, from the run it continues.
            continues = run.previous_run_id if run.mode == "resume" else None
            previous = self._store.get_run(continues) if continues else None
            if previous is None or previous.status != "suspended":
                return False
            child = continued_child(self._store, session, previous.run_id)
        agent = self._registry.get(session.agent_type)
        if agent is None:
            self._logger.warn("[helix-dbos] orphaned run of an unregistered agent", {"run_id": run.run_id})
            return False
        if session.step_count != 0 or session.message_count < run.start_sequence:
            self._logger.warn("[helix-dbos] orphaned run has progress but no workflow", {"run_id": run.run_id})
            return False
        self._logger.info("[helix-dbos] starting orphaned run", {"run_id": run.run_id})
        self._start_workflow(agent, run, session, None, child=child)
        return True

    # -- results ---------------------------------------------------------------------------------------
    def wait_for_result(self, run: RunRecord, agent_name: str, timeout_seconds: float | None = None) -> AgentResult:
        """Block until ``run`` ends; its in-process future when this process started it, else its outcome event."""
        local = self._local_handles.get(run.workflow_id)
        try:
            if local is not None and timeout_seconds is None:
                try:
                    outcome = local.get_result()
                except RunParked:  # its thread left; the execution DBOS resumes publishes the outcome
                    outcome = await_outcome(self._store, run.workflow_id, None)
            else:
                outcome = await_outcome(self._store, run.workflow_id, timeout_seconds)
            self._local_handles.pop(run.workflow_id, None)
        except AwaitedWorkflowCancelledError:
            session = self._store.load_session(run.session_id)
            error = session.error if session is not None and session.error else "cancelled"
            result = AgentResult(status="failed", error=error)
        else:
            result = to_result(self._registry.get(agent_name), outcome)
        result.usage = self._reads.get_usage_summary(run.session_id, run_id=run.run_id)
        return result
