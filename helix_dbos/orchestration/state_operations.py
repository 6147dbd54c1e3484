"""Run setup: ``initialize_agent_state``, ``build_effective_tools`` and prompt resolution (seed 004 step 1-2).

Pure functions over an :class:`AgentConfig`; the durable runtime calls them from workflow code,
so they must be deterministic (no clock, no ids minted here: callers pass them in).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helix_dbos.agent import AgentConfig
from helix_dbos.companion_tools import create_companion_tools
from helix_dbos.errors import DefinitionError
from helix_dbos.messages import COMMON_METADATA_KEYS, Message, UserInputMessage, UserMessage
from helix_dbos.orchestration.message_builder import build_messages_for_llm
from helix_dbos.orchestration.output_modes import prompted_output_section
from helix_dbos.session import AgentInput, AgentState, SendInput
from helix_dbos.skills.tools import create_skill_tools
from helix_dbos.state.tracker import to_json_state
from helix_dbos.tool import FINISH_TOOL_NAME, Tool, create_finish_tool


def build_effective_tools(agent: AgentConfig) -> list[Tool]:
    """The tools the model sees: the agent's, the skill tools, its ``companion__*`` tools, ``__finish__``.

    ``load_skill`` / ``read_skill_file`` come with ``skills``; companion tools with
    ``persistent_agents``; ``__finish__`` with an output schema unless a finish_with tool completes
    the agent or the output comes from the model's answer (``output_mode`` native or prompted).
    Each comes from the agent's own definition, so a sub-agent or companion never inherits its
    parent's skills or companions.
    """
    tools = list(agent.tools)
    tools.extend(create_skill_tools(agent.skills))
    tools.extend(create_companion_tools(agent.persistent_agents))
    if agent.output_schema is not None and not agent.finish_with_tools and agent.output_mode == "tool":
        tools.append(create_finish_tool(agent.output_schema, strict=agent.llm_config.strict_output))
    return tools


def completion_tool_name(agent: AgentConfig) -> str | None:
    """The tool that completes the agent: the first finish_with tool, ``__finish__``, or none.

    None in the native and prompted output modes: there the model's answer is the output.
    """
    finish_with = agent.finish_with_tools
    if finish_with:
        return finish_with[0].name
    return FINISH_TOOL_NAME if agent.output_schema is not None and agent.output_mode == "tool" else None


def default_custom_state(agent: AgentConfig, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """A new session's custom state: the schema's defaults with ``overrides`` applied and validated."""
    if agent.state_schema is None:
        return dict(overrides or {})
    try:
        return to_json_state(agent.state_schema.model_validate(overrides or {}))
    except ValueError as exc:
        raise DefinitionError(f"agent {agent.name!r}: initial state does not match state_schema: {exc}") from exc


def typed_custom_state(agent: AgentConfig, custom_state: dict[str, Any]) -> Any:
    """The custom state as the agent's schema instance (what prompts, tools and hooks receive)."""
    return custom_state if agent.state_schema is None else agent.state_schema.model_validate(custom_state)


def input_messages(message: SendInput) -> list[Message]:
    """User messages for a string or a list of :class:`UserInputMessage`."""
    if isinstance(message, str):
        return [UserMessage(content=message)]
    return [UserMessage(content=m.content, metadata=_with_files(m)) for m in message]


def _with_files(message: UserInputMessage) -> dict[str, Any] | None:
    if not message.files:
        return message.metadata
    metadata = dict(message.metadata or {})
    metadata[COMMON_METADATA_KEYS.FILES] = [f.model_dump(mode="json", exclude_none=True) for f in message.files]
    return metadata


def normalize_agent_input(value: str | AgentInput | dict[str, Any]) -> AgentInput:
    """Accept the seeds' input shapes: a string, or ``{message, state?, messages?}``."""
    if isinstance(value, AgentInput):
        return value
    if isinstance(value, str):
        return AgentInput(message=value)
    return AgentInput.model_validate(value)


def create_initial_agent_state(
    *,
    session_id: str,
    agent_type: str,
    run_id: str | None = None,
    stream_id: str | None = None,
    custom_state: dict[str, Any] | None = None,
    parent_session_id: str | None = None,
) -> AgentState:
    """The empty state of a session before any input: no messages, step 0, status ``running``.

    The seeds' ``createInitialAgentState``: what a store or a custom runtime starts from, without an
    agent definition at hand (``initialize_agent_state`` adds the schema defaults and the input).
    """
    return AgentState(
        session_id=session_id,
        run_id=run_id or session_id,
        agent_type=agent_type,
        stream_id=stream_id or session_id,
        custom_state=dict(custom_state or {}),
        parent_session_id=parent_session_id,
    )


def initialize_agent_state(
    *,
    agent: AgentConfig,
    input: str | AgentInput | dict[str, Any],
    run_id: str,
    stream_id: str,
    session_id: str | None = None,
    parent_session_id: str | None = None,
) -> AgentState:
    """The state of a brand-new session: schema defaults, optional history, then the user message(s)."""
    parsed = normalize_agent_input(input)
    history: list[Message] = list(parsed.messages or [])
    return AgentState(
        session_id=session_id or run_id,
        run_id=run_id,
        agent_type=agent.name,
        stream_id=stream_id,
        custom_state=default_custom_state(agent, parsed.state),
        messages=[*history, *input_messages(parsed.message)],
        parent_session_id=parent_session_id,
    )


def build_agent_messages_for_llm(
    agent: AgentConfig,
    messages: Sequence[Message],
    custom_state: dict[str, Any],
    *,
    extra_system_sections: Sequence[str] = (),
    skills_fragment: str = "",
) -> list[Message]:
    """:func:`build_messages_for_llm` with the agent's prompt, typed state and completion tool.

    Prompted output mode adds the schema section (before the other sections: it never changes).
    ``skills_fragment`` is the run's resolved skills catalog
    (:func:`~helix_dbos.skills.resolve_skills_catalog`), appended last so everything before it,
    and it itself, stays byte-identical from step to step (the cached prefix).
    """
    prompted = [prompted_output_section(agent.output_schema)] if agent.output_mode == "prompted" else []
    return build_messages_for_llm(
        messages,
        agent.system_prompt,
        typed_custom_state(agent, custom_state),
        completion_tool_name=completion_tool_name(agent),
        extra_system_sections=[*prompted, *extra_system_sections, skills_fragment],
    )
