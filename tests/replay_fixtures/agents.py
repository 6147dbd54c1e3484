"""The agents of the recorded replay fixtures: imported by the code that recorded them and by today's.

``scripts/record_replay_fixture.py`` runs these agents with an older checkout of helix-dbos and
keeps the database it leaves (a run killed in the middle of a tool call, a run parked on an
approval). ``tests/runtime/test_recorded_runs_recover.py`` opens a copy with today's code and
finishes both runs. So this module must keep working on both: public API only, nothing new.

The model is a function of the transcript (not a script with a position), so a process that
recovers a run mid-way answers the calls it still has to make, whatever happened before.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from helix_dbos import define_agent, define_tool
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.messages import ToolResultMessage, UserMessage
from helix_dbos.step_result import StepResult, StepResultAdapter

KILL_ENV = "HELIX_FIXTURE_KILL_IN_TOOL"
"""Set while recording: the tool SIGKILLs its own process the first time it runs (a crash mid-tool)."""
EFFECTS_ENV = "HELIX_FIXTURE_EFFECTS"
"""A file every tool call appends one line to: its effects, outside the engine."""


class NoteIn(BaseModel):
    text: str


class PublishIn(BaseModel):
    title: str


def _effect(line: str) -> None:
    path = os.environ.get(EFFECTS_ENV)
    if path:
        with Path(path).open("a") as effects:
            effects.write(line + "\n")


def save_note(inp: NoteIn, ctx: Any) -> dict[str, Any]:
    _effect(f"save_note {inp.text}")
    if os.environ.get(KILL_ENV) == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # mid-tool: its step is never recorded
    return {"saved": inp.text}


def publish(inp: PublishIn, ctx: Any) -> dict[str, Any]:
    _effect(f"publish {inp.title}")
    return {"published": inp.title}


class TranscriptModel:
    """First call: the agent's tool; after its result: the final answer."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.tool = tool
        self.arguments = arguments

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        if any(isinstance(m, ToolResultMessage) for m in input.messages):
            return StepResultAdapter.validate_python(
                {"type": "text", "content": "done", "should_stop": True, "stop_reason": "end_turn"}
            )
        user = next(m for m in reversed(input.messages) if isinstance(m, UserMessage))
        call = {"id": f"c-{len(str(user.content))}", "name": self.tool, "arguments": self.arguments}
        return StepResultAdapter.validate_python({"type": "tool_calls", "tool_calls": [call]})


note_agent = define_agent(
    "fixture-notes",
    system_prompt="Save the note.",
    llm_config="fixture/notes",
    tools=[define_tool("save_note", description="Save a note", input_schema=NoteIn, execute=save_note)],
)
publish_agent = define_agent(
    "fixture-publish",
    system_prompt="Publish after approval.",
    llm_config="fixture/publish",
    tools=[
        define_tool("publish", description="Publish", input_schema=PublishIn, execute=publish, require_approval=True)
    ],
)
AGENTS = [note_agent, publish_agent]


class FixtureModels:
    """The router both processes use: one transcript model per agent's model name."""

    def __init__(self) -> None:
        self.by_model = {
            "fixture/notes": TranscriptModel("save_note", {"text": "recorded"}),
            "fixture/publish": TranscriptModel("publish", {"title": "report"}),
        }

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        return await self.by_model[input.config.model].generate_step(input)
