"""The capability seam: an agent's own run feature is called at the loop's named points, in order,
records its I/O as named steps, and changes nothing for agents without one.

The built-in features (skills, budgets, memory, companions, sub-agents, remote sub-agents, human
in the loop) are capabilities too; their own tests (and the pinned step lists) show they record what they always did.
"""

from __future__ import annotations

from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import DefinitionError, MockLLMAdapter, ToolContext, define_agent, define_tool
from helix_dbos.capability import RunCapability, RunEnd
from helix_dbos.messages import UserMessage


class Seen(RunCapability):
    """Notes every point it is called at (workflow memory only: it records nothing)."""

    name = "seen"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def system_fragment(self, run: Any) -> str:
        self.log.append("system_fragment")
        return "\nAlways answer in French."

    def on_start(self, run: Any) -> RunEnd | None:
        self.log.append("on_start")
        return None

    def between_steps(self, run: Any) -> RunEnd | None:
        self.log.append(f"between_steps:{run.step}")
        return None

    def before_first_model_call(self, run: Any) -> None:
        self.log.append("before_first_model_call")

    def before_model_call(self, run: Any) -> None:
        self.log.append(f"before_model_call:{run.step}")

    def after_model_call(self, run: Any, result: Any) -> None:
        self.log.append(f"after_model_call:{run.step}:{result.type}")

    def register_calls(self, run: Any, batch: Any, *, resuming: bool) -> object | None:
        self.log.append(f"register_calls:{resuming}")
        return None  # nothing to wait for: collect_answers is not called

    def start_calls(self, run: Any, batch: Any, results: dict[str, Any]) -> object | None:
        self.log.append(f"start_calls:{[c.id for c, _ in batch.regular]}")
        return None

    def after_human_calls(self, run: Any, batch: Any, results: dict[str, Any]) -> None:
        self.log.append("after_human_calls")

    def on_finish(self, run: Any, end: RunEnd) -> None:
        self.log.append(f"on_finish:{end.status}")


class Note(BaseModel):
    text: str


def _note(inp: Note, ctx: ToolContext) -> str:
    return inp.text


SCRIPT = [
    {"type": "tool_calls", "tool_calls": [{"id": "t1", "name": "note", "arguments": {"text": "a"}}]},
    {"type": "text", "content": "done", "should_stop": True, "stop_reason": "end_turn"},
]


def test_a_capability_is_called_at_every_point_in_order(make_executor) -> None:
    log: list[str] = []
    agent = define_agent(
        "cap-points",
        system_prompt="You take notes.",
        llm_config="mock/model",
        tools=[define_tool("note", description="Note", input_schema=Note, execute=_note)],
        capabilities=[Seen(log)],
    )
    model = MockLLMAdapter(SCRIPT)
    executor = make_executor(model, agents=[agent])
    result = executor.execute(agent, "hello", session_id="cap-points-1").result()
    assert result.status == "completed", result
    assert log == [
        "system_fragment",
        "on_start",
        "between_steps:0",
        "before_first_model_call",
        "before_model_call:1",
        "after_model_call:1:tool_calls",
        "register_calls:False",
        "start_calls:['t1']",
        "after_human_calls",
        "between_steps:1",
        "before_model_call:2",
        "after_model_call:2:text",
        "on_finish:completed",
    ]
    assert model.inputs[0].messages[0].content.endswith("Always answer in French.")  # the fragment, every call
    assert model.inputs[1].messages[0].content.endswith("Always answer in French.")


class StopAfterOneStep(RunCapability):
    name = "one-step"

    def between_steps(self, run: Any) -> RunEnd | None:
        if run.step >= 1:
            return RunEnd("failed", error="one step is all this agent may take")
        return None


def test_a_capability_can_end_the_run_between_steps(make_executor) -> None:
    agent = define_agent(
        "cap-stop",
        system_prompt="You take notes.",
        llm_config="mock/model",
        tools=[define_tool("note", description="Note", input_schema=Note, execute=_note)],
        capabilities=[StopAfterOneStep()],
    )
    executor = make_executor(MockLLMAdapter(SCRIPT), agents=[agent])
    result = executor.execute(agent, "hello", session_id="cap-stop-1").result()
    assert result.status == "failed" and result.error == "one step is all this agent may take", result
    session = executor.store.load_session("cap-stop-1")
    assert session is not None and session.status == "failed"


