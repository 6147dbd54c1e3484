"""The admission of a rate-limited model call: the workflow on a limit's queue, and the run's wait for it.

A run enqueues an admission workflow on its limit's DBOS queue before the model call and waits
until DBOS dequeues it (:mod:`helix_dbos.runtime.rate_limits` has the limits, their queues and
why). This module is that handshake: the admission workflow and the run's wait.

**A long wait holds no thread.** A run waits for its admission in ``DBOS.get_event`` for the hot
window (``hot_window_seconds``, as a human wait does), then *parks*: it records a
``{agent}.rate_limit.park`` step and its thread leaves the workflow
(:class:`~helix_dbos.errors.RunParked`, which DBOS does not record: the run stays ``PENDING``).
The process it parked in watches its admission (:class:`AdmissionWatch`: a coroutine on a loop
of its own, no thread per run) and, once admitted, resumes it (``DBOS.resume_workflow`` on
:data:`RESUME_QUEUE`); the resumed execution replays its recorded steps, the park included, finds
the admission and makes the call. The admission workflow knows nothing of it: a run admitted
within its hot window costs what it did before. A process that dies with parked runs recovers
them when it starts again (or a live worker takes them over), like any run in flight: each
replays to its park, is still not admitted, leaves again and is watched there. Behind
:data:`RATE_PARK_PATCH`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from dbos import DBOS, SetWorkflowID

from helix_dbos.errors import RunParked
from helix_dbos.observability import run_observer as observe
from helix_dbos.runtime import step_names
from helix_dbos.runtime.aio import BackgroundLoop, background_loop
from helix_dbos.runtime.step_outputs import RateParkStepOutput

ADMISSION_WORKFLOW_NAME = "helix_dbos.model_admission"
"""The DBOS workflow a run enqueues on a limit's queue before a model call (a persisted name)."""
ADMITTED_EVENT = "helix.admitted"
"""Set by the admission workflow as soon as it is dequeued: the run waiting on it may call the model."""
RELEASE_TOPIC = "helix.release"
"""What a run sends its admission workflow after the model call, to free a concurrency slot."""
RELEASED = "released"
"""The release's message. Runs recorded before it sent ``None``, which the admission could not tell
from its hold timing out (its output said ``released: false`` either way); the message is not part
of what a replay compares, so only the admission's output changes."""
RATE_PARK_PATCH = "helix-rate-park"
"""The DBOS replay patch under which a run waits for admission for the hot window, then parks.

Asked once per run, at its first model call that a limit matches, after the limits' own patches.
A run recorded before it waits in ``DBOS.get_event`` until admitted, holding its thread."""

RESUME_QUEUE = "helix-resumed"
"""The DBOS queue a parked run is resumed on once admitted: no cap, polled every :data:`RESUME_POLLING_INTERVAL_S`.

Not DBOS's internal queue, which is polled once a second: a run resumed with a ``concurrency``
slot holds that slot until its call is over, so a second's wait for its dispatch is a second of
the provider's capacity lost per parked call. Not the run queue either (see the module's doc)."""
RESUME_POLLING_INTERVAL_S = 0.2
"""How often each worker polls :data:`RESUME_QUEUE`. Not as often as a limit's queue (0.02 s): DBOS
polls a registered queue whether or not anything waits on it, and at 0.02 s the idle polls held
three workers sharing a limit of 10 a second below the 9 a second ``tests/scale/test_rate_limits.py``
asks of 200 runs (8.86-8.97 in three runs; 0.2 s passed twice, as before the queue). A park
follows a wait of the hot window (a minute by default), beside which 0.2 s is little."""
_log = logging.getLogger("helix_dbos.rate_limits")

CAPABILITY_NAME = "rate_limit"
"""The rate-limit capability's name: the park step is ``{agent}.rate_limit.park``."""
_WAIT_SLICE_S = 300.0


