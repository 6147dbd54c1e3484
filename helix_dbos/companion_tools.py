"""The ``companion__*`` tools: how a parent's model spawns and consults persistent companions.

An agent with ``persistent_agents`` gets these tools auto-injected (by ``build_effective_tools``);
users do not define them. They carry no ``execute``: the runtime runs them in a phase of their own
(:mod:`helix_dbos.runtime.companions`), because what they do (open a child session, start its
workflow, wait for it) is workflow work, not a step. Their names, input fields and result fields
are what the model reads, so they keep the seeds' spelling (``companion__spawnAgent``,
``agentType``, ``timeoutMs``).

- ``companion__spawnAgent {agentType, name?, message}``: start a companion (or re-consult a
  completed one of that name);
- ``companion__sendMessage {name, message}``: consult a companion again (a running one is
  interrupted and resumed with the message);
- ``companion__listChildren {}`` / ``companion__getChildStatus {name}``: what the companions are doing;
- ``companion__waitForResult {name, timeoutMs?}``: wait for a companion's result (only injected
  when a companion is ``blocking``);
- ``companion__terminateChild {name, reason?}``: stop a companion and its own children.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.agent import PersistentAgentConfig
from helix_dbos.tool import COMPANION_TOOL_PREFIX, Tool

CompanionType = Literal[
    "spawnAgent", "sendMessage", "listChildren", "getChildStatus", "waitForResult", "terminateChild"
]
"""The six companion tools, by the suffix of their name."""

COMPANION_TYPES: tuple[CompanionType, ...] = (
    "spawnAgent",
    "sendMessage",
    "listChildren",
    "getChildStatus",
    "waitForResult",
    "terminateChild",
)

_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""Companion names become part of a session id (``{parent}-agent-{name}``): keep them id-safe."""


class CompanionTool(Tool):
    """A ``companion__*`` tool (the seeds' ``CompanionTool`` with its ``_companionType`` marker)."""

    companion_type: CompanionType


def is_companion_tool(tool: Tool | str) -> bool:
    """True for a companion tool (or a tool name with the ``companion__`` prefix)."""
    if isinstance(tool, str):
        return tool.startswith(COMPANION_TOOL_PREFIX)
    return isinstance(tool, CompanionTool)


def is_companion_tool_instance(tool: Tool | None) -> TypeGuard[CompanionTool]:
    """Narrowing form of :func:`is_companion_tool` for tools."""
    return isinstance(tool, CompanionTool)


def companion_tool_name(companion_type: CompanionType) -> str:
    """``companion__{type}``."""
    return f"{COMPANION_TOOL_PREFIX}{companion_type}"


# --- inputs (what the model sends) -----------------------------------------------------------------


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SpawnAgentInput(_Input):
    """Arguments of ``companion__spawnAgent``."""

    agent_type: str = Field(alias="agentType", description="Which companion to start (one of the agent types listed).")
    name: str | None = Field(
        default=None,
        pattern=_NAME_PATTERN,
        description=(
            "A name to address this companion by later. Omit it for an automatic name ({agentType}-{n}). "
            "Re-using the name of a completed companion consults it again with its memory intact."
        ),
    )
    message: str = Field(min_length=1, description="The task or question for the companion.")


class SendMessageInput(_Input):
    """Arguments of ``companion__sendMessage``."""

    name: str = Field(pattern=_NAME_PATTERN, description="The companion's name.")
    message: str = Field(min_length=1, description="The follow-up message for the companion.")


class ListChildrenInput(_Input):
    """``companion__listChildren`` takes no arguments."""


class GetChildStatusInput(_Input):
    """Arguments of ``companion__getChildStatus``."""

    name: str = Field(pattern=_NAME_PATTERN, description="The companion's name.")


class WaitForResultInput(_Input):
    """Arguments of ``companion__waitForResult``."""

    name: str = Field(pattern=_NAME_PATTERN, description="The companion's name.")
    timeout_ms: int | None = Field(
        default=None,
        alias="timeoutMs",
        gt=0,
        description="Give up waiting after this many milliseconds (the companion keeps running).",
    )


class TerminateChildInput(_Input):
    """Arguments of ``companion__terminateChild``."""

    name: str = Field(pattern=_NAME_PATTERN, description="The companion's name.")
    reason: str | None = Field(default=None, description="Why it is stopped (recorded on its session).")


COMPANION_INPUTS: dict[CompanionType, type[BaseModel]] = {
    "spawnAgent": SpawnAgentInput,
    "sendMessage": SendMessageInput,
    "listChildren": ListChildrenInput,
    "getChildStatus": GetChildStatusInput,
    "waitForResult": WaitForResultInput,
    "terminateChild": TerminateChildInput,
}


