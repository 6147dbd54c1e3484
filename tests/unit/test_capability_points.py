"""Which capabilities the loop calls at a point: only the ones that do something there.

The loop works the list out once per run (:meth:`RunContext.capabilities_at`); skipping a
capability that inherits a point's no-op must change nothing, and the list must follow the
capability set of the run it was worked out for.
"""

from __future__ import annotations

from typing import Any

from helix_dbos.capability import RunCapability, RunEnd, capabilities_at
from helix_dbos.orchestration.step_processor import plan_step_processing
from helix_dbos.step_result import ParsedSubAgentCall, ParsedToolCall, ToolCallsStepResult


class Quiet(RunCapability):
    name = "quiet"


class Counting(RunCapability):
    name = "counting"

    def before_model_call(self, run: Any) -> None:
        return None

    def between_steps(self, run: Any) -> RunEnd | None:
        return None


class CountingMore(Counting):
    """Inherits ``before_model_call`` from a class that overrides it: still a capability that acts there."""

    name = "counting-more"


def test_only_capabilities_whose_class_overrides_the_point_are_listed_in_order() -> None:
    quiet, counting, more = Quiet(), Counting(), CountingMore()
    caps = [counting, quiet, more]
    assert capabilities_at(caps, "before_model_call") == (counting, more)
    assert capabilities_at(caps, "between_steps") == (counting, more)
    assert capabilities_at(caps, "after_model_call") == ()
    assert capabilities_at([], "before_model_call") == ()


def test_a_point_set_on_the_instance_counts() -> None:
    quiet = Quiet()
    calls: list[int] = []
    quiet.before_model_call = lambda run: calls.append(run)  # type: ignore[method-assign]
    assert capabilities_at([quiet, Quiet()], "before_model_call") == (quiet,)


def _step(calls: list[ParsedToolCall], subs: list[ParsedSubAgentCall] | None = None) -> ToolCallsStepResult:
    return ToolCallsStepResult(tool_calls=calls, sub_agent_calls=subs or [], stop_reason="tool_use")


def test_calls_whose_arguments_are_an_object_are_planned_as_they_are() -> None:
    call = ParsedToolCall(id="c1", name="noop", arguments={"i": 1})
    sub = ParsedSubAgentCall(id="s1", agent_type="helper", input={"task": "x"})
    plan = plan_step_processing(_step([call], [sub]))
    assert plan.pending_tool_calls[0] is call  # no copy: it would be equal
    assert plan.pending_sub_agent_calls[0] is sub


def test_calls_whose_arguments_are_not_an_object_are_planned_as_coerced_copies() -> None:
    text = ParsedToolCall(id="c1", name="noop", arguments='{"i": 1}')
    bad = ParsedToolCall(id="c2", name="noop", arguments="[1]")
    defaulted = ParsedToolCall(id="c3", name="noop")  # no arguments given: the copy marks them set, as before
    plan = plan_step_processing(_step([text, bad, defaulted]))
    planned = plan.pending_tool_calls
    assert [c.arguments for c in planned] == [{"i": 1}, {}, {}]
    assert text.arguments == '{"i": 1}' and bad.arguments == "[1]"  # the step result is left as it was
    assert planned[2] is not defaulted and "arguments" in planned[2].model_fields_set
    assert plan.assistant_message_plan is not None
    assert plan.assistant_message_plan.tool_calls == planned