@dataclass(frozen=True)
class Admission:
    """One slot a call takes: on which queue, how many there are, how long it stays taken after the call."""

    kind: str
    """``rate`` or ``conc``: part of the admission workflow's id."""
    queue_name: str
    slots: int
    after_release_s: float
    rolling: bool = False
    """Counted by DBOS's limiter (``slots`` per ``after_release_s``) instead of held slots."""

    @property
    def held(self) -> bool:
        """Whether the call holds this slot until it releases it (not so for a rolling count)."""
        return not self.rolling


def admission_id(workflow_id: str, kind: str, step: int) -> str:
    """The admission workflow of a run's model call ``step``: the same id on every replay."""
    return f"{workflow_id}-{kind}-{step}"


@DBOS.workflow(name=ADMISSION_WORKFLOW_NAME)
async def admission_workflow(limit_name: str, hold_timeout_s: float, after_release_s: float) -> dict[str, Any]:
    """Dequeued = admitted: tell the waiting run, hold the slot until it releases it, then ``after_release_s`` more.

    Async so that a held slot holds no thread: DBOS runs a dequeued coroutine workflow as a task on
    its event loop, and ``recv_async`` / ``sleep_async`` wait there (a sync admission held one of
    DBOS's executor threads per slot for the whole call, and for ``period_s`` after it under
    ``strict``). The steps it records (``set_event``, ``recv`` with its timeout sleep, ``sleep``) are
    the sync version's, under the same function ids, so an admission recorded by the sync version
    replays under this one.
    """
    await DBOS.set_event_async(ADMITTED_EVENT, limit_name)
    if hold_timeout_s <= 0:  # a rolling count: the dequeue was all there was to it
        return {"limit": limit_name, "released": False}
    released = await DBOS.recv_async(RELEASE_TOPIC, timeout_seconds=hold_timeout_s)
    if after_release_s > 0:
        await DBOS.sleep_async(after_release_s)
    return {"limit": limit_name, "released": released is not None}


def admit(
    admission: Admission, ticket: str, step: int, *, limit_name: str, hold_timeout_s: float, park: Park | None = None
) -> None:
    """Enqueue the admission on its queue and wait (durably) until DBOS dequeues it.

    ``hold_timeout_s``: the limit's (how long a held slot waits for its release). With ``park``
    (:data:`RATE_PARK_PATCH`), wait for the hot window, then park (the thread leaves:
    :class:`~helix_dbos.errors.RunParked`); a resumed execution replays up to here and finds the
    admission at once.
    """
    held_for_s = hold_timeout_s if admission.held else 0.0
    after_release_s = admission.after_release_s if admission.held else 0.0
    with SetWorkflowID(ticket):
        DBOS.enqueue_workflow(admission.queue_name, admission_workflow, limit_name, held_for_s, after_release_s)
    if park is not None:
        with observe.current().rate_limit_wait(limit_name, step):
            if DBOS.get_event(ticket, ADMITTED_EVENT, timeout_seconds=park.hot_window_s) is not None:
                return
        park(ticket, held=admission.held)  # raises RunParked in the execution that parks
        park.leave_unless_admitted(ticket, held=admission.held)  # a replay of the park goes on once admitted
    with observe.current().rate_limit_wait(limit_name, step):
        while DBOS.get_event(ticket, ADMITTED_EVENT, timeout_seconds=_WAIT_SLICE_S) is None:
            pass  # each slice is one recorded wait; a long backlog costs a row per slice, no spinning


class Park:
    """Parks a run's wait for admission: a recorded step, the thread's exit, a watch that resumes it.

    The step's body runs only in the execution that parks (a replay returns its recorded output
    without calling it), so whether it ran here tells this execution to leave and a resumed one
    to go on, without anything unrecorded deciding what the run records.
    """

    def __init__(self, agent_name: str, hot_window_s: float) -> None:
        self.agent_name = agent_name
        self.hot_window_s = hot_window_s

    def __call__(self, ticket: str, *, held: bool) -> None:
        parked_here: list[str] = []

        def park_step(ticket: str) -> RateParkStepOutput:
            parked_here.append(ticket)
            return {"ticket": ticket}

        DBOS.run_step({"name": step_names.capability(self.agent_name, CAPABILITY_NAME, "park")}, park_step, ticket)
        if parked_here:
            admission_watch.watch(ticket, str(DBOS.workflow_id), held=held)
            raise RunParked(f"waiting for admission {ticket}: parked until admitted")

    def leave_unless_admitted(self, ticket: str, *, held: bool) -> None:
        """A replay past the park: go on when admitted (resumed once admitted), else leave again.

        An execution that replays a recorded park was either resumed by a watch (admitted) or
        recovered at a process's start, or taken over, while still waiting: that one leaves again,
        watched in this process. The look is not recorded (it runs outside the workflow's context),
        and admission is for good, so a later look sees at least as much: the look never changes
        what the run records, only whether this thread keeps it.
        """
        if contextvars.Context().run(DBOS.get_event, ticket, ADMITTED_EVENT, 0) is None:
            admission_watch.watch(ticket, str(DBOS.workflow_id), held=held)
            raise RunParked(f"waiting for admission {ticket}: still parked")