# --- the tools ------------------------------------------------------------------------------------

_RESULT_NOTE = (
    " The result is JSON: {name, agentType, sessionId, status, output?, error?}; status is running, "
    "completed, failed or terminated."
)


def _catalog(companions: Sequence[PersistentAgentConfig]) -> str:
    lines = []
    for c in companions:
        what = c.description or c.agent.description or "no description"
        lines.append(f"- {c.agent.name} ({c.mode}): {what}")
    return "Available companions:\n" + "\n".join(lines)


def _tool(companion_type: CompanionType, description: str) -> CompanionTool:
    schema = COMPANION_INPUTS[companion_type].model_json_schema(by_alias=True)
    schema.pop("title", None)
    schema.pop("description", None)
    return CompanionTool(
        name=companion_tool_name(companion_type),
        description=description,
        input_schema=COMPANION_INPUTS[companion_type],
        parameters_schema=schema,
        companion_type=companion_type,
    )


def create_spawn_agent_tool(companions: Sequence[PersistentAgentConfig]) -> CompanionTool:
    """``companion__spawnAgent``: start a companion, or re-consult a completed one by its name."""
    return _tool(
        "spawnAgent",
        "Start a persistent companion agent with a task. A blocking companion's result is returned "
        "when it finishes; a non-blocking one returns at once and you are told of its result before a "
        "later step. Re-using the name of a completed companion consults it again on its own memory; "
        "a failed or terminated one starts afresh." + _RESULT_NOTE + "\n" + _catalog(companions),
    )


def create_send_message_tool(companions: Sequence[PersistentAgentConfig]) -> CompanionTool:
    """``companion__sendMessage``: a follow-up for a named companion (interrupting it if it runs)."""
    return _tool(
        "sendMessage",
        "Send a follow-up message to a companion you spawned, by name. A completed companion answers "
        "again with its memory intact; a running one is interrupted and resumed with the message. "
        "Blocking companions return their new result." + _RESULT_NOTE,
    )


def create_list_children_tool() -> CompanionTool:
    """``companion__listChildren``: every companion this session spawned."""
    return _tool(
        "listChildren",
        "List the companions you spawned, with their status. The result is JSON: {children: [...]}, "
        "each {name, agentType, sessionId, status}.",
    )


def create_get_child_status_tool() -> CompanionTool:
    """``companion__getChildStatus``: a named companion's status, and its output once it has one."""
    return _tool("getChildStatus", "Check a companion's status and, once it completed, its output." + _RESULT_NOTE)


def create_wait_for_result_tool() -> CompanionTool:
    """``companion__waitForResult``: block until a named companion completes (or ``timeoutMs``)."""
    return _tool(
        "waitForResult",
        "Wait until a companion finishes and return its result. With timeoutMs, stop waiting after that "
        "long and return its status (still running)." + _RESULT_NOTE,
    )


def create_terminate_child_tool() -> CompanionTool:
    """``companion__terminateChild``: stop a companion and every agent it started."""
    return _tool(
        "terminateChild",
        "Stop a running companion (and any agents it started). A terminated companion can be spawned "
        "again under its name, afresh." + _RESULT_NOTE,
    )


def create_companion_tools(companions: Sequence[PersistentAgentConfig]) -> list[CompanionTool]:
    """The tools for an agent's companions: five always, ``waitForResult`` when one is blocking."""
    if not companions:
        return []
    tools = [
        create_spawn_agent_tool(companions),
        create_send_message_tool(companions),
        create_list_children_tool(),
        create_get_child_status_tool(),
    ]
    if any(c.mode == "blocking" for c in companions):
        tools.append(create_wait_for_result_tool())
    tools.append(create_terminate_child_tool())
    return tools


__all__ = [
    "COMPANION_INPUTS",
    "COMPANION_TYPES",
    "CompanionTool",
    "CompanionType",
    "GetChildStatusInput",
    "ListChildrenInput",
    "SendMessageInput",
    "SpawnAgentInput",
    "TerminateChildInput",
    "WaitForResultInput",
    "companion_tool_name",
    "create_companion_tools",
    "create_get_child_status_tool",
    "create_list_children_tool",
    "create_send_message_tool",
    "create_spawn_agent_tool",
    "create_terminate_child_tool",
    "create_wait_for_result_tool",
    "is_companion_tool",
    "is_companion_tool_instance",
]
