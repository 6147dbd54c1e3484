"""Agents and a transcript-driven scripted model for the service tests.

``helix-dbos serve --agents tests.service.agents:agents --llm-adapter tests.service.agents:model``
loads them in server subprocesses. The model decides from the transcript alone, never from how
many calls it has seen, so whichever process continues a run (the one it started in, or another
that picked up a parked run) answers the same way.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from helix_dbos import (
    LLMGenerateInput,
    MockLLMAdapter,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    define_agent,
    define_tool,
)
from helix_dbos.step_result import ParsedToolCall, TextStepResult, ToolCallsStepResult


class CityIn(BaseModel):
    city: str


class NoteIn(BaseModel):
    text: str


def save_note(inp: NoteIn, ctx: ToolContext) -> dict[str, Any]:
    return {"saved": inp.text}


get_location = define_tool(
    "get_location", description="Ask the browser where the user is", input_schema=CityIn, execute="client"
)
note = define_tool("note", description="Save a note", input_schema=NoteIn, execute=save_note)

locator = define_agent(
    "locator",
    system_prompt="Find out where the user is, then tell them.",
    llm_config="scripted/locator",
    tools=[note, get_location],
)
echo = define_agent("echo", system_prompt="Repeat what the user says.", llm_config="scripted/echo")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def failing_sql_prompt(state: Any) -> str:
    """Raise a real SQLAlchemy error whose text holds the SQL statement and its parameters."""
    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT * FROM missing_secret_table WHERE token = :token"), {"token": "param-s3cret"})
    return "unreachable"


def unreachable_database_prompt(state: Any) -> str:
    """Raise a real driver error naming a database host and port (nothing listens there)."""
    engine = sa.create_engine(f"postgresql+psycopg://helix:pw-s3cret@127.0.0.1:{_closed_port()}/helix")
    with engine.connect():
        pass
    return "unreachable"


# Agents whose runs fail in workflow code with real database-driver errors: what a client sees of
# such a failure must not include the statement, its parameters, or where the database is.
db_sql_error = define_agent("db-sql-error", system_prompt=failing_sql_prompt, llm_config="scripted/echo")
db_down = define_agent("db-down", system_prompt=unreachable_database_prompt, llm_config="scripted/echo")


class PathIn(BaseModel):
    path: str


def remove(inp: PathIn, ctx: ToolContext) -> dict[str, Any]:
    return {"removed": inp.path}


# An approval-gated tool: the client approves (or denies) exactly the arguments it was shown.
janitor = define_agent(
    "janitor",
    system_prompt="Clean up what the user asks, once they approve.",
    llm_config="scripted/janitor",
    tools=[
        define_tool("remove", description="Remove a path", input_schema=PathIn, execute=remove, require_approval=True)
    ],
)


class BumpIn(BaseModel):
    by: int


def bump(inp: BumpIn, ctx: ToolContext) -> dict[str, Any]:
    """Add ``by`` to the state's ``count`` and log it: two keys patched (a replace and an append)."""

    def change(draft: dict[str, Any]) -> None:
        draft["count"] = int(draft.get("count", 0)) + inp.by
        draft.setdefault("log", []).append(f"+{inp.by}")

    ctx.update_state(change)
    return {"count": ctx.get_state()["count"]}


class QuestionIn(BaseModel):
    question: str


# A tool that changes the custom state (what AG-UI's STATE_SNAPSHOT / STATE_DELTA carry), after a
# client-executed tool picked the amount: the change happens after the client answered, so a
# client always sees it as a delta on the state it was sent.
counter = define_agent(
    "counter",
    system_prompt="Ask how much to add, add it, then say the counter's value.",
    llm_config="scripted/counter",
    tools=[
        define_tool("pick_amount", description="Ask the user", input_schema=QuestionIn, execute="client"),
        define_tool("bump", description="Add to the counter", input_schema=BumpIn, execute=bump),
    ],
)

agents = [locator, echo, db_sql_error, db_down, janitor, counter]


def _amount(answer: str) -> int:
    """The ``by`` of the client's answer to ``pick_amount``; 1 for anything else (fuzzed answers)."""
    try:
        by = json.loads(answer).get("by", 1)
    except (ValueError, AttributeError):
        return 1
    return by if isinstance(by, int) and not isinstance(by, bool) else 1


def decide(inp: LLMGenerateInput) -> TextStepResult | ToolCallsStepResult:
    """``echo`` repeats the last user message; ``locator`` notes, asks the client, then answers;
    ``janitor`` asks to remove ``/tmp/x``, then reports the tool's answer; ``counter`` asks the client
    how much to add, adds it to its state's counter, then reports it."""
    last = inp.messages[-1]
    n = len(inp.messages)
    if inp.agent_type == "counter":
        if isinstance(last, ToolResultMessage) and last.tool_name == "bump":
            return TextStepResult(content=f"Counter: {last.content}", should_stop=True, stop_reason="end_turn")
        if isinstance(last, ToolResultMessage):
            return ToolCallsStepResult(
                tool_calls=[ParsedToolCall(id=f"bump-{n}", name="bump", arguments={"by": _amount(last.content)})],
                stop_reason="tool_use",
            )
        question = {"question": "How much?"}
        return ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id=f"pick-{n}", name="pick_amount", arguments=question)], stop_reason="tool_use"
        )
    if inp.agent_type == "janitor":
        if isinstance(last, ToolResultMessage):
            return TextStepResult(content=f"Done: {last.content}", should_stop=True, stop_reason="end_turn")
        return ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id=f"rm-{n}", name="remove", arguments={"path": "/tmp/x"})],
            stop_reason="tool_use",
        )
    if inp.agent_type != "locator":
        said = last.content if isinstance(last, UserMessage) else "?"
        return TextStepResult(content=f"echo: {said}", should_stop=True, stop_reason="end_turn")
    if isinstance(last, ToolResultMessage) and last.tool_name == "get_location":
        city = json.loads(last.content).get("city", "?") if last.content.startswith("{") else last.content
        return TextStepResult(content=f"You are in {city}.", should_stop=True, stop_reason="end_turn")
    if isinstance(last, ToolResultMessage):
        return ToolCallsStepResult(
            content="Now I ask your browser.",
            tool_calls=[ParsedToolCall(id=f"loc-{n}", name="get_location", arguments={"city": "?"})],
            stop_reason="tool_use",
        )
    return ToolCallsStepResult(
        content="Let me take a note first.",
        tool_calls=[ParsedToolCall(id=f"note-{n}", name="note", arguments={"text": "asked for location"})],
        stop_reason="tool_use",
    )


def model() -> MockLLMAdapter:
    """A fresh scripted model whose every call is decided by :func:`decide`."""
    return MockLLMAdapter([decide] * 10_000)