class AdmissionWatch:
    """Resumes this process's parked runs once admitted: a coroutine each, on one loop, no thread each.

    The watch runs outside any workflow (a fresh context), so its reads are not recorded in the
    run. A run found ended meanwhile (aborted: cancelled) is not resumed, and a slot its
    admission holds for it is released at once rather than after the limit's ``hold_timeout_s``.
    A watch that fails (the database is away) tries again a second later; one lost with its
    process is the next execution's to start again (see the module's doc).
    """

    def __init__(self) -> None:
        self._watching: dict[str, Future[None]] = {}
        self._lock = threading.Lock()
        self._loop = BackgroundLoop("helix-dbos-admissions")
        """A loop of its own: DBOS's async calls make their loop's default executor DBOS's thread pool,
        which ``shutdown()`` stops while the shared background loop still needs one."""

    def watch(self, ticket: str, run_workflow_id: str, *, held: bool) -> None:
        """Resume ``run_workflow_id`` once ``ticket`` (its admission) has been dequeued."""
        with self._lock:
            if ticket in self._watching:
                return
            coro = self._resume_when_admitted(ticket, run_workflow_id, held)
            future = contextvars.Context().run(asyncio.run_coroutine_threadsafe, coro, self._loop.loop)
            self._watching[ticket] = future
        future.add_done_callback(lambda _: self._forget(ticket))

    def _forget(self, ticket: str) -> None:
        with self._lock:
            self._watching.pop(ticket, None)

    async def _resume_when_admitted(self, ticket: str, run_workflow_id: str, held: bool) -> None:
        while True:
            try:
                while await DBOS.get_event_async(ticket, ADMITTED_EVENT, timeout_seconds=_WAIT_SLICE_S) is None:
                    pass
                status = await DBOS.get_workflow_status_async(run_workflow_id)
                if status is not None and status.status == "PENDING":
                    await DBOS.resume_workflow_async(run_workflow_id, queue_name=RESUME_QUEUE)
                elif held and (status is None or status.status not in ("ENQUEUED", "PENDING")):
                    await DBOS.send_async(ticket, RELEASED, RELEASE_TOPIC)  # it will not make the call
                return
            except Exception as exc:  # the database restarting, DBOS relaunching: look again
                _log.warning("watching admission %s of parked run %s: %r", ticket, run_workflow_id, exc)
                await asyncio.sleep(1.0)

    async def close(self) -> None:
        """Stop watching (``shutdown()``): the runs stay parked, and the next start recovers them."""
        with self._lock:
            watching, self._watching = list(self._watching.values()), {}
        for future in watching:
            future.cancel()


admission_watch = AdmissionWatch()
"""This process's watch over its parked runs' admissions."""
background_loop.add_closer(admission_watch.close)


__all__ = [
    "ADMISSION_WORKFLOW_NAME",
    "ADMITTED_EVENT",
    "CAPABILITY_NAME",
    "RATE_PARK_PATCH",
    "RELEASED",
    "RELEASE_TOPIC",
    "RESUME_POLLING_INTERVAL_S",
    "RESUME_QUEUE",
    "Admission",
    "AdmissionWatch",
    "Park",
    "admission_id",
    "admission_watch",
    "admission_workflow",
    "admit",
]
