"""The demo agent, and a scripted offline model that drives it like a real one.

``helix-dbos demo`` runs this agent end to end on the embedded default (SQLite files, no server)
with :class:`DemoModel`, which reads the conversation and answers as a tool-using model would:
parallel tool calls first, then a state-updating tool, then ``__finish__`` with a summary built
from the tool results it actually received. Give ``--model openai/gpt-4o-mini`` (or any LiteLLM
model string) and the same agent runs on a real model instead.

The scripted model is a registered model name, :data:`DEMO_MODEL` (registered when this module is
imported, :mod:`helix_dbos.llm.builtin`): ``launch()`` routes it to :class:`DemoModel` unless given
an adapter of its own, so ``helix-dbos worker --agents demo`` and
``helix-dbos serve --agents demo`` run (and recover) the demo agent with no Python written.
``step_delay_seconds`` slows every model step and tool call, so that a demo can be killed mid-run.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from pydantic import BaseModel, Field

from helix_dbos.agent import AgentConfig, define_agent
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.llm.builtin import register_builtin_model
from helix_dbos.messages import AssistantMessage, ToolResultMessage, UserMessage
from helix_dbos.step_result import ParsedToolCall, StepResult, TextStepResult, TokenUsage, ToolCallsStepResult
from helix_dbos.tool import ToolContext, define_tool

DEMO_MODEL = "helix/demo-scripted"
"""The model string that selects :class:`DemoModel`."""

_WEATHER = {"paris": (18.0, "light rain"), "tokyo": (24.0, "sunny"), "lima": (16.0, "overcast")}
_KNOWN = "Paris, Tokyo and Lima"
_NAME = re.compile(r"\b[A-Z][\w'-]*(?:[ ][A-Z][\w'-]*)*")
"""Capitalised words (those not opening a sentence name places, or people, in a request)."""
_NOT_PLACES = frozenset(
    {"I", "Celsius", "Fahrenheit", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
    | {"January", "February", "March", "April", "May", "June", "July", "August", "September", "October"}
    | {"November", "December"}
)


class TripNotes(BaseModel):
    """The demo agent's custom state: notes it saved while working."""

    notes: list[str] = Field(default_factory=list)


class CityIn(BaseModel):
    """Input of ``get_weather``."""

    city: str = Field(description="City name, e.g. 'Paris'")


class NoteIn(BaseModel):
    """Input of ``save_note``."""

    text: str


class TripReport(BaseModel):
    """The demo agent's structured output."""

    summary: str
    warmest_city: str | None = None
    """``None`` when the weather of none of the cities asked about is known."""
    notes: list[str]


def get_weather(inp: CityIn, ctx: ToolContext) -> dict[str, Any]:
    """Deterministic 'weather service' so the demo needs no network; it knows three cities, and says so."""
    known = _WEATHER.get(inp.city.strip().lower())
    if known is None:
        raise ValueError(f"no weather data for {inp.city}: this demo's weather service knows {_KNOWN}")
    celsius, sky = known
    return {"city": inp.city, "celsius": celsius, "fahrenheit": round(celsius * 9 / 5 + 32, 1), "sky": sky}


def save_note(inp: NoteIn, ctx: ToolContext) -> dict[str, Any]:
    """Append to the agent's notes (a state change the runtime records as an ``append`` write).

    It says the note was saved, not how many there are: parallel calls each change a draft of their
    own (merged after the batch), so a count read here would be 1 in every one of them.
    """
    ctx.update_state(lambda draft: draft.notes.append(inp.text))
    ctx.emit("note_saved", {"text": inp.text})
    return {"saved": True}


def _slowed(tool: Any, delay_seconds: float) -> Any:
    """``tool``, taking ``delay_seconds`` longer (a slow service), so a crash can land mid-call."""
    if delay_seconds <= 0:
        return tool

    def slow(inp: Any, ctx: ToolContext) -> Any:
        time.sleep(delay_seconds)
        return tool(inp, ctx)

    return slow


def build_demo_agent(model: str = DEMO_MODEL, *, step_delay_seconds: float = 0.0) -> AgentConfig:
    """The demo agent; ``model`` is a LiteLLM model string or :data:`DEMO_MODEL`.

    ``step_delay_seconds`` makes each tool call take that long (the tools' results are the same).
    """
    return define_agent(
        "trip-planner",
        description="Compares the weather in a few cities and writes a short report.",
        system_prompt=lambda state: (
            "You are a travel assistant. Use get_weather for every city the user names (in parallel), "
            "save one note per city with save_note, then finish with a short report. "
            f"Notes saved so far: {len(state.notes)}."
        ),
        state_schema=TripNotes,
        output_schema=TripReport,
        tools=[
            define_tool(
                "get_weather",
                description="Current weather for a city",
                input_schema=CityIn,
                execute=_slowed(get_weather, step_delay_seconds),
            ),
            define_tool(
                "save_note",
                description="Save a note for the report",
                input_schema=NoteIn,
                execute=_slowed(save_note, step_delay_seconds),
            ),
        ],
        llm_config={"model": model, "temperature": 0.0},
        max_steps=8,
    )


