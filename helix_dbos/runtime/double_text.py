"""The durable delivery of a message posted while the session's run is in flight (double texting).

The policies are defined in :mod:`helix_dbos.double_text`. Every one but ``reject`` turns the
message into a *ticket*: a DBOS workflow (:data:`DOUBLE_TEXT_WORKFLOW_NAME`) enqueued, before the
post returns, on the queue :data:`DOUBLE_TEXT_QUEUE`, partitioned by session with one ticket in
flight per session. So:

- **nothing is lost**: the ticket is a row in DBOS's system database from the moment the post
  returns; a worker killed at any point has its tickets recovered like any workflow;
- **order is kept**: a session's tickets run one at a time, oldest first (DBOS dequeues a
  partition in the order its workflows were enqueued);
- **the wait is not a held thread**: a ticket waits for the run in flight in recorded steps of at
  most :data:`WAIT_SLICE_SECONDS`, so a run parked on a human for days costs a step now and then.

A ticket does what its policy says, in recorded steps, then starts the run that carries the message
through the ordinary start protocol (:mod:`.starting`):

=============  ===================================================================================
``enqueue``    wait until the session is idle, then start the next turn with the message
``interrupt``  set the run's durable interrupt flag, wait until it stopped (``interrupted``, its
               transcript kept), then resume the session with the message
``rollback``   abort the run it replaces, then start a ``retry`` run from where that run began
               (its input and everything it produced dropped, its custom state restored) with the
               message; a replaced run that is no longer the session's latest: as ``enqueue``
``steer``      send the message to the run in flight (:mod:`.steering`), wait until that run ends,
               and, if the run never took it, start the next turn with it as ``enqueue`` would
=============  ===================================================================================

A session that is ``interrupted`` when a ticket's turn comes is resumed with the message; one that
``failed`` is not continued (a failed turn needs a ``retry``): the ticket ends with that error.

Runs are started from a thread of their own (:func:`_outside_workflow`): a run is a root workflow
whose id is its session's turn, and DBOS starts a workflow inside a step of another only as its
child. Each start is idempotent (a keyed request, or a continuation recognised by the run it
continues), so a step executed again after a crash finds the run it started instead of starting two.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from dbos import DBOS, SetEnqueueOptions, SetWorkflowID, WorkflowHandle
from pydantic import BaseModel, ConfigDict

from helix_dbos.double_text import DoubleTextPolicy, DoubleTextReceipt
from helix_dbos.errors import AgentAlreadyRunningError, HelixError, RunNotFinishedError
from helix_dbos.runtime import services
from helix_dbos.runtime.handle import AgentExecutionHandle
from helix_dbos.runtime.ids import keyed_request_key, workflow_id_for
from helix_dbos.runtime.outcomes import await_outcome
from helix_dbos.runtime.steering import STEER_TOPIC, STEERED_EVENT, SteerMessage
from helix_dbos.session import AgentInput
from helix_dbos.store.base import RunRecord

if TYPE_CHECKING:
    from helix_dbos.agent import AgentConfig, AgentHooks
    from helix_dbos.runtime.control import RunController
    from helix_dbos.runtime.services import RuntimeServices
    from helix_dbos.runtime.starting import HandleFactory, RunStarter

DOUBLE_TEXT_QUEUE = "helix-double-text"
DOUBLE_TEXT_WORKFLOW_NAME = "helix_dbos.double_text"
WAIT_SLICE_SECONDS = 30.0
"""The longest one recorded wait of a ticket for the run in flight (then it looks again)."""
POLLING_INTERVAL_SEC = 0.25
"""How often each process polls the tickets' queue. DBOS's queue thread polls every registered
queue whether or not it has work (a partitioned queue: a few statements and transactions a poll),
so this is a constant cost of every process, busy or idle; at 20 ms it was about an eighth of a
helix-dbos process's CPU under load (docs/scaling.md, "Capacity"). A ticket waits for the run in
flight anyway; a quarter of a second more before its first step is the price."""
_TICKET_MARK = "-dt-"

T = TypeVar("T")


class DoubleTextTicket(BaseModel):
    """A message waiting for its turn on a session: the ticket workflow's input."""

    model_config = ConfigDict(extra="forbid")

    ticket_id: str
    session_id: str
    agent_name: str
    policy: DoubleTextPolicy
    input: dict[str, Any]
    """The posted :class:`AgentInput` (JSON)."""
    replaces_run_id: str
    """The run in flight when the message was posted (what ``interrupt`` and ``rollback`` stop)."""
    idempotency_key: str | None = None
    """The post's key: the ticket's run is started under it, so a repeat of the post finds that run."""


