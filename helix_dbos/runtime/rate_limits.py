"""Provider rate limits shared by every worker of a deployment, enforced by DBOS queues.

A provider's quota (requests per minute, calls in flight) belongs to the whole deployment, not to
one process: three workers each keeping their own count would send three times the quota. So the
count lives where every worker already meets, in DBOS's system database. Before a model call whose
model a :class:`ProviderRateLimit` matches, the run enqueues a tiny *admission* workflow on the
limit's DBOS queue and waits, durably, until DBOS dequeues it: the dequeue is the admission. The
admission workflow then *holds its slot* (it stays ``PENDING``, which is what DBOS's
``global_concurrency`` counts across every executor) until the run releases it after the call:

- ``requests`` per ``period_s``, ``exact`` (the default): queue ``helix-rate-{name}`` admits at
  that rate (DBOS's rolling limiter), and each request claims a send slot in the database as it
  leaves, in the HTTP client's transport (:mod:`helix_dbos.runtime.send_gate`,
  :mod:`helix_dbos.llm.send_slot`): the count is made where the provider makes it, at the send,
  and each claim is counted until a period after its sender reported the bytes left, so a late
  send is counted where it arrived.
- ``requests`` per ``period_s``, ``strict``: queue ``helix-rate-{name}``,
  ``global_concurrency=requests``; the slot is held until the release, **then ``period_s``
  more**. Every call is inside the hold of its own slot from before it is sent until ``period_s``
  after it returned, so any window of ``period_s`` at the provider meets at most ``requests``
  calls, however late a loaded process sends a call after its admission.
- ``concurrency``: queue ``helix-conc-{name}``, ``global_concurrency=concurrency``; held until
  the release.

Why not DBOS's ``limiter`` (``limit`` dequeues per rolling period): it counts *admissions*, and a
call reaches the provider some time after its admission (the wake-up, the previous iteration's
commit, the client's own work: tens of milliseconds on an idle machine, over a second on a loaded
one, and seconds for a process's first call, which loads the provider's SDK). Calls admitted in
consecutive windows then meet in one window at the provider, which answers ``429``. Holding the
slot past the call trades that lateness for throughput: a slot is busy for the period plus the
call's own latency (``scripts/bench_rate_limits.py`` prints both figures).

Why an admission workflow rather than running the model call itself as the queued child: the call
is the ``{agent}.llm`` step, which also commits the previous iteration, reads the interrupt flag in
the same transaction and streams deltas to the run's stream. Moved into a child workflow it would
run on whichever worker dequeues it, with arguments that must be serialisable (an agent's tools
are functions). The admission keeps that step exactly as it is.

Every wait is recorded in the parent: the enqueue (the admission's id, ``{workflow id}-rate-{step}``
or ``-conc-{step}``, is deterministic), the admitted event (``DBOS.get_event``, woken by
LISTEN/NOTIFY on PostgreSQL) and the release (``DBOS.send``). A replay returns them from the record
and takes the recorded ``{agent}.llm`` output: nothing calls the model twice, and nothing enqueues
a second admission. A run starts taking these steps behind the named replay patch
:data:`RATE_LIMITS_PATCH`, asked only by runs whose model a limit matches. A run that never
releases (cancelled mid-call, or failed) frees its slots after ``hold_timeout_s``.

A long wait for admission holds no thread: the run parks, and is resumed once admitted
(:mod:`helix_dbos.runtime.admission`).

A limit is as much part of the deployment's code as a step name: a run admitted through a limit
replays its admission steps, so keep the limit configured (same ``match``) while runs that used it
may still be recovered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from typing import Any, ClassVar, Literal

from dbos import DBOS
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sqlalchemy.engine import Engine

from helix_dbos.capability import RunCapability, RunEnd
from helix_dbos.errors import HelixError
from helix_dbos.llm.send_slot import NO_SLOT, SendSlot, SendSlotClaim, send_slots
from helix_dbos.runtime.admission import (
    ADMISSION_WORKFLOW_NAME,
    ADMITTED_EVENT,
    CAPABILITY_NAME,
    RATE_PARK_PATCH,
    RELEASE_TOPIC,
    RELEASED,
    RESUME_POLLING_INTERVAL_S,
    RESUME_QUEUE,
    Admission,
    Park,
    admission_id,
    admission_workflow,
    admit,
)
from helix_dbos.runtime.send_gate import SendWindow, send_gate_for
from helix_dbos.step_result import StepResult
from helix_dbos.store.capabilities import SharedEngine

RATE_EXACT_PATCH = "helix-rate-exact"
"""The DBOS replay patch under which an ``exact`` limit's call is admitted by a rolling count and
gated at the send (no held slot, no release step). Asked once per run, right after
:data:`RATE_LIMITS_PATCH`, only when the matching limit is ``exact``: a run recorded under a
``strict`` limit answers ``False`` and keeps holding its slot and sending its release."""
RATE_LIMITS_PATCH = "helix-rate-limits"
"""The DBOS replay patch under which a run's model calls wait for admission on a limit's queue.