class DemoModel:
    """A scripted model for the demo agent: decides from the transcript, streams its text.

    It decides from the transcript alone, never from how many calls it has seen, so a run
    recovered in another process (a rerun demo, a worker) is answered the same way.
    """

    def __init__(self, step_delay_seconds: float = 0.0) -> None:
        self.step_delay_seconds = step_delay_seconds
        """How long each answer takes (a slow model), so a crash can land mid-run."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        """Answer the next step of the demo conversation."""
        if self.step_delay_seconds > 0:
            await asyncio.sleep(self.step_delay_seconds)
        usage = TokenUsage(input_tokens=40 * len(input.messages), output_tokens=25)
        asked = _calls(input, "get_weather")
        if not asked:
            cities = _cities(input)
            await _say(input, f"Checking the weather in {', '.join(cities)}.")
            calls = [
                ParsedToolCall(id=f"w{i}", name="get_weather", arguments={"city": c}) for i, c in enumerate(cities)
            ]
            return ToolCallsStepResult(content=None, tool_calls=calls, stop_reason="tool_use", usage=usage)
        answers = {m.tool_call_id: _weather(m) for m in input.messages if isinstance(m, ToolResultMessage)}
        weather = [w for w in (answers.get(call_id) for call_id in asked) if w is not None]
        unknown = [str(args.get("city", "?")) for call_id, args in asked.items() if answers.get(call_id) is None]
        if weather and not _calls(input, "save_note"):
            calls = [
                ParsedToolCall(
                    id=f"n{i}",
                    name="save_note",
                    arguments={"text": f"{w['city']}: {w['celsius']}°C / {w['fahrenheit']}°F, {w['sky']}"},
                )
                for i, w in enumerate(weather)
            ]
            return ToolCallsStepResult(tool_calls=calls, stop_reason="tool_use", usage=usage)
        warmest = max(weather, key=lambda w: w["celsius"]) if weather else None
        parts = []
        if warmest is not None:
            count = f"{len(weather)} city" if len(weather) == 1 else f"{len(weather)} cities"
            parts.append(f"Of {count}, {warmest['city']} is warmest at {warmest['celsius']}°C ({warmest['sky']}).")
        if unknown:
            parts.append(f"I don't know the weather in {_listed(unknown)}: my weather service knows {_KNOWN}.")
        summary = " ".join(parts)
        await _say(input, summary)
        if not any(t.name == "__finish__" for t in input.tools):
            return TextStepResult(content=summary, should_stop=True, stop_reason="end_turn", usage=usage)
        arguments = {
            "summary": summary,
            "warmest_city": warmest["city"] if warmest is not None else None,
            "notes": _note_texts(input),
        }
        return ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id="finish", name="__finish__", arguments=arguments)],
            stop_reason="tool_use",
            usage=usage,
        )


def _calls(input: LLMGenerateInput, tool_name: str) -> dict[str, dict[str, Any]]:
    """The calls of ``tool_name`` the model made so far: tool call id -> arguments."""
    return {
        call.id: call.arguments
        for m in input.messages
        if isinstance(m, AssistantMessage)
        for call in m.tool_calls or []
        if call.name == tool_name
    }


def _weather(result: ToolResultMessage) -> dict[str, Any] | None:
    """A ``get_weather`` result, or ``None`` when the call failed (its content is then the error)."""
    try:
        value = json.loads(result.content)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "celsius" in value else None


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _note_texts(input: LLMGenerateInput) -> list[str]:
    return [str(arguments.get("text", "")) for arguments in _calls(input, "save_note").values()]


def _cities(input: LLMGenerateInput) -> list[str]:
    """The cities the user named, in order: the ones the weather service knows, and other names."""
    text = " ".join(m.content for m in input.messages if isinstance(m, UserMessage))
    found: dict[int, str] = {}
    for name in _WEATHER:
        at = text.lower().find(name)
        if at >= 0:
            found[at] = name.title()
    for match in _NAME.finditer(text):
        words = match.group().split()
        if text[: match.start()].rstrip()[-1:] in ("", ".", "!", "?"):
            words = words[1:]  # a sentence's first word is capitalised anyway
        words = [w for w in words if w not in _NOT_PLACES]
        if words and " ".join(words).lower() not in _WEATHER:
            found.setdefault(match.start(), " ".join(words))
    return [found[at] for at in sorted(found)] or ["Paris", "Tokyo"]


async def _say(input: LLMGenerateInput, text: str) -> None:
    if input.callbacks is None:
        return
    for i, word in enumerate(text.split(" ")):
        await input.callbacks.text_delta(word if i == 0 else " " + word)


demo_agent = build_demo_agent()
"""The demo agent on the scripted model: ``--agents helix_dbos.demo:demo_agent`` (or ``--agents demo``)."""

register_builtin_model(DEMO_MODEL, DemoModel)  # launch()'s default adapter routes the demo's model here
