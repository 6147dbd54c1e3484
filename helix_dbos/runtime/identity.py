"""Which executor id a process runs as: never one that a live process holds.

DBOS recovers the ``PENDING`` workflows of an executor id when a process with that id launches:
that is how a killed worker's runs finish when it comes back. The same rule makes two *live*
processes with one id dangerous: the second one's launch re-runs the first one's runs in flight
while the first is still running them, so steps run twice at once and their stream chunks are
stored twice. Every process started without an id of its own (``helix-dbos demo``, ``serve``,
``worker``, ``launch()``) used to be ``local``.

So an id is *claimed* before DBOS launches, in the worker row that heartbeats already keep
(``helix_workers``), with a compare-and-set:

- **No id given** (no ``executor_id``, ``HELIX_EXECUTOR_ID`` or ``DBOS__VMID``): the first id of the
  family ``local``, ``local-2``, ``local-3``, ... that no live process holds. A process that crashed
  and is started again gets an id back whose holder died without releasing it (ids held by dead
  processes on this machine come first, its own among them), so DBOS recovers those runs at once;
  only then the first id that is free.
- **An id given**: it is claimed if free; held by a live process, the launch refuses with
  :class:`~helix_dbos.errors.ExecutorIdInUseError` (one line naming the holder) rather than guess.

Whether a holder is live: on this machine, whether its process still runs
(:mod:`helix_dbos.store.process`: pid, boot id and start time, a zombie counts as dead), so a
killed demo run again at once recovers its run; on another machine, whether its heartbeat (every
second while it runs) is younger than :data:`LIVE_HEARTBEAT_SECONDS`. A clean shutdown releases
the id (``pid`` 0). The same rule makes ``helix-dbos recover`` refuse a live executor's id unless
forced.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Literal

from helix_dbos._clock import now_ms
from helix_dbos.errors import ExecutorIdInUseError
from helix_dbos.store.base import WorkerRecord, WorkerRegistry
from helix_dbos.store.process import ProcessIdentity, ProcessState, process_state

DEFAULT_EXECUTOR_ID = "local"
"""The family of ids a process takes when it is given none: ``local``, ``local-2``, ..."""

LIVE_HEARTBEAT_SECONDS = 30.0
"""A holder whose process this one cannot see (another machine, another pid namespace) is live while its
heartbeat (written every second) is younger than this: the takeover threshold's default, so that what
this process calls dead is what the takeover of dead workers calls dead."""

MAX_FAMILY_SIZE = 1000
"""How many ids of one family are tried before giving up (a guard, not a limit anyone meets)."""

HolderState = Literal["free", "mine", "live"]


def holder_state(row: WorkerRecord, me: ProcessIdentity, *, now: int, live_heartbeat_ms: int) -> HolderState:
    """Whether ``row``'s id is free, held by this very process (an earlier launch in it), or live elsewhere."""
    if row.pid <= 0:
        return "free"  # released by a clean shutdown
    if is_this_process(row, me):
        return "mine"
    state = process_state(row.pid, row.process_token) if row.hostname == me.hostname else ProcessState.UNKNOWN
    if state is ProcessState.UNKNOWN:  # not a process this one can see: its heartbeat tells
        return "live" if now - row.heartbeat_at < live_heartbeat_ms else "free"
    return "live" if state is ProcessState.ALIVE else "free"


def is_this_process(row: WorkerRecord, me: ProcessIdentity) -> bool:
    """Whether ``row`` was written by this very process (an earlier launch in it)."""
    return row.hostname == me.hostname and row.pid == me.pid and row.process_token == me.token


def describe_holder(row: WorkerRecord, *, now: int) -> str:
    """``pid 123 on host h, heartbeat 0.4 s ago``: enough for an operator to find the process."""
    return f"pid {row.pid} on host {row.hostname}, heartbeat {max(0, now - row.heartbeat_at) / 1000:.1f} s ago"


