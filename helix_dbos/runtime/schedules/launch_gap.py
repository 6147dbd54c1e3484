"""Fill the one fire time DBOS's catch-up at launch can drop.

When a process launches, DBOS's scheduler backfills each ``run_each`` schedule from its last fire
up to *now*, then starts the schedule's timer thread from a *later* now: a fire time that falls
between the two (the backfill's own duration, easily hundreds of milliseconds on a busy machine)
is neither backfilled nor fired. The restart test (``tests/schedules/test_schedule_restart.py``)
found such a hole in a 1-second schedule.

:class:`LaunchGapFiller` closes it from outside DBOS: once a schedule that existed at launch has
fired live in this process's era (its last fire is after the launch), it backfills the window from
just before the launch to that fire. Fire ids make this idempotent: every time DBOS did fire is a
no-op, and only the dropped one runs. It is a one-shot per schedule per launch, in a daemon thread
that gives up after ``give_up_after_seconds`` (a schedule that has not fired by then, e.g. an
hourly one, had a dropped fire only if a fire time fell in that sub-second window).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from helix_dbos.logger import std_logger
from helix_dbos.runtime.schedules.book import ScheduleBook

__all__ = ["LaunchGapFiller"]

_logger = std_logger("helix_dbos.schedules")
_BEFORE_LAUNCH = timedelta(seconds=2)


class LaunchGapFiller:
    """After a launch, backfill each catching-up schedule from just before the launch to its first live fire."""

    def __init__(
        self,
        book: ScheduleBook,
        launched_at: datetime,
        *,
        poll_seconds: float = 1.0,
        give_up_after_seconds: float = 600.0,
    ) -> None:
        self._book = book
        self._launched_at = launched_at
        self._poll_seconds = poll_seconds
        self._give_up_after_seconds = give_up_after_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending = {
            info.schedule.name
            for info in book.list()
            if info.status == "active" and info.schedule.missed_fires == "run_each" and info.last_fired_at
        }
        """The schedules DBOS caught up at this launch (active, ``run_each``, fired before)."""

    def start(self) -> None:
        """Watch in a daemon thread (nothing to do when no schedule was caught up)."""
        if self._pending:
            self._thread = threading.Thread(target=self._run, name="helix-schedule-gap", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop watching (at shutdown)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def fill_once(self) -> set[str]:
        """Backfill the schedules that have fired live since the launch; return those still waiting."""
        for name in sorted(self._pending):
            try:
                info = self._book.get(name)
            except Exception:  # deleted, or the database away: nothing to fill, or try again
                self._pending.discard(name)
                continue
            last = datetime.fromisoformat(info.last_fired_at) if info.last_fired_at else None
            if info.status != "active":
                self._pending.discard(name)
            elif last is not None and last > self._launched_at:
                result = self._book.backfill(name, self._launched_at - _BEFORE_LAUNCH, last)
                if result.enqueued:
                    dropped = {"schedule": name, "fires": result.enqueued}
                    _logger.info("[helix-dbos] filled fires dropped at launch", dropped)
                self._pending.discard(name)
        return set(self._pending)

    def _run(self) -> None:
        deadline = datetime.now(UTC) + timedelta(seconds=self._give_up_after_seconds)
        while self._pending and datetime.now(UTC) < deadline and not self._stop.wait(self._poll_seconds):
            try:
                self.fill_once()
            except Exception as exc:  # the database away: try again at the next poll
                _logger.warn("[helix-dbos] schedule gap check failed", {"error": type(exc).__name__})