class TicketOutcome(BaseModel):
    """How a ticket ended: the run that carries its message, or why none does."""

    model_config = ConfigDict(extra="forbid")

    ticket_id: str
    how: Literal["started", "steered", "refused"]
    run_id: str | None = None
    error: str | None = None


def ticket_id_for(session_id: str, idempotency_key: str | None) -> str:
    """The ticket's workflow id: from the request's idempotency key (a repeat finds the same ticket), else new."""
    return f"{session_id}{_TICKET_MARK}{idempotency_key or uuid.uuid4().hex}"


@DBOS.workflow(name=DOUBLE_TEXT_WORKFLOW_NAME)
def double_text_workflow(ticket: dict[str, Any]) -> dict[str, Any]:
    """Deliver one double-texted message (the body lives elsewhere: workflow source is versioned)."""
    return deliver(DoubleTextTicket.model_validate(ticket)).model_dump(mode="json")


class DoubleTexting:
    """Turns a message that met a run in flight into a ticket, and delivers tickets (in their workflow)."""

    def __init__(
        self, runtime: RuntimeServices, starter: RunStarter, control: RunController, handle: HandleFactory
    ) -> None:
        self._starter = starter
        self._control = control
        self._store = runtime.store
        self._registry = runtime.registry
        self._handle = handle
        self._queue_registered = False
        self._lock = threading.Lock()

    # -- posting (any process) ---------------------------------------------------------------------------
    def defer(
        self,
        agent: AgentConfig,
        session_id: str,
        parsed: AgentInput,
        policy: DoubleTextPolicy,
        idempotency_key: str | None,
        hooks: AgentHooks | None,
    ) -> AgentExecutionHandle:
        """Write the message's ticket (durable before this returns); a handle on the run that will carry it."""
        session = self._store.load_session(session_id)
        current = self._store.get_current_run(session_id)
        if session is None or current is None:  # pragma: no cover - the caller met a run in flight
            raise AgentAlreadyRunningError(session_id, "unknown")
        ahead = self._tickets_in_line(session_id)
        ticket = DoubleTextTicket(
            ticket_id=ticket_id_for(session_id, idempotency_key),
            session_id=session_id,
            agent_name=agent.name,
            policy=policy,
            input=parsed.model_dump(mode="json", exclude_none=True),
            replaces_run_id=current.run_id,
            idempotency_key=idempotency_key,
        )
        self._enqueue(ticket)
        if policy == "steer" and not ahead and agent.double_text == "steer":
            run, receipt = (
                current,
                DoubleTextReceipt(policy=policy, status="steering", run_id=current.run_id, ticket_id=ticket.ticket_id),
            )
        else:
            run_id = workflow_id_for(session_id, session.turn + len(ahead) + 1)
            run = RunRecord(
                run_id=run_id, workflow_id=run_id, session_id=session_id, turn=0, status="running", started_at=0
            )
            receipt = DoubleTextReceipt(
                policy=policy, status="queued", run_id=run_id, position=len(ahead) + 1, ticket_id=ticket.ticket_id
            )
        handle = self._handle(run, agent.name, hooks)
        handle.double_text = receipt
        return handle

    def wait_for_ticket(self, ticket_id: str, timeout_seconds: float | None = None) -> TicketOutcome:
        """Block until the ticket has started its message's run (or refused it); how it ended.

        Raises :class:`RunNotFinishedError` when ``timeout_seconds`` pass first.
        """
        handle: WorkflowHandle[dict[str, Any]] = DBOS.retrieve_workflow(ticket_id)
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        while deadline is not None and handle.get_status().status in ("PENDING", "ENQUEUED"):
            if time.monotonic() > deadline:
                raise RunNotFinishedError(ticket_id, timeout_seconds or 0)
            time.sleep(0.05)
        return TicketOutcome.model_validate(handle.get_result())

    def _tickets_in_line(self, session_id: str) -> list[str]:
        statuses = ["ENQUEUED", "PENDING"]
        prefix = f"{session_id}{_TICKET_MARK}"
        found = DBOS.list_workflows(
            workflow_id_prefix=prefix,
            status=statuses,
            name=DOUBLE_TEXT_WORKFLOW_NAME,
            load_input=False,
            load_output=False,
        )
        return [w.workflow_id for w in found]

    def register_queue(self) -> None:
        """Declare the tickets' queue in DBOS's queue table (needs a launched DBOS); once per process.

        :func:`helix_dbos.launch` declares it at start: DBOS's queue thread looks for new queues once
        a second, so a queue first declared by a post would make that post's ticket wait for it.
        """
        with self._lock:
            if not self._queue_registered:
                DBOS.register_queue(
                    DOUBLE_TEXT_QUEUE, partition_concurrency=1, polling_interval_sec=POLLING_INTERVAL_SEC
                )
                self._queue_registered = True

    def _enqueue(self, ticket: DoubleTextTicket) -> None:
        """Enqueue the ticket in its session's partition (a second enqueue of the same id is a no-op)."""
        self.register_queue()
        with SetWorkflowID(ticket.ticket_id), SetEnqueueOptions(queue_partition_key=ticket.session_id):
            DBOS.enqueue_workflow(DOUBLE_TEXT_QUEUE, double_text_workflow, ticket.model_dump(mode="json"))

    # -- delivering (in the ticket's workflow, through recorded steps) -----------------------------------
    def steer_target(self, ticket: DoubleTextTicket) -> str | None:
        """The workflow of the run to steer: the session's run in flight, when its agent listens."""
        agent = self._registry.get(ticket.agent_name)
        session = self._store.load_session(ticket.session_id)
        run = self._store.get_current_run(ticket.session_id)
        if agent is None or agent.double_text != "steer" or session is None or run is None:
            return None
        return run.workflow_id if session.status == "active" and run.status == "running" else None

    def steer_taken(self, ticket_id: str, workflow_id: str) -> bool:
        """Wait (one slice) for the steered run to end; whether it took the message by then."""
        with contextlib.suppress(RunNotFinishedError):
            await_outcome(self._store, workflow_id, WAIT_SLICE_SECONDS)
        taken = DBOS.get_event(workflow_id, STEERED_EVENT, timeout_seconds=0)
        return isinstance(taken, list) and ticket_id in taken

    def interrupt(self, ticket: DoubleTextTicket) -> None:
        """Ask the replaced run to stop at its next step boundary (nothing when it already ended)."""
        run = self._store.get_current_run(ticket.session_id)
        if run is not None and run.run_id == ticket.replaces_run_id and run.status == "running":
            self._control.interrupt(ticket.session_id, "double text")

    def rollback(self, ticket: DoubleTextTicket) -> str | None:
        """Abort the replaced run and start the message in its place; ``None`` when it is no longer the latest.

        A replaced run that ended before the ticket's turn came keeps its record, and its turn is
        dropped all the same: the user replaced that message.
        """
        current = self._store.get_current_run(ticket.session_id)
        if current is None:
            return None
        if current.mode == "retry" and current.previous_run_id == ticket.replaces_run_id:
            return current.run_id  # started by an earlier execution of this step
        if current.run_id != ticket.replaces_run_id:
            return None
        session = self._store.load_session(ticket.session_id)
        if session is not None and session.status == "active":
            with contextlib.suppress(HelixError):  # it may have ended meanwhile: the turn is dropped all the same
                self._control.abort(ticket.session_id, "rolled back by a double text")
        start = next((c for c in self._checkpoints_of(current) if c.step_count == 0), None)
        session = self._store.load_session(ticket.session_id)
        assert session is not None
        handle = self._starter.start_next_run(
            session,
            mode="retry",
            message=AgentInput.model_validate(ticket.input).message,
            truncate_to=current.start_sequence,
            reset_state=None if start is None else start.state.custom_state,
        )
        return handle.run_id

    def _checkpoints_of(self, run: RunRecord) -> list[Any]:
        page = self._store.list_checkpoints(run.session_id, offset=0, limit=1000)
        ids = [m.id for m in page.items]
        found = [self._store.get_checkpoint(i) for i in ids]
        return [c for c in found if c is not None and c.state.run_id == run.run_id]

    def try_start(self, ticket: DoubleTextTicket) -> TicketOutcome | None:
        """Start the message's run when the session is idle; ``None`` while a run is still in flight."""
        session = self._store.load_session(ticket.session_id)
        current = self._store.get_current_run(ticket.session_id)
        if session is None or current is None:
            return TicketOutcome(ticket_id=ticket.ticket_id, how="refused", error="the session is gone")
        mine = current.request_key == keyed_request_key(ticket.idempotency_key or ticket.ticket_id) or (
            ticket.policy in ("interrupt", "rollback")
            and current.mode != "execute"
            and current.previous_run_id == ticket.replaces_run_id
        )
        if mine:  # an earlier execution of this step started it
            return TicketOutcome(ticket_id=ticket.ticket_id, how="started", run_id=current.run_id)
        if session.status == "active":
            return None
        message = AgentInput.model_validate(ticket.input)
        try:
            if session.status == "interrupted":
                handle = self._starter.resume(ticket.agent_name, ticket.session_id, message.message)
            elif session.status == "completed":
                handle = self._starter.execute(
                    ticket.agent_name,
                    message,
                    session_id=ticket.session_id,
                    idempotency_key=ticket.idempotency_key or ticket.ticket_id,
                    double_text="reject",  # this is the ticket's own start: never a ticket again
                )
            else:
                error = f"the session's last run ended {session.status}; the message was not run"
                return TicketOutcome(ticket_id=ticket.ticket_id, how="refused", error=error)
        except AgentAlreadyRunningError:
            return None
        except HelixError as exc:
            return TicketOutcome(ticket_id=ticket.ticket_id, how="refused", error=str(exc))
        return TicketOutcome(ticket_id=ticket.ticket_id, how="started", run_id=handle.run_id)

    def wait_until_idle(self, session_id: str) -> None:
        """Wait (one slice) until the session has no run in flight."""
        deadline = time.monotonic() + WAIT_SLICE_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            session = self._store.load_session(session_id)
            if session is None or session.status != "active":
                return
            run = self._store.get_current_run(session_id)
            if run is not None and run.status == "running":
                with contextlib.suppress(RunNotFinishedError):
                    await_outcome(self._store, run.workflow_id, min(left, 5.0))
                time.sleep(0.01)  # the outcome is published just after the session's status is written
            else:  # parked on a human: the session stays active without a workflow to wait on
                time.sleep(min(left, 0.5))


