"""Runs on a DBOS queue: API processes enqueue, workers dequeue, DBOS enforces the limits.

Without a queue a run starts in the process that called ``execute`` (``DBOS.start_workflow``). With
a :class:`RunQueue`, the same run is *enqueued* under the same deterministic workflow id: nothing
else about the start changes (the store write, the ids, the handle, ``AgentAlreadyRunningError``),
and any process that listens to the queue runs it. DBOS keeps the queue in PostgreSQL and enforces
a global cap on runs in flight (``concurrency``), a per-process cap (``worker_concurrency``) and a
rate limit on starts (``limiter``), and orders a backlog by ``priority`` (lower first; a run
without one has priority 0 and goes first of all).

Why these choices:

- The queue's configuration lives in DBOS's ``queues`` table (``DBOS.register_queue``, after
  launch). Every process that uses the queue registers the same configuration; DBOS keeps one row.
- A process that must not run agents (``serve --no-execute``) tells DBOS, before launch, to listen
  to no queue (``DBOS.listen_queues([])``); it still enqueues.
- DBOS's queue thread *polls* (``polling_interval_sec``) and has no wake-up on enqueue, so the
  interval is the latency floor of a queued start: the default here is 20 ms rather than DBOS's
  1 s (see ``scripts/bench_queue.py`` for the measured cost).
- A HITL continuation keeps the priority of the run it continues (read from that run's DBOS
  status), so a parked high-priority conversation does not fall behind a backlog when answered.
- **Fair share between tenants**: every run is enqueued with its session's tenant as DBOS's
  ``queue_partition_key``. With ``tenant_concurrency`` set, the queue is registered with DBOS's
  ``partition_concurrency`` (DBOS 3.4 makes a queue partitioned when a ``partition_*`` limit is
  set; there is no separate flag), and each worker's poll visits every tenant with work waiting,
  in random order, taking at most ``tenant_concurrency`` runs in flight per tenant. One tenant's
  backlog of a hundred runs then cannot hold another tenant's run back by more than a poll, as
  long as the global ``concurrency`` leaves room for it (``tenant_concurrency`` below
  ``concurrency``). Without ``tenant_concurrency`` the key is recorded but DBOS dequeues in one
  order, as before. The partition key is an enqueue option: it is not an input or an output of
  any step, so recorded runs replay unchanged (``tests/scale/test_tenant_fair_share.py``).
- **A worker runs at most** :data:`DEFAULT_WORKER_CONCURRENCY` **queued runs at once** unless told
  otherwise. The agent workflow is a sync DBOS workflow: a run in flight holds one of DBOS's
  executor threads from its dequeue to its end, through its model calls and its waits for a
  provider's admission. Without a per-worker cap a burst of a thousand runs became a thousand
  threads in one process, all sharing its CPU (``scripts/bench_capacity.py --simultaneous``: 1,045
  threads, the median run 104 s over its 20 s ideal); with the cap the rest wait ``ENQUEUED`` in
  PostgreSQL (durably: any worker takes them, a crash loses none), at the same throughput (280
  threads, the median 67 s over). 200 is where the cap cost that load nothing on a 2-core machine
  (100 held it to 4.1 runs a second against 6.4). The cap is DBOS's ``worker_concurrency`` rather than
  DBOS's ``max_executor_threads``: that pool also runs the provider admissions, the child runs a
  parent waits on and DBOS's recovery, so capping it could leave every thread waiting for work
  that needs a thread. ``worker_concurrency=None`` (``worker_concurrency=none`` in a spec) lifts
  the cap. What a queued run's threads and connections add up to is in ``docs/scaling.md``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from dbos import DBOS, SetEnqueueOptions, SetWorkflowID
from pydantic import BaseModel, ConfigDict, Field, model_validator

from helix_dbos.errors import HelixError
from helix_dbos.tenancy import DEFAULT_TENANT

DEFAULT_QUEUE_NAME = "helix-runs"
DEFAULT_POLLING_INTERVAL_SEC = 0.02
DEFAULT_WORKER_CONCURRENCY = 200
"""Queued runs one worker process runs at once by default (each holds a DBOS executor thread)."""
MIN_PRIORITY = 1
MAX_PRIORITY = 2**31 - 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class RateLimit(BaseModel):
    """At most ``limit`` runs start in any rolling window of ``period_seconds`` (across all workers)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    limit: int = Field(ge=1)
    period_seconds: float = Field(gt=0)