def family(base: str) -> itertools.chain[str]:
    """``base``, ``base-2``, ``base-3``, ...: the ids a process given none tries in order."""
    return itertools.chain([base], (f"{base}-{n}" for n in range(2, MAX_FAMILY_SIZE + 1)))


def _family_order(rows: Iterable[WorkerRecord], me: ProcessIdentity, base: str) -> itertools.chain[str]:
    """The family's ids left by dead processes on this machine first (their runs wait), then all in order."""
    members = set(itertools.islice(family(base), MAX_FAMILY_SIZE))
    orphaned = sorted(
        (
            row
            for row in rows
            if row.executor_id in members
            and row.pid > 0
            and row.hostname == me.hostname
            and not is_this_process(row, me)
            and process_state(row.pid, row.process_token) is ProcessState.DEAD
        ),
        key=lambda row: row.heartbeat_at,
    )
    return itertools.chain((row.executor_id for row in orphaned), family(base))


def claim_executor_id(
    registry: WorkerRegistry,
    *,
    app_version: str,
    requested: str | None = None,
    base: str = DEFAULT_EXECUTOR_ID,
    live_heartbeat_seconds: float = LIVE_HEARTBEAT_SECONDS,
    clock: Callable[[], int] = now_ms,
) -> str:
    """Claim an executor id for this process and return it (see the module docstring).

    ``requested``: the id this process was told to use; it is claimed or refused. ``None``: the
    first free id of the ``base`` family.
    """
    me = ProcessIdentity.current()
    live_ms = int(live_heartbeat_seconds * 1000)
    rows = {r.executor_id: r for r in registry.list_workers()}  # one read; again only after a lost claim
    candidates = [requested] if requested is not None else _family_order(rows.values(), me, base)
    for candidate in candidates:
        for _ in range(5):  # a lost compare-and-set means another process just moved: read again
            row = rows.get(candidate)
            now = clock()
            state = "free" if row is None else holder_state(row, me, now=now, live_heartbeat_ms=live_ms)
            if state == "live":
                assert row is not None
                if requested is not None:
                    raise ExecutorIdInUseError(
                        candidate,
                        describe_holder(row, now=now),
                        "give each live process its own executor id (--executor-id, HELIX_EXECUTOR_ID), "
                        "or stop that process first",
                    )
                break  # the next id of the family
            if registry.claim(candidate, app_version=app_version, now_ms=now, replacing=row):
                return candidate
            rows = {r.executor_id: r for r in registry.list_workers()}
    if requested is not None:  # it kept changing hands while this process tried to take it
        raise ExecutorIdInUseError(requested, "another process claimed it at the same time", "try again")
    raise ExecutorIdInUseError(base, f"all {MAX_FAMILY_SIZE} ids of its family are held", "give this process an id")


def refuse_live_executors(
    registry: WorkerRegistry, executor_ids: list[str], *, live_heartbeat_seconds: float = LIVE_HEARTBEAT_SECONDS
) -> None:
    """Raise :class:`~helix_dbos.errors.ExecutorIdInUseError` if a live process holds one of ``executor_ids``.

    ``helix-dbos recover`` puts an executor's runs back on the queue for any process to run: done
    to a live executor, its runs in flight would run twice at once.
    """
    me = ProcessIdentity.current()
    now = now_ms()
    rows = {r.executor_id: r for r in registry.list_workers()}
    for executor_id in executor_ids:
        row = rows.get(executor_id)
        if row is None:
            continue
        if holder_state(row, me, now=now, live_heartbeat_ms=int(live_heartbeat_seconds * 1000)) != "free":
            raise ExecutorIdInUseError(
                executor_id,
                describe_holder(row, now=now),
                "its runs in flight would run twice; recover only executors that are gone (--force to do it anyway)",
            )


__all__ = [
    "DEFAULT_EXECUTOR_ID",
    "LIVE_HEARTBEAT_SECONDS",
    "claim_executor_id",
    "describe_holder",
    "family",
    "holder_state",
    "is_this_process",
    "refuse_live_executors",
]
