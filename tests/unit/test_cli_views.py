"""The CLI's pure views: per-step usage and the run timeline (no database, no process)."""

from __future__ import annotations

from helix_dbos.store.base import UsageRecord

MODEL = "openai/gpt-4o-mini"


def test_usage_rows_are_read_in_one_place() -> None:
    """The per-step figures come from ``usage_view.summarise`` alone (the seam for a usage summary)."""
    from helix_dbos.views.usage_view import summarise

    steps = summarise(
        [
            UsageRecord(kind="llm", name=MODEL, step=1, input_tokens=10, output_tokens=2),
            UsageRecord(kind="tool", name="lookup", step=1, value=4.5),
            UsageRecord(kind="llm", name="no-such/model", step=2, input_tokens=5, success=False),
        ]
    )
    assert steps[1].input_tokens == 10 and steps[1].cost_usd is not None and steps[1].cost_usd > 0
    assert [(t.name, t.duration_ms) for t in steps[1].tool_calls] == [("lookup", 4.5)]
    assert steps[2].cost_usd is None and steps[2].failed_llm_calls == 1  # unknown model: no price, no guess
    assert (steps[2].llm_calls, steps[2].input_tokens, steps[2].failed_input_tokens) == (0, 0, 5)  # kept apart


def test_a_step_shows_the_cost_recorded_with_its_call() -> None:
    """The price recorded when the call was made wins over today's cost map (history is not rewritten)."""
    from helix_dbos.views.usage_view import summarise

    steps = summarise(
        [
            UsageRecord(kind="llm", name=MODEL, step=1, input_tokens=10, success=False, cost_usd=0.5),
            UsageRecord(kind="llm", name=MODEL, step=1, input_tokens=10, output_tokens=2, cost_usd=0.25),
        ]
    )
    assert (steps[1].cost_usd, steps[1].input_tokens, steps[1].failed_input_tokens) == (0.25, 10, 10)


def test_a_forks_branch_checkpoint_is_no_step_of_its_first_run() -> None:
    """Pure: the timeline puts each checkpoint in the run in flight when it was written."""
    from helix_dbos.checkpoint import CheckpointMeta
    from helix_dbos.store.base import RunRecord
    from helix_dbos.views.timeline import build_timeline

    run = RunRecord(run_id="f-turn-1", session_id="f", turn=1, status="completed", started_at=2_000, workflow_id="w")
    branch = CheckpointMeta(id="cp-branch", session_id="f", step_count=3, timestamp=1_000, status="completed")
    step_0 = CheckpointMeta(id="cp-0", session_id="f", step_count=0, timestamp=2_010, status="running")
    step_1 = CheckpointMeta(id="cp-1", session_id="f", step_count=1, timestamp=2_500, status="completed")
    (timeline,) = build_timeline([run], [step_1, branch, step_0], {})
    assert [(s.checkpoint_id, s.duration_ms) for s in timeline.steps] == [("cp-0", 10), ("cp-1", 490)]