class RunQueue(BaseModel):
    """Where runs go instead of starting locally, and the limits DBOS enforces on them.

    ``concurrency`` caps the runs in flight across every worker (``None``: no cap);
    ``worker_concurrency`` caps them per worker process (default :data:`DEFAULT_WORKER_CONCURRENCY`,
    the bound of a worker's threads; ``None``: no cap); ``limiter`` caps starts per period;
    ``polling_interval_sec`` is how often each worker looks for work (the floor of a queued start's
    latency, and one small query per worker per interval).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default=DEFAULT_QUEUE_NAME, pattern=_NAME.pattern)
    concurrency: int | None = Field(default=None, ge=1)
    worker_concurrency: int | None = Field(default=DEFAULT_WORKER_CONCURRENCY, ge=1)
    limiter: RateLimit | None = None
    polling_interval_sec: float = Field(default=DEFAULT_POLLING_INTERVAL_SEC, gt=0, le=60)
    tenant_concurrency: int | None = Field(default=None, ge=1)
    """Runs in flight per tenant across every worker (DBOS's ``partition_concurrency``); ``None``: no cap."""

    @model_validator(mode="after")
    def _tenant_share_fits(self) -> RunQueue:
        share, cap = self.tenant_concurrency, self.concurrency
        if share is not None and cap is not None and share > cap:
            raise ValueError("tenant_concurrency must not exceed concurrency")
        worker = self.worker_concurrency
        if "worker_concurrency" in self.model_fields_set and worker is not None and cap is not None and worker > cap:
            raise ValueError("worker_concurrency must not exceed concurrency")
        return self

    @property
    def worker_cap(self) -> int | None:
        """The runs one worker runs at once: ``worker_concurrency``, never more than ``concurrency``.

        The default per-worker cap gives way to a smaller global one (DBOS refuses a queue whose
        worker cap exceeds its global cap); one set explicitly above it is refused when built.
        """
        caps = [c for c in (self.worker_concurrency, self.concurrency) if c is not None]
        return min(caps) if self.worker_concurrency is not None and caps else None

    @classmethod
    def parse(cls, spec: str) -> RunQueue:
        """Build a queue from a one-line spec, for the CLI and environment variables.

        ``NAME[:key=value,...]`` with keys ``concurrency``, ``worker_concurrency``,
        ``tenant_concurrency``, ``limit`` (``N/SECONDS``) and ``poll`` (seconds), e.g.
        ``helix-runs:concurrency=8,tenant_concurrency=2,limit=100/60,poll=0.02``; a cap given as
        ``none`` is lifted (``worker_concurrency=none``).
        """
        name, _, rest = spec.strip().partition(":")
        values: dict[str, Any] = {"name": name or DEFAULT_QUEUE_NAME}
        for item in filter(None, (part.strip() for part in rest.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"queue option {item!r} must look like key=value")
            if key in ("concurrency", "worker_concurrency", "tenant_concurrency"):
                values[key] = None if value.strip().lower() == "none" else int(value)
            elif key == "limit":
                limit, slash, period = value.partition("/")
                if not slash:
                    raise ValueError(f"queue limit {value!r} must look like N/SECONDS")
                values["limiter"] = RateLimit(limit=int(limit), period_seconds=float(period))
            elif key == "poll":
                values["polling_interval_sec"] = float(value)
            else:
                raise ValueError(
                    f"unknown queue option {key!r} (concurrency, worker_concurrency, tenant_concurrency, limit, poll)"
                )
        return cls.model_validate(values)


def check_priority(priority: int | None) -> None:
    """Refuse a priority DBOS would refuse, before anything is written (``validation_error``)."""
    if priority is not None and not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise HelixError(
            f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY} (lower runs first), got {priority}",
            code="validation_error",
            retryable=False,
        )


def register_run_queue(queue: RunQueue) -> None:
    """Declare ``queue`` in DBOS's queue table (needs a launched DBOS); idempotent."""
    DBOS.register_queue(
        queue.name,
        global_concurrency=queue.concurrency,
        worker_concurrency=queue.worker_cap,
        limiter=({"limit": queue.limiter.limit, "period": queue.limiter.period_seconds} if queue.limiter else None),
        polling_interval_sec=queue.polling_interval_sec,
        partition_concurrency=queue.tenant_concurrency,
    )


def enqueue_run(
    queue: RunQueue,
    workflow_id: str,
    workflow: Callable[[dict[str, Any]], Any],
    request: dict[str, Any],
    priority: int | None,
    *,
    partition_key: str = DEFAULT_TENANT,
) -> None:
    """Enqueue the run's workflow under its deterministic id (a second enqueue of the id is a no-op).

    ``partition_key`` is the run's tenant: its share of the queue (module docstring).
    """
    with SetWorkflowID(workflow_id), SetEnqueueOptions(priority=priority, queue_partition_key=partition_key):
        DBOS.enqueue_workflow(queue.name, workflow, request)


def priority_of(workflow_id: str) -> int | None:
    """The priority a run was enqueued with (``None`` when unknown or never set)."""
    status = DBOS.get_workflow_status(workflow_id)
    priority = getattr(status, "priority", None) if status is not None else None
    return int(priority) if priority else None


class QueueStatus(BaseModel):
    """A snapshot of a run queue: what waits, what runs, and on which worker."""

    name: str
    enqueued: int
    """Runs waiting for a worker (the queue's depth)."""
    running: int
    """Runs dequeued and in flight, on every worker."""
    running_by_worker: dict[str, int]
    """In-flight runs per worker executor id."""
    concurrency: int | None = None
    worker_concurrency: int | None = None
    limiter: RateLimit | None = None
    polling_interval_sec: float | None = None
    tenant_concurrency: int | None = None
    tenant: str | None = None
    """The one tenant these counts are of (``None``: every tenant's runs)."""


def queue_status(lister: Any, queue: RunQueue, *, limit: int = 10_000, tenant: str | None = None) -> QueueStatus:
    """Count the queue's waiting and running runs; ``lister`` is ``DBOS`` or a ``DBOSClient``.

    Reads at most ``limit`` workflows (a status page must stay cheap on a huge backlog). With
    ``tenant``, only that tenant's runs (its queue partition) are counted.
    """
    found = lister.list_workflows(
        queue_name=queue.name,
        status=["ENQUEUED", "PENDING"],
        load_input=False,
        load_output=False,
        limit=limit,
    )
    if tenant is not None:
        found = [w for w in found if (w.queue_partition_key or DEFAULT_TENANT) == tenant]
    enqueued = sum(1 for w in found if w.status == "ENQUEUED")
    by_worker = Counter(str(w.executor_id) for w in found if w.status == "PENDING")
    return QueueStatus(
        name=queue.name,
        enqueued=enqueued,
        running=sum(by_worker.values()),
        running_by_worker=dict(sorted(by_worker.items())),
        concurrency=queue.concurrency,
        worker_concurrency=queue.worker_cap,
        limiter=queue.limiter,
        polling_interval_sec=queue.polling_interval_sec,
        tenant_concurrency=queue.tenant_concurrency,
        tenant=tenant,
    )


__all__ = [
    "DEFAULT_POLLING_INTERVAL_SEC",
    "DEFAULT_QUEUE_NAME",
    "DEFAULT_WORKER_CONCURRENCY",
    "QueueStatus",
    "RateLimit",
    "RunQueue",
    "check_priority",
    "enqueue_run",
    "priority_of",
    "queue_status",
    "register_run_queue",
]