Asked once per run, at its first model call that a configured limit matches; runs recorded before
it (or before their deployment had a limit for their model) replay without admissions.
"""
QUEUE_PREFIX = "helix-rate-"
CONCURRENCY_QUEUE_PREFIX = "helix-conc-"
DEFAULT_POLLING_INTERVAL_S = 0.02
DEFAULT_HOLD_TIMEOUT_S = 600.0
DEFAULT_SEND_MARGIN_S = 0.05
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")
    return slug or "all"


class ProviderRateLimit(BaseModel):
    """How many model calls a deployment may make to the models whose name starts with ``match``.

    ``requests`` calls may start in any rolling window of ``period_s`` seconds, and at most
    ``concurrency`` may be in flight, across every worker sharing the database. At least one of
    the two is required. When several limits match a model, the longest ``match`` applies.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    match: str = Field(min_length=1)
    """A prefix of the model string (``"openai/"``, ``"anthropic/claude-3-5-haiku"``)."""
    requests: int | None = Field(default=None, ge=1)
    """Calls allowed to start per ``period_s`` (``None``: no rate cap)."""
    period_s: float = Field(default=1.0, gt=0, le=86_400)
    """The rolling window of ``requests``, in seconds."""
    concurrency: int | None = Field(default=None, ge=1)
    """Calls allowed in flight at once (``None``: no cap)."""
    name: str | None = Field(default=None, pattern=_NAME.pattern)
    """Names the limit (its queue is ``helix-rate-{name}``); defaults to ``match`` made name-safe."""
    hold_timeout_s: float = Field(default=DEFAULT_HOLD_TIMEOUT_S, gt=0)
    """How long a slot stays taken by a run that never releases it (cancelled or failed mid-call)."""
    polling_interval_s: float = Field(default=DEFAULT_POLLING_INTERVAL_S, gt=0, le=60)
    """How often each worker looks for admissions to grant (the floor of an admission's latency)."""
    mode: Literal["exact", "strict", "rolling"] = "exact"
    """How ``requests`` are counted. ``exact`` (the default): the queue admits at the limit's rate
    (a rolling count of admissions), and each request claims a slot in the database as it leaves,
    in the HTTP client's transport (:mod:`helix_dbos.runtime.send_gate`); the claim counts until
    ``period_s`` after its sender reported the bytes left (at least ``send_margin_s`` after the
    claim), so the provider never sees more than ``requests`` in a period however late a send
    leaves, at about ``requests`` per ``period_s + send_margin_s``. An adapter that does not claim
    at the send (a scripted one, a custom client) is claimed for around its whole call.
    ``strict``: a call's slot is held from its admission until ``period_s`` after the call
    returned; as safe, but a slot is busy for the period plus the call's latency. Runs recorded
    under it (so every run recorded with no ``mode`` before ``exact`` became the default) replay
    as ``strict``, see :data:`RATE_EXACT_PATCH`. ``rolling``: DBOS's limiter counts admissions in a rolling period
    (the full rate), and a call sent late after its admission can meet the next period's calls
    at the provider."""

    send_margin_s: float = Field(default=DEFAULT_SEND_MARGIN_S, ge=0, le=60)
    """``exact`` mode: the least time a claim counts for after its stamp, before the ``period_s``
    (the allowance for the provider's clock and the network). A send that leaves later is counted
    from when it left; one on time keeps the rate at ``requests`` per ``period_s + send_margin_s``."""

    @model_validator(mode="after")
    def _needs_a_cap(self) -> ProviderRateLimit:
        if self.requests is None and self.concurrency is None:
            raise ValueError(f"rate limit {self.match!r} needs requests (per period_s) or concurrency")
        return self

    @property
    def limit_name(self) -> str:
        """The limit's name: :attr:`name`, or :attr:`match` made name-safe."""
        return self.name or _slug(self.match)[:80]

    @property
    def queue_name(self) -> str:
        """The DBOS queue of this limit's ``requests`` (each slot held for the call plus ``period_s``)."""
        return QUEUE_PREFIX + self.limit_name

    @property
    def concurrency_queue_name(self) -> str:
        """The DBOS queue of this limit's ``concurrency`` (each slot held for the call)."""
        return CONCURRENCY_QUEUE_PREFIX + self.limit_name

    @property
    def gated_at_send(self) -> bool:
        """Whether each send claims a slot of the exact gate (an ``exact`` limit of ``requests``)."""
        return self.mode == "exact" and self.requests is not None

    @property
    def send_window_s(self) -> float:
        """The window the exact gate counts ``requests`` in: ``period_s + send_margin_s``."""
        return self.period_s + self.send_margin_s

    def send_window(self) -> SendWindow:
        """What the exact gate allows: ``requests`` arrivals per ``period_s`` (:mod:`helix_dbos.runtime.send_gate`).

        Each claim counts at least ``send_margin_s`` past its stamp, and longer when its send left later.
        """
        return SendWindow(self.limit_name, self.requests or 1, self.period_s, self.send_margin_s)

    def admissions(self, *, held: bool | None = None) -> list[Admission]:
        """The slots a call takes, in the order it takes them: requests first, then concurrency.

        ``held``: whether the requests slot is held until ``period_s`` after the call (``strict``);
        by default as :attr:`mode` says. An ``exact`` run recorded before :data:`RATE_EXACT_PATCH`
        replays held slots.
        """
        found: list[Admission] = []
        if self.requests is not None:
            if held if held is not None else self.mode == "strict":
                found.append(Admission("rate", self.queue_name, self.requests, self.period_s))
            else:
                found.append(self._rolling_admission())
        if self.concurrency is not None:
            found.append(Admission("conc", self.concurrency_queue_name, self.concurrency, 0.0))
        return found

    def _rolling_admission(self) -> Admission:
        """``rolling``: ``requests`` per ``period_s``. ``exact``: the gate's rate, counted over two windows.

        A rolling limiter reuses a slot only at its first poll after the slot's window ends, so
        each window loses a polling delay (tens of milliseconds on a loaded machine, window after
        window). Counted over twice the gate's window (twice the calls), ``exact`` admits at the
        gate's long-run rate, so no backlog builds up at the gate, and loses half as much; the
        burst it lets through (at most ``requests`` more) waits at the gate, which keeps it exact.
        """
        if not self.gated_at_send:
            return Admission("rate", self.queue_name, self.requests or 1, self.period_s, rolling=True)
        return Admission("rate", self.queue_name, 2 * (self.requests or 1), 2 * self.send_window_s, rolling=True)

    def matches(self, model: str) -> bool:
        """Whether calls to ``model`` count against this limit."""
        return model.startswith(self.match)

    @classmethod
    def parse(cls, spec: str) -> ProviderRateLimit:
        """One limit from ``MATCH:key=value,...``, for the command line and ``HELIX_RATE_LIMITS``.

        Keys: ``requests`` (``N`` or ``N/SECONDS``), ``period`` (seconds), ``concurrency``,
        ``name``, ``mode`` (``exact``, ``strict`` or ``rolling``), ``margin`` (the send margin, seconds),
        ``hold`` (seconds) and ``poll`` (seconds); e.g.
        ``openai/:requests=500/60,concurrency=20``.
        """
        head, sep, tail = spec.strip().rpartition(":")
        match, rest = (head, tail) if sep and "=" in tail else (spec.strip(), "")
        values: dict[str, Any] = {"match": match}
        keys = {"period": "period_s", "concurrency": "concurrency", "name": "name", "mode": "mode"}
        keys |= {"hold": "hold_timeout_s", "poll": "polling_interval_s", "margin": "send_margin_s"}
        for item in filter(None, (part.strip() for part in rest.split(","))):
            key, eq, value = item.partition("=")
            if not eq:
                raise _bad(spec, f"option {item!r} must look like key=value")
            if key == "requests":
                count, slash, period = value.partition("/")
                values["requests"] = count
                if slash:
                    values["period_s"] = period
            elif key in keys:
                values[keys[key]] = value
            else:
                known = "requests, period, concurrency, name, mode, margin, hold, poll"
                raise _bad(spec, f"unknown option {key!r} ({known})")
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise _bad(spec, f"{where + ': ' if where else ''}{first['msg']}") from None


