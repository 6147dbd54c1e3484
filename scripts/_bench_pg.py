"""Server-side accounting for the benchmarks: committed transactions, write transactions, statements.

Why three counters:

- ``pg_stat_database.xact_commit`` is the figure the issue quotes (every committed transaction,
  read-only ones included), but PostgreSQL 15 flushes a backend's counters to shared memory at most
  once a second while it is busy, and an idle backend's last counts only ten seconds later
  (``PGSTAT_IDLE_INTERVAL``). ``pg_stat_force_next_flush()`` only reaches the calling backend and
  ``pg_stat_clear_snapshot()`` only drops the caller's cached copy, so neither makes another
  backend's counts visible: an exact figure needs the pools to sit idle past that interval
  (``flush_wait``) before each snapshot. The process's background transactions (DBOS's queue and
  scheduler pollers, helix-dbos's sweeper: about ten a second) are measured once while idle and
  subtracted at that rate over each interval, the measured block and its wait.
- the transaction-id horizon (``pg_snapshot_xmax(pg_current_snapshot())``) counts transactions that
  wrote something; it is exact and immediate, so it needs no wait (reading it assigns no id).
- ``pg_stat_statements`` (when the server preloads it) gives the per-statement breakdown, immediately.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

PRELOAD_OPTIONS = (
    "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_utility=on"
    " -c pg_stat_statements.track_planning=on"
)
"""Server options that turn on pg_stat_statements, planning included (added to the throw-away cluster's).

Planning is counted because it is server CPU a statement costs outside its execution: a prepared
statement PostgreSQL plans afresh on every execution shows as many plans as calls."""

FLUSH_WAIT_SECONDS = 11.0
"""Idle time after which every backend has flushed its statistics (PGSTAT_IDLE_INTERVAL is 10 s)."""


@dataclass(frozen=True)
class Snapshot:
    """The counters at one moment."""

    xact_commit: int
    xid_horizon: int
    taken_at: float
    rows_written: int = 0
    """Rows inserted, updated and deleted (``pg_stat_database``; flushed like ``xact_commit``)."""


@dataclass(frozen=True)
class StatementCount:
    """One statement's totals in ``pg_stat_statements`` since the last reset."""

    query: str
    calls: int
    exec_ms: float
    plans: int = 0
    """How often the server planned it (0 unless the server tracks planning)."""
    plan_ms: float = 0.0


@dataclass(frozen=True)
class Rates:
    """Background rates measured while idle, per second."""

    xact_commit: float
    rows_written: float


class ServerCounters:
    """Reads the counters of one database over a private AUTOCOMMIT connection."""

    def __init__(self, url: str, flush_wait: float = FLUSH_WAIT_SECONDS) -> None:
        self.engine = sa.create_engine(_psycopg(url), isolation_level="AUTOCOMMIT", poolclass=NullPool)
        self.flush_wait = flush_wait
        self.statements = self._try_statements()
        self.background_rate = 0.0
        """Committed transactions per second while idle (background threads, our own reads)."""

    def _try_statements(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.exec_driver_sql("SELECT pg_stat_statements_reset()")
            return True
        except sa.exc.DBAPIError:
            return False

    def snapshot(self, wait: bool = True) -> Snapshot:
        """The counters, after an idle wait (``wait``) so every backend has flushed its counts."""
        if wait and self.flush_wait > 0:
            time.sleep(self.flush_wait)
        with self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
            row = conn.exec_driver_sql(
                "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),"
                " pg_snapshot_xmax(pg_current_snapshot())::text::bigint,"
                " (SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database"
                "  WHERE datname = current_database())"
            ).one()
        return Snapshot(int(row[0]), int(row[1]), time.perf_counter(), int(row[2]))

    def calibrate(self) -> float:
        """Measure the idle rate of committed transactions (per second); later deltas subtract it."""
        first = self.snapshot()
        second = self.snapshot()
        self.background_rate = (second.xact_commit - first.xact_commit) / (second.taken_at - first.taken_at)
        return self.background_rate

    def commits_between(self, before: Snapshot, after: Snapshot) -> float:
        """Committed transactions between two waited snapshots, less the background over that time."""
        return after.xact_commit - before.xact_commit - self.background_rate * (after.taken_at - before.taken_at)

    @staticmethod
    def rate_between(before: Snapshot, after: Snapshot) -> Rates:
        """Committed transactions and written rows per second between two idle snapshots."""
        seconds = max(after.taken_at - before.taken_at, 1e-9)
        return Rates(
            (after.xact_commit - before.xact_commit) / seconds, (after.rows_written - before.rows_written) / seconds
        )

    @staticmethod
    def delta(before: Snapshot, after: Snapshot, background_per_s: float, field: str = "xact_commit") -> float:
        """``field``'s growth between two waited snapshots, less ``background_per_s`` over that time."""
        grown = float(getattr(after, field) - getattr(before, field))
        return grown - background_per_s * (after.taken_at - before.taken_at)

    def reset_statements(self) -> None:
        if self.statements:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("SELECT pg_stat_statements_reset()")

    def statement_counts(self) -> list[StatementCount]:
        """Every statement since the last reset, most called first."""
        if not self.statements:
            return []
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT query, calls, total_exec_time, plans, total_plan_time FROM pg_stat_statements s"
                " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()"
                " ORDER BY calls DESC"
            ).all()
        return [StatementCount(str(r[0]), int(r[1]), float(r[2]), int(r[3]), float(r[4])) for r in rows]

    def close(self) -> None:
        self.engine.dispose()


class ServerCpu:
    """CPU seconds the PostgreSQL server has used: the postmaster and every process it has forked.

    Why: on one machine the client and the server share the cores, so runs per second follow the
    CPU a run costs on *both* sides; rows and statements a run writes show up here, not in the
    client's figure. Read from ``/proc``: the postmaster's own and reaped children's times
    (``cutime``/``cstime``, so a backend that exited is still counted) plus each live child's.
    ``None`` when the server is not on this machine or its data directory cannot be read.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.postmaster: int | None = None
        try:
            with engine.connect() as conn:
                data_dir = str(conn.exec_driver_sql("SHOW data_directory").scalar())
            self.postmaster = int((Path(data_dir) / "postmaster.pid").read_text().split()[0])
            self.seconds()
        except (sa.exc.DBAPIError, OSError, ValueError):
            self.postmaster = None

    def seconds(self) -> float | None:
        if self.postmaster is None:
            return None
        tick = os.sysconf("SC_CLK_TCK")
        total = sum(_stat_fields(self.postmaster)[11:15])  # utime stime cutime cstime
        for child in Path("/proc").iterdir():
            if not child.name.isdigit():
                continue
            try:
                fields = _stat_fields(int(child.name))
            except OSError:
                continue  # exited while we looked: its time is in the postmaster's cutime once reaped
            if fields[1] == self.postmaster:
                total += fields[11] + fields[12]
        return total / tick


def _stat_fields(pid: int) -> list[int]:
    """``/proc/<pid>/stat`` after the command name, as integers (index 1 is the parent's pid, 11-14 the times)."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    rest = raw[raw.rindex(")") + 2 :].split()
    return [int(x) if x.lstrip("-").isdigit() else 0 for x in rest]


def _psycopg(url: str) -> str:
    parsed = sa.engine.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)