def deliver(ticket: DoubleTextTicket) -> TicketOutcome:
    """The ticket workflow's body: the policy's steps, then the start of the message's run."""
    texting = _texting()
    if ticket.policy == "steer":
        target = _step("steer_target", texting.steer_target, ticket)
        if target is not None:
            DBOS.send(
                target,
                SteerMessage(ticket_id=ticket.ticket_id, message=ticket.input["message"]).model_dump(),
                STEER_TOPIC,
            )
            while True:
                taken = _step("steer_taken", texting.steer_taken, ticket.ticket_id, target)
                if taken:
                    return TicketOutcome(ticket_id=ticket.ticket_id, how="steered", run_id=target)
                if not _step("steer_running", _still_running, target):
                    break
    elif ticket.policy == "interrupt":
        _step("interrupt", texting.interrupt, ticket)
    elif ticket.policy == "rollback":
        run_id = _step("rollback", texting.rollback, ticket)
        if run_id is not None:
            return TicketOutcome(ticket_id=ticket.ticket_id, how="started", run_id=run_id)
    while True:
        started = _step("start", lambda t: _dump(texting.try_start(t)), ticket)
        if started is not None:
            return TicketOutcome.model_validate(started)
        _step("wait", texting.wait_until_idle, ticket.session_id)


def _still_running(workflow_id: str) -> bool:
    status = DBOS.get_workflow_status(workflow_id)
    return status is not None and status.status in ("PENDING", "ENQUEUED")


def _dump(outcome: TicketOutcome | None) -> dict[str, Any] | None:
    return None if outcome is None else outcome.model_dump(mode="json")


def _texting() -> DoubleTexting:
    texting = services.current().double_text
    if texting is None:  # pragma: no cover - the executor installs it
        raise HelixError("No double-text delivery is installed in this process", code="framework_internal_error")
    return texting


def _step(name: str, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` as the recorded step ``helix.double_text.{name}``, on a thread outside any workflow."""
    return DBOS.run_step({"name": f"helix.double_text.{name}"}, _outside_workflow, fn, *args)


def _outside_workflow(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a fresh thread, where DBOS sees no workflow: a run it starts is a root workflow."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # re-raised in the step's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="helix-double-text", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


__all__ = [
    "DOUBLE_TEXT_QUEUE",
    "DOUBLE_TEXT_WORKFLOW_NAME",
    "POLLING_INTERVAL_SEC",
    "DoubleTextTicket",
    "DoubleTexting",
    "TicketOutcome",
    "deliver",
    "double_text_workflow",
    "ticket_id_for",
]