def _bad(spec: str, message: str) -> HelixError:
    return HelixError(f"bad rate limit {spec!r}: {message}", code="validation_error", retryable=False)


def parse_rate_limits(spec: str) -> list[ProviderRateLimit]:
    """Limits from one line, separated by ``;`` (the form of ``HELIX_RATE_LIMITS``)."""
    return check_rate_limits(ProviderRateLimit.parse(part) for part in spec.split(";") if part.strip())


def check_rate_limits(limits: Iterable[ProviderRateLimit]) -> list[ProviderRateLimit]:
    """The limits as a list, refusing two with one name or one ``match`` (``validation_error``)."""
    found = list(limits)
    for what, values in (("name", [f.limit_name for f in found]), ("match", [f.match for f in found])):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise HelixError(f"two rate limits share the {what} {twice[0]!r}", code="validation_error", retryable=False)
    return found


def limit_for(limits: Sequence[ProviderRateLimit], model: str) -> ProviderRateLimit | None:
    """The limit calls to ``model`` count against: the longest matching prefix, or ``None``."""
    matching = [limit for limit in limits if limit.matches(model)]
    return max(matching, key=lambda limit: len(limit.match)) if matching else None


def register_rate_limits(limits: Sequence[ProviderRateLimit]) -> None:
    """Declare each limit's queue in DBOS's queue table (needs a launched DBOS; idempotent).

    Every process that registers a limit writes the same row; DBOS's workers pick a queue up
    within a second of its registration and then dequeue it in every process that listens to all
    queues (``launch`` does, unless ``execute=False``). With any limit, also the queue parked runs are
    resumed on once admitted (:data:`~helix_dbos.runtime.admission.RESUME_QUEUE`).
    """
    if limits:
        DBOS.register_queue(RESUME_QUEUE, polling_interval_sec=RESUME_POLLING_INTERVAL_S, on_conflict="always_update")
    for limit in limits:
        for admission in limit.admissions():
            DBOS.register_queue(
                admission.queue_name,
                global_concurrency=None if admission.rolling else admission.slots,
                limiter={"limit": admission.slots, "period": admission.after_release_s} if admission.rolling else None,
                polling_interval_sec=limit.polling_interval_s,
                on_conflict="always_update",
            )


