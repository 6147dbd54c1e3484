"""Agent schedules on the embedded SQLite default: DBOS keeps and polls its schedules there too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from helix_dbos import AgentSchedule
from tests.schedules.conftest import Scheduled


def test_a_schedule_fires_and_backfills_on_sqlite(sqlite_scheduled: Scheduled) -> None:
    book = sqlite_scheduled.executor.schedules
    book.create(AgentSchedule(name="lite", agent="reporter", cron="* * * * * *", message="Report."))
    sqlite_scheduled.wait_fires("lite", 2)
    fires = sqlite_scheduled.settle("lite")
    live = {f.fire_id for f in fires}
    end = datetime.now(UTC)
    result = book.backfill("lite", end - timedelta(seconds=20), end)
    assert set(result.already_fired) == live & {f.fire_id for f in result.fires}
    assert len(result.enqueued) + len(result.already_fired) in (19, 20)
    fires = sqlite_scheduled.wait_fires("lite", len(live | set(result.enqueued)))
    store = sqlite_scheduled.executor.store
    for fire in fires:
        assert fire.outcome is not None and fire.outcome.status == "started"
        assert len(store.list_runs(fire.outcome.session_id)) == 1
