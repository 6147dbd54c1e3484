"""The deadline sweep's own logic (``ChildDeadlines.sweep``), with the store stood in for.

What the sweep stops, against a real store and after a real SIGKILL, is in
``tests/runtime/test_nested_sub_agent_park*.py``; here only what it does when its read fails or a
stop fails: the workers' sweep goes on (parked calls, parents) and the next round tries again.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from helix_dbos.runtime import child_deadlines
from helix_dbos.runtime.child_deadlines import ChildDeadlines
from helix_dbos.session import SubSessionRef


def deadlines_over(children_past_deadline: Any) -> ChildDeadlines:
    rt = SimpleNamespace(store=SimpleNamespace(pending=SimpleNamespace(children_past_deadline=children_past_deadline)))
    return ChildDeadlines(rt)  # type: ignore[arg-type]


def test_a_failed_read_is_logged_and_stops_nothing(caplog: pytest.LogCaptureFixture) -> None:
    def refuse(now_ms: int) -> list[tuple[str, SubSessionRef]]:
        raise RuntimeError("database away")

    with caplog.at_level(logging.WARNING, logger="helix_dbos.runtime.child_deadlines"):
        assert deadlines_over(refuse).sweep() == []
    assert "database away" in caplog.text


def test_a_failed_stop_does_not_keep_the_others_from_theirs(monkeypatch: pytest.MonkeyPatch) -> None:
    refs = [
        ("p", SubSessionRef(sub_session_id=c, agent_type="a", parent_tool_call_id="t", started_at=10, deadline_ms=50))
        for c in ("broken", "fine")
    ]
    stops: list[tuple[str, int | None, str | None]] = []

    def stop(self: ChildDeadlines, due: Any) -> None:
        stops.append((due.session_id, due.timeout_ms, due.parent_session_id))
        if due.session_id == "broken":
            raise RuntimeError("cannot stop")

    monkeypatch.setattr(child_deadlines.ChildDeadlines, "_stop", stop)
    assert deadlines_over(lambda now_ms: refs).sweep() == ["fine"]
    assert stops == [("broken", 40, "p"), ("fine", 40, "p")]  # the timeout named is the tool's: 50 - 10
