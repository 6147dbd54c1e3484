"""Message builders: the transcript entries a step produces, and the prompt an LLM call sees.

Pure functions. They also own the ``__finish__`` history invariant (seed 000): persisted history
never holds a tool call without its result. :func:`synthesize_finish_tool_result` is the single
source of the synthetic ``{"acknowledged":true}`` result that pairs a ``__finish__`` call, used
both eagerly at completion and by the legacy heal on continuation
(:func:`find_unpaired_finish_call_id`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from helix_dbos.messages import (
    COMMON_METADATA_KEYS,
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkingContent,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from helix_dbos.step_result import ParsedSubAgentCall, ParsedToolCall
from helix_dbos.tool import FINISH_TOOL_NAME, SUBAGENT_TOOL_PREFIX

FINISH_ACKNOWLEDGEMENT = '{"acknowledged":true}'
"""Content of the synthetic tool result that pairs a ``__finish__`` call."""

NOT_APPROVED_MESSAGE = "Tool call was not approved by the user"
"""The canonical tool error for a denied approval (a stable anchor for the model)."""

SKIPPED_BY_FINISH_MESSAGE = "Tool call was not executed: the agent completed via __finish__ in the same response."
"""Result of a tool call made alongside ``__finish__``: it never ran, and the history must say so."""


def json_stringify(value: Any) -> str:
    """Compact JSON text, like JavaScript's ``JSON.stringify`` (the seeds' tool-result encoding)."""
    return json.dumps(to_jsonable_python(value), separators=(",", ":"), ensure_ascii=False)


class AssistantMessagePlan(BaseModel):
    """What the assistant message of a step will contain."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    sub_agent_calls: list[ParsedSubAgentCall] = Field(default_factory=list)
    thinking: ThinkingContent | None = None


def create_assistant_message(plan: AssistantMessagePlan) -> AssistantMessage:
    """The assistant message for history; sub-agent calls are stored as ``subagent__<type>`` calls."""
    calls = [ToolCallRequest(id=c.id, name=c.name, arguments=_as_object(c.arguments)) for c in plan.tool_calls]
    calls.extend(
        ToolCallRequest(id=c.id, name=f"{SUBAGENT_TOOL_PREFIX}{c.agent_type}", arguments=_as_object(c.input))
        for c in plan.sub_agent_calls
    )
    return AssistantMessage(content=plan.content or None, tool_calls=calls or None, thinking=plan.thinking)