def _store_engine(run: Any) -> Engine | None:
    """The engine of the run's store when it has one (PostgreSQL: the gate's claims are shared there)."""
    store = run.rt.store
    return store.engine if isinstance(store, SharedEngine) else None


def rate_limit_waits(lister: Any, run_ids: Sequence[str]) -> dict[str, str]:
    """The runs of ``run_ids`` whose model call waits for admission now, with the limit it waits for.

    ``lister`` is ``DBOS`` or a ``DBOSClient``: what the inspector and ``helix-dbos sessions show``
    read to say "waiting for rate limit <name>". A run waits when its admission workflow is still
    ``ENQUEUED`` on a limit's queue (the run's workflow id is its run id).
    """
    if not run_ids:
        return {}
    found = lister.list_workflows(
        name=ADMISSION_WORKFLOW_NAME,
        status="ENQUEUED",
        workflow_id_prefix=[f"{run_id}-" for run_id in run_ids],
        load_input=False,
        load_output=False,
    )
    waits: dict[str, str] = {}
    for status in found:
        run_id = next((r for r in run_ids if str(status.workflow_id).startswith(f"{r}-")), None)
        queue = str(status.queue_name or "")
        name = queue.removeprefix(QUEUE_PREFIX).removeprefix(CONCURRENCY_QUEUE_PREFIX)
        if run_id is not None:
            waits[run_id] = name
    return waits