class Recorder(RunCapability):
    """Does its I/O in recorded steps: ``{agent}.recorder.{name}``."""

    name = "recorder"

    def __init__(self, effects: list[str]) -> None:
        self.effects = effects

    def _effect(self, what: str) -> dict[str, str]:
        self.effects.append(what)
        return {"did": what}

    def before_first_model_call(self, run: Any) -> None:
        out = run.record_step(self.name, "context", self._effect, "context")
        run.append(UserMessage(content=f"(context: {out['did']})"))

    def on_finish(self, run: Any, end: RunEnd) -> None:
        run.record_step(self.name, "finish", self._effect, f"finish:{end.status}")


def test_a_capabilitys_io_is_a_named_recorded_step(make_executor) -> None:
    effects: list[str] = []
    agent = define_agent(
        "cap-steps", system_prompt="You answer.", llm_config="mock/model", capabilities=[Recorder(effects)]
    )
    model = MockLLMAdapter([{"type": "text", "content": "done", "should_stop": True, "stop_reason": "end_turn"}])
    executor = make_executor(model, agents=[agent])
    handle = executor.execute(agent, "hello", session_id="cap-steps-1")
    assert handle.result().status == "completed"
    assert effects == ["context", "finish:completed"]
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(handle.run_id)]
    assert steps == ["cap-steps.recorder.context", "cap-steps.llm", "cap-steps.recorder.finish", "cap-steps.finalize"]
    assert model.inputs[0].messages[-1].content == "(context: context)"  # what it appended, the model saw


def test_agents_without_capabilities_record_the_steps_they_always_did(make_executor) -> None:
    agent = define_agent("cap-none", system_prompt="You answer.", llm_config="mock/model")
    executor = make_executor(
        MockLLMAdapter([{"type": "text", "content": "done", "should_stop": True, "stop_reason": "end_turn"}]),
        agents=[agent],
    )
    handle = executor.execute(agent, "hello", session_id="cap-none-1")
    assert handle.result().status == "completed"
    assert [s["function_name"] for s in DBOS.list_workflow_steps(handle.run_id)] == [
        "cap-none.llm",
        "cap-none.finalize",
    ]


@pytest.mark.parametrize(
    ("capabilities", "needle"),
    [
        (["not a capability"], "must be RunCapability instances"),
        ([Seen([]), Seen([])], "listed twice"),
        ([type("Tooly", (RunCapability,), {"name": "tool"})()], "reserved"),
        ([type("Spacey", (RunCapability,), {"name": "has space"})()], "reserved or not a valid"),
    ],
)
def test_define_agent_refuses_capabilities_it_could_not_run(capabilities: list[Any], needle: str) -> None:
    with pytest.raises(DefinitionError, match=needle):
        define_agent("cap-bad", system_prompt="x", llm_config="mock/model", capabilities=capabilities)


class Announcer(RunCapability):
    """Acts at two points only (the loop works out once per run which capabilities act where)."""

    name = "announcer"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def before_model_call(self, run: Any) -> None:
        self.log.append(f"before_model_call:{run.step}")

    def result_chunk(self, run: Any, call: Any, output: Any) -> None:
        self.log.append(f"result_chunk:{call.name}")


def test_each_run_sees_its_own_definitions_tools_and_capabilities(make_executor) -> None:
    """An agent redefined between runs (tools and capabilities): each run calls what its definition has."""
    log: list[str] = []
    note = define_tool("note", description="Note", input_schema=Note, execute=_note)
    jot = define_tool("jot", description="Jot", input_schema=Note, execute=_note)
    plain = define_agent("cap-evolving", system_prompt="x", llm_config="mock/model", tools=[note])
    announced = define_agent(
        "cap-evolving", system_prompt="x", llm_config="mock/model", tools=[jot], capabilities=[Announcer(log)]
    )
    jot_script = [
        {"type": "tool_calls", "tool_calls": [{"id": "j1", "name": "jot", "arguments": {"text": "a"}}]},
        SCRIPT[1],
    ]
    model = MockLLMAdapter([*SCRIPT, *jot_script, *SCRIPT])
    executor = make_executor(model, agents=[plain])
    for agent, session in [(plain, "evo-1"), (announced, "evo-2"), (plain, "evo-3")]:
        assert executor.execute(agent, "hello", session_id=session).result().status == "completed"
    assert [[t.name for t in i.tools] for i in model.inputs] == [["note"]] * 2 + [["jot"]] * 2 + [["note"]] * 2
    assert log == ["before_model_call:1", "result_chunk:jot", "before_model_call:2"]  # the second run only