def _as_object(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def create_tool_result_message(
    *,
    tool_call_id: str,
    tool_name: str,
    result: Any = None,
    success: bool = True,
    error: str | None = None,
) -> ToolResultMessage:
    """A tool result: the JSON of ``result`` on success, the error text (marked ``is_error``) on failure."""
    if success:
        return ToolResultMessage(tool_call_id=tool_call_id, tool_name=tool_name, content=json_stringify(result))
    return ToolResultMessage(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        content=error or "Tool call failed",
        metadata={COMMON_METADATA_KEYS.IS_ERROR: True},
    )


def create_sub_agent_result_message(
    *,
    tool_call_id: str,
    agent_type: str,
    result: Any = None,
    success: bool = True,
    error: str | None = None,
) -> ToolResultMessage:
    """Like :func:`create_tool_result_message`, under the sub-agent's prefixed tool name."""
    return create_tool_result_message(
        tool_call_id=tool_call_id,
        tool_name=f"{SUBAGENT_TOOL_PREFIX}{agent_type}",
        result=result,
        success=success,
        error=error,
    )


def synthesize_finish_tool_result(tool_call_id: str) -> ToolResultMessage:
    """The synthetic result pairing a ``__finish__`` call: a fixed sentinel, not an echo of the output."""
    return ToolResultMessage(tool_call_id=tool_call_id, tool_name=FINISH_TOOL_NAME, content=FINISH_ACKNOWLEDGEMENT)


def find_unpaired_tool_call_ids(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """``(tool_call_id, tool_name)`` of every assistant tool call without a result, in order."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    return [
        (call.id, call.name)
        for m in messages
        if isinstance(m, AssistantMessage)
        for call in m.tool_calls or ()
        if call.id not in answered
    ]


def find_unpaired_finish_call_id(messages: Sequence[Message]) -> str | None:
    """The id of the last ``__finish__`` call that has no tool result (legacy histories), if any."""
    unpaired = [call_id for call_id, name in find_unpaired_tool_call_ids(messages) if name == FINISH_TOOL_NAME]
    return unpaired[-1] if unpaired else None


def heal_unpaired_finish(messages: Sequence[Message]) -> list[ToolResultMessage]:
    """Messages to append so that no ``__finish__`` call is left unpaired (empty for healthy history)."""
    return [
        synthesize_finish_tool_result(call_id)
        for call_id, name in find_unpaired_tool_call_ids(messages)
        if name == FINISH_TOOL_NAME
    ]


NOT_ANSWERED_IN_FORK_MESSAGE = (
    "Tool call was not answered: the session was forked from a checkpoint taken while it waited for this call."
)
"""The tool error closing a call a fork copied without its answer (a fork copies no pending call)."""


def close_unpaired_for_fork(messages: Sequence[Message]) -> list[ToolResultMessage]:
    """Results to append to a forked transcript so that no tool call is left without one.

    A checkpoint taken while a run waited on a client tool or an approval holds the call but not
    its answer; the fork does not inherit the wait, so each such call gets a tool error (and an
    unpaired ``__finish__`` its usual acknowledgement). Empty for a transcript with every call paired.
    """
    return [
        synthesize_finish_tool_result(call_id)
        if name == FINISH_TOOL_NAME
        else create_tool_result_message(
            tool_call_id=call_id, tool_name=name, success=False, error=NOT_ANSWERED_IN_FORK_MESSAGE
        )
        for call_id, name in find_unpaired_tool_call_ids(messages)
    ]


def output_requirement_section(tool_name: str) -> str:
    """The system-prompt section telling the model which tool completes the task (seed 003)."""
    return (
        "## Output Requirement\n"
        "This task requires structured output. You MUST complete your work by calling\n"
        f"the `{tool_name}` tool. This tool will process your output and complete the task.\n"
        "DO NOT use any other method to return your final answer."
    )


def build_messages_for_llm(
    messages: Sequence[Message],
    system_prompt: str | Callable[[Any], str],
    custom_state: Any,
    *,
    completion_tool_name: str | None = None,
    extra_system_sections: Sequence[str] = (),
) -> list[Message]:
    """The messages for one LLM call: the resolved system prompt first, then the history.

    A callable prompt is evaluated against the current custom state on every step, so it can
    reflect what tools changed. ``completion_tool_name`` (``__finish__`` or the first finish_with
    tool) appends the "Output Requirement" section. The history is passed on as it is, system
    messages included (seed 000 only prepends): the prompt is never stored in the transcript, so
    a system message there is one the caller put in ``AgentInput.messages``.
    """
    prompt = system_prompt(custom_state) if callable(system_prompt) else system_prompt
    sections = [prompt] if prompt else []
    if completion_tool_name:
        sections.append(output_requirement_section(completion_tool_name))
    sections.extend(s for s in extra_system_sections if s)
    history = list(messages)
    if not sections:
        return history
    return [SystemMessage(content="\n\n".join(sections)), *history]


def create_max_tokens_correction_message(completion_tool_name: str) -> UserMessage:
    """The nudge after a ``max_tokens`` stop in a structured-output agent (seed 000 "Recoverable errors")."""
    return UserMessage(
        content=(
            "Your previous response was cut off because it reached the maximum output length. "
            f"Do not write a long text answer. Call the `{completion_tool_name}` tool now, directly, "
            "with a concise result that matches its schema."
        ),
        metadata={
            COMMON_METADATA_KEYS.HIDDEN: True,
            COMMON_METADATA_KEYS.SOURCE: "helix:max_tokens_recovery",
        },
    )


def create_finish_reminder_message(completion_tool_name: str) -> UserMessage:
    """The nudge when a structured-output agent ends its turn with text instead of its completion tool."""
    return UserMessage(
        content=(
            f"You ended your turn without calling the `{completion_tool_name}` tool. This task requires "
            f"structured output: call `{completion_tool_name}` with your final answer."
        ),
        metadata={COMMON_METADATA_KEYS.HIDDEN: True, COMMON_METADATA_KEYS.SOURCE: "helix:finish_reminder"},
    )