class RateLimitCapability(RunCapability):
    """Admits a run's model calls through the limit their model matches (none: no steps at all)."""

    name: ClassVar[str] = CAPABILITY_NAME
    replay_patches: ClassVar[tuple[str, ...]] = (RATE_LIMITS_PATCH, RATE_EXACT_PATCH, RATE_PARK_PATCH)

    def __init__(self, limits: Sequence[ProviderRateLimit] = ()) -> None:
        self.limits = tuple(check_rate_limits(limits))
        self._patched: bool | None = None
        self._exact_patched: bool | None = None
        self._park_patched: bool | None = None
        self._held: list[str] = []
        self._send_slots = ExitStack()

    def for_run(self) -> RateLimitCapability:
        """A fresh instance per run: the slots it holds are the run's own."""
        return RateLimitCapability(self.limits)

    def before_model_call(self, run: Any) -> None:
        """Wait for admission on the matching limit's queue (the last thing before the model call)."""
        limit = limit_for(self.limits, run.agent.llm_config.model)
        if limit is None:
            return
        if self._patched is None:
            self._patched = bool(DBOS.patch(RATE_LIMITS_PATCH))
        if not self._patched:
            return
        exact = False
        if limit.gated_at_send:
            if self._exact_patched is None:
                self._exact_patched = bool(DBOS.patch(RATE_EXACT_PATCH))
            exact = self._exact_patched
        if self._park_patched is None:
            self._park_patched = bool(DBOS.patch(RATE_PARK_PATCH))
        park = Park(run.agent.name, run.rt.hot_window_seconds) if self._park_patched else None
        workflow_id = str(DBOS.workflow_id)
        for admission in limit.admissions(held=not exact if limit.gated_at_send else None):
            ticket = admission_id(workflow_id, admission.kind, run.step)
            admit(
                admission, ticket, run.step, limit_name=limit.limit_name, hold_timeout_s=limit.hold_timeout_s, park=park
            )
            if admission.held:
                self._held.append(ticket)
        if exact:
            self._send_slots.enter_context(send_slots(self._claim_for(_store_engine(run))))

    def _claim_for(self, engine: Engine | None) -> SendSlotClaim:
        """The claim the model step's sends make: a slot of the exact limit their model matches."""
        gate = send_gate_for(engine)

        async def claim(model: str) -> SendSlot:
            limit = limit_for(self.limits, model)
            if limit is not None and limit.gated_at_send:
                return await gate.claim(limit.send_window())
            return NO_SLOT

        return claim

    def after_model_call(self, run: Any, result: StepResult) -> None:
        """Free the concurrency slot as soon as the call is over."""
        self._release()

    def on_finish(self, run: Any, end: RunEnd) -> None:
        """A run that ends right after its model call (interrupted) frees its slot too."""
        self._release()

    def _release(self) -> None:
        self._send_slots.close()
        held, self._held = self._held, []
        for ticket in held:
            DBOS.send(ticket, RELEASED, RELEASE_TOPIC)  # not None: a None message reads as a timeout


__all__ = [
    "ADMISSION_WORKFLOW_NAME",
    "ADMITTED_EVENT",
    "CONCURRENCY_QUEUE_PREFIX",
    "QUEUE_PREFIX",
    "RATE_EXACT_PATCH",
    "RATE_LIMITS_PATCH",
    "RATE_PARK_PATCH",
    "RELEASED",
    "RELEASE_TOPIC",
    "Admission",
    "ProviderRateLimit",
    "RateLimitCapability",
    "admission_id",
    "admission_workflow",
    "check_rate_limits",
    "limit_for",
    "parse_rate_limits",
    "rate_limit_waits",
    "register_rate_limits",
]
