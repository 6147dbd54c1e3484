"""Runs recorded by an older helix-dbos finish under today's code (the upgrade a worker gets mid-run).

``tests/replay_fixtures/pre_capability_seam/`` is the embedded database that helix-dbos at
``becaf5b`` (before the capability seam, the declared backend and the executor-id claim) left when
its process was SIGKILLed inside a tool call, with a second run parked on an approval; it was made
by ``scripts/record_replay_fixture.py`` (its docstring says how). Today's code opens a copy,
migrates it, recovers the killed run from its recorded model step (DBOS checks every recorded
step's name against what the code asks for next, so a reshaped loop that asked in another order
would fail here), and continues the parked one when the approval comes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helix_dbos import launch, shutdown
from helix_dbos.runtime.handle import AgentExecutionHandle
from helix_dbos.runtime.launch import recovering_runs
from tests.replay_fixtures.agents import AGENTS, EFFECTS_ENV, FixtureModels

FIXTURE = Path(__file__).resolve().parents[1] / "replay_fixtures" / "pre_capability_seam"


def test_a_run_killed_mid_tool_and_a_parked_run_recorded_before_the_seam_finish_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".helix").mkdir()
    for name in ("helix.sqlite", "helix-dbos.sqlite"):
        shutil.copyfile(FIXTURE / name, tmp_path / ".helix" / name)
    effects = tmp_path / "effects.txt"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(EFFECTS_ENV, str(effects))
    monkeypatch.delenv("HELIX_DATABASE_URL", raising=False)
    monkeypatch.delenv("HELIX_EXECUTOR_ID", raising=False)
    executor = launch(agents=AGENTS, llm_adapter=FixtureModels())
    try:
        assert executor.executor_id == "local"  # the dead recorder's id: its run is this process's to finish
        recovering = {run.run_id: run for run in recovering_runs(executor)}
        assert set(recovering) == {"fixture-killed-turn-1"}, recovering
        killed = AgentExecutionHandle(executor, recovering["fixture-killed-turn-1"], "fixture-notes").result()
        assert killed.status == "completed" and killed.output == "done", killed
        state = executor.get_state("fixture-killed")
        assert [m.role for m in state.messages] == ["user", "assistant", "tool", "assistant"]

        (pending,) = executor.list_pending_tool_calls("fixture-parked")
        assert pending.tool_name == "publish" and pending.status == "pending"
        continuation = executor.submit_tool_result(
            "fixture-parked", {"kind": "approval-response", "tool_call_id": pending.tool_call_id, "approved": True}
        )
        assert continuation is not None and continuation.run_id == "fixture-parked-turn-2"
        parked = continuation.result()
        assert parked.status == "completed" and parked.output == "done", parked
    finally:
        shutdown(executor)
    assert effects.read_text().splitlines() == ["save_note recorded", "publish report"]
