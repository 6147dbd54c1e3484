"""Step names are persisted by DBOS: runs in flight replay against them, so they never change."""

from __future__ import annotations

from helix_dbos.runtime import step_names


def test_every_step_name_is_byte_identical_to_the_recorded_contract() -> None:
    assert step_names.FAIL_RUN == "helix.fail_run"
    assert step_names.llm("writer") == "writer.llm"
    assert step_names.tool("writer", "search") == "writer.tool.search"
    assert step_names.hooks("writer") == "writer.hooks"
    assert step_names.finalize("writer") == "writer.finalize"
    assert step_names.approval_gate("writer", "pay") == "writer.approval_gate.pay"
    assert step_names.hitl_register("writer") == "writer.hitl.register"
    assert step_names.hitl_check("writer") == "writer.hitl.check"
    assert step_names.hitl_park("writer") == "writer.hitl.park"
    assert step_names.hitl_resumed("writer") == "writer.hitl.resumed"
    assert step_names.resumed("writer") == "writer.resumed"
    assert step_names.child_start("writer") == "writer.child.start"
    assert step_names.child_wait("writer") == "writer.child.wait"
    assert step_names.child_awaited("writer") == "writer.child.awaited"
    assert step_names.companion_open("writer") == "writer.companion.open"
    assert step_names.companion_status("writer") == "writer.companion.status"
    assert step_names.companion_wait("writer") == "writer.companion.wait"
    assert step_names.companion_terminate("writer") == "writer.companion.terminate"
    assert step_names.companion_awaited("writer") == "writer.companion.awaited"
    assert step_names.memory("writer") == "writer.memory"
    assert step_names.budget_start("writer") == "writer.budget.start"
    assert step_names.budget_register("writer") == "writer.budget.register"
    assert step_names.remote_start("writer") == "writer.remote.start"
    assert step_names.remote_wait("writer") == "writer.remote.wait"
    assert step_names.skills_catalog("writer") == "writer.skills.catalog"
    assert step_names.stop_reason("writer") == "writer.stop_reason"
    assert step_names.tool_starts("writer") == "writer.tool_starts"
    assert step_names.capability("writer", "audit", "log") == "writer.audit.log"


def test_names_embed_agent_and_tool_names_verbatim() -> None:
    """No escaping or normalising: a dotted or unicode name is recorded as given."""
    assert step_names.tool("a.b", "c.d") == "a.b.tool.c.d"
    assert step_names.llm("agent é") == "agent é.llm"


def test_the_module_lists_every_name_it_defines() -> None:
    """A new step name is added here and to the pin above, never by an f-string at a call site."""
    assert sorted(step_names.__all__) == [
        "AGENT_WORKFLOW_NAME",
        "FAIL_RUN",
        "approval_gate",
        "budget_register",
        "budget_start",
        "capability",
        "child_awaited",
        "child_start",
        "child_wait",
        "companion_awaited",
        "companion_open",
        "companion_status",
        "companion_terminate",
        "companion_wait",
        "finalize",
        "hitl_check",
        "hitl_park",
        "hitl_register",
        "hitl_resumed",
        "hooks",
        "llm",
        "memory",
        "remote_start",
        "remote_wait",
        "resumed",
        "skills_catalog",
        "stop_reason",
        "tool",
        "tool_starts",
    ]
