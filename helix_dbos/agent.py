"""Agent definitions: ``define_agent``, ``AgentConfig`` and lifecycle hooks.

An agent is data: a name, a prompt, schemas, tools and model settings. The durable runtime looks
agents up by name when a workflow runs, so a new agent or an edited prompt never changes DBOS
workflow source and never strands a run in flight. The model settings, :class:`LLMConfig`, live
in :mod:`helix_dbos.llm.config`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from helix_dbos.capability import RESERVED_CAPABILITY_NAMES, RunCapability
from helix_dbos.compaction.policy import CompactionPolicy
from helix_dbos.double_text import DoubleTextPolicy, check_double_text
from helix_dbos.errors import DefinitionError, HelixError
from helix_dbos.llm.config import LLMConfig
from helix_dbos.mcp.servers import MCPServer
from helix_dbos.memory.config import MemoryConfig
from helix_dbos.skills.model import skill_name_problem
from helix_dbos.skills.provider import SkillProvider, SkillsConfig, to_skill_provider
from helix_dbos.step_result import StepResult
from helix_dbos.tool import Tool
from helix_dbos.usage import Budget

HookFn = Callable[..., Awaitable[None] | None]

_AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # fullmatch: `$` would accept "x\n"


class AgentHooks(BaseModel):
    """Lifecycle hooks; each may be sync or async. Tool hooks fire in the seeds' order.

    ``before_tool -> execute -> on_state_change -> on_message -> after_tool``, in the input order
    of the tool calls even when the tools themselves ran in parallel.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    on_agent_start: HookFn | None = None
    before_llm_call: HookFn | None = None
    after_llm_call: HookFn | None = None
    before_tool: HookFn | None = None
    after_tool: HookFn | None = None
    on_state_change: HookFn | None = None
    on_message: HookFn | None = None
    on_agent_complete: HookFn | None = None
    on_agent_fail: HookFn | None = None
    on_agent_suspended: HookFn | None = None
    on_agent_resumed: HookFn | None = None


OutputMode = Literal["tool", "native", "prompted"]
"""How an agent with an ``output_schema`` returns its output: the ``__finish__`` tool (``"tool"``),
the provider's structured-output format (``"native"``), or JSON text asked for in the system prompt
(``"prompted"``). See :mod:`helix_dbos.orchestration.output_modes`."""

CompanionMode = Literal["blocking", "non-blocking"]
"""How a parent talks to a persistent companion: wait for its verdict, or be notified later."""


class PersistentAgentConfig(BaseModel):
    """A persistent companion of a parent agent (the seeds' ``PersistentAgentConfig``).

    Listing one in ``define_agent(..., persistent_agents=[...])`` gives the parent the
    ``companion__*`` tools. A companion keeps its session between consultations, so a parent can
    ask it again and it answers with its memory intact (the critic loop).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    agent: AgentConfig
    """The companion's definition; it must have an ``output_schema`` (it completes via ``__finish__``)."""
    mode: CompanionMode
    """``blocking``: spawn/send wait for the companion's result. ``non-blocking``: they return at
    once, and the parent is told of the result before a later model call."""
    description: str | None = None
    """What the companion is for, shown to the parent's model in the companion tools' descriptions."""


class AgentConfig(BaseModel):
    """A complete agent definition. Build it with :func:`define_agent`."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str
    """Unique agent name; the runtime resolves agents by it."""
    description: str = ""
    system_prompt: str | Callable[[Any], str]
    """A string, or a function of the custom state returning one (re-evaluated every step)."""
    state_schema: type[BaseModel] | None = None
    """Custom state model; every field needs a default so a new session can start from it."""
    output_schema: Any = None
    """A pydantic model, or any type pydantic can validate; enables the ``__finish__`` tool."""
    output_mode: OutputMode = "tool"
    """How the model returns the output: ``__finish__`` (``"tool"``), the provider's
    ``response_format`` (``"native"``) or JSON text the system prompt asks for (``"prompted"``)."""
    tools: tuple[Tool, ...] = ()
    llm_config: LLMConfig
    max_steps: int = Field(default=20, gt=0)
    """Safety limit on LLM steps per run."""
    stop_when: Callable[[StepResult], bool] | None = None
    """Application-specific stop condition, checked after every step."""
    hooks: AgentHooks = Field(default_factory=AgentHooks)
    persistent_agents: tuple[PersistentAgentConfig, ...] = ()
    """Companions this agent can spawn and consult through the auto-injected ``companion__*`` tools."""
    memory: MemoryConfig | None = None
    """Memories injected (once each per session) before a turn's first model call; see :mod:`helix_dbos.memory`.
    Not inherited: a sub-agent or companion has only the memory its own definition names."""
    budget: Budget | None = None
    """Limits on tokens or cost; crossing one suspends the run for an approval (see :class:`Budget`)."""
    skills: SkillProvider | None = None
    """Where the agent's skills come from; set, it adds the catalog and ``load_skill`` / ``read_skill_file``.
    Not inherited: a sub-agent or companion uses only the skills of its own definition."""
    preload_skills: tuple[str, ...] = ()
    """Skills whose bodies are in the system prompt on every step (unknown names warn and are skipped)."""
    capabilities: tuple[RunCapability, ...] = ()
    """The agent's own run features (:mod:`helix_dbos.capability`), called after the built-in ones, in order.
    Not inherited: a sub-agent or companion runs only the capabilities of its own definition."""

    mcp_servers: tuple[MCPServer, ...] = ()
    """MCP servers whose tools the agent can call (``{server}__{tool}``); see :mod:`helix_dbos.mcp`.
    Each run lists them in recorded steps. Not inherited, like ``capabilities``."""
    double_text: DoubleTextPolicy = "reject"
    """What a message posted while one of its runs is in flight does, unless the request says
    (:mod:`helix_dbos.double_text`); ``"steer"`` also makes its runs listen for steering messages."""
    compaction: CompactionPolicy | None = None
    """What the model sees once the transcript is long (window, cleared tool results, summary); the
    transcript itself is kept whole. See :mod:`helix_dbos.compaction`. Not inherited."""

    def get_tool(self, name: str) -> Tool | None:
        """The tool with this name, if the agent has it."""
        return next((t for t in self.tools if t.name == name), None)

    @property
    def finish_with_tools(self) -> tuple[Tool, ...]:
        """The tools whose call completes the agent."""
        return tuple(t for t in self.tools if t.finish_with)

    def persistent_agent(self, agent_type: str) -> PersistentAgentConfig | None:
        """The companion configured under this agent name, if any."""
        return next((p for p in self.persistent_agents if p.agent.name == agent_type), None)

    def output_adapter(self) -> TypeAdapter[Any] | None:
        """A validator for the output schema, or ``None`` when the agent has none."""
        return None if self.output_schema is None else TypeAdapter(self.output_schema)


def define_agent(
    name: str,
    *,
    system_prompt: str | Callable[[Any], str],
    llm_config: LLMConfig | dict[str, Any] | str,
    description: str = "",
    state_schema: type[BaseModel] | None = None,
    output_schema: Any = None,
    output_mode: OutputMode = "tool",
    tools: Sequence[Tool] = (),
    max_steps: int = 20,
    stop_when: Callable[[StepResult], bool] | None = None,
    hooks: AgentHooks | dict[str, HookFn] | None = None,
    persistent_agents: Sequence[PersistentAgentConfig] = (),
    memory: MemoryConfig | None = None,
    budget: Budget | None = None,
    skills: SkillsConfig | None = None,
    preload_skills: Sequence[str] = (),
    capabilities: Sequence[RunCapability] = (),
    mcp_servers: Sequence[MCPServer] = (),
    workspace: Any = None,
    compaction: CompactionPolicy | None = None,
    double_text: DoubleTextPolicy = "reject",
) -> AgentConfig:
    """Define an agent, validating it now so mistakes fail at import time, not mid-run.

    ``llm_config`` may be an :class:`LLMConfig`, a dict of its fields, or just the model string.
    ``budget`` limits what each run (or the session) may spend before a human must approve more.
    ``skills`` is a :class:`~helix_dbos.skills.SkillProvider` or a list of ``define_skill(...)``
    results (sugar for ``in_code_skill_provider``). ``mcp_servers`` are
    :class:`~helix_dbos.mcp.MCPServerStdio` / :class:`~helix_dbos.mcp.MCPServerStreamableHTTP`
    configs whose tools the agent calls (``docs/mcp.md``). ``compaction`` bounds what the model sees of a
    long session (``docs/long-sessions.md``). ``output_mode`` picks how an agent with an
    ``output_schema`` returns it (``docs/finishing-agents.md``). ``workspace`` is accepted only as ``None``:
    like the seeds' DBOS runtime, helix-dbos has no workspaces and refuses one with a
    ``framework_not_supported`` :class:`HelixError` rather than run the agent without it.
    ``double_text`` is the default policy for a message posted while a run is in flight
    (``docs/double-texting.md``).
    """
    if workspace is not None:
        raise HelixError(
            f"agent {name!r}: workspaces are not supported by the DBOS runtime: a workspace is live "
            "state (files, a sandbox) outside the database, which a workflow recovered in another "
            "process could not reach; give the agent tools that reach the files instead",
            code="framework_not_supported",
            retryable=False,
        )
    if not isinstance(name, str) or not _AGENT_NAME.fullmatch(name):
        raise DefinitionError(
            f"invalid agent name {name!r}: start with a letter or digit; use letters, digits, '_', '.', '-'"
        )
    if not (isinstance(system_prompt, str) or callable(system_prompt)):
        raise DefinitionError(f"agent {name!r}: system_prompt must be a string or a function of the state")
    if isinstance(llm_config, str):
        llm_config = {"model": llm_config}
    try:
        config = llm_config if isinstance(llm_config, LLMConfig) else LLMConfig.model_validate(llm_config)
    except ValueError as exc:
        raise DefinitionError(f"agent {name!r}: invalid llm_config: {exc}") from exc
    tool_list = tuple(tools)
    seen: set[str] = set()
    for tool in tool_list:
        if not isinstance(tool, Tool):
            raise DefinitionError(f"agent {name!r}: tools must be created with define_tool, got {tool!r}")
        if tool.name in seen:
            raise DefinitionError(f"agent {name!r}: duplicate tool name {tool.name!r}")
        seen.add(tool.name)
    if state_schema is not None:
        if not (isinstance(state_schema, type) and issubclass(state_schema, BaseModel)):
            raise DefinitionError(f"agent {name!r}: state_schema must be a pydantic model class")
        try:
            state_schema()
        except ValueError as exc:
            raise DefinitionError(
                f"agent {name!r}: every state_schema field needs a default so a new session can start: {exc}"
            ) from exc
    if output_schema is not None:
        try:
            TypeAdapter(output_schema).json_schema()
        except Exception as exc:
            raise DefinitionError(f"agent {name!r}: output_schema is not a type pydantic can validate: {exc}") from exc
    _check_output_mode(name, output_mode, output_schema, tool_list)
    if not isinstance(max_steps, int) or max_steps <= 0:
        raise DefinitionError(f"agent {name!r}: max_steps must be a positive integer")
    if stop_when is not None and not callable(stop_when):
        raise DefinitionError(f"agent {name!r}: stop_when must be callable")
    try:
        hook_set = hooks if isinstance(hooks, AgentHooks) else AgentHooks(**(hooks or {}))
    except ValueError as exc:
        raise DefinitionError(f"agent {name!r}: invalid hooks: {exc}") from exc
    companions = _check_persistent_agents(name, persistent_agents)
    if memory is not None and not isinstance(memory, MemoryConfig):
        raise DefinitionError(f"agent {name!r}: memory must be a MemoryConfig, got {memory!r}")
    if budget is not None and not isinstance(budget, Budget):
        raise DefinitionError(f"agent {name!r}: budget must be a helix_dbos.Budget, got {budget!r}")
    provider, preload = _check_skills(name, skills, preload_skills)
    own = _check_capabilities(name, capabilities)
    servers = _check_mcp_servers(name, mcp_servers)
    if compaction is not None and not isinstance(compaction, CompactionPolicy):
        raise DefinitionError(f"agent {name!r}: compaction must be a CompactionPolicy, got {compaction!r}")
    policy = check_double_text(double_text) or "reject"
    return AgentConfig(
        name=name,
        description=description,
        system_prompt=system_prompt,
        state_schema=state_schema,
        output_schema=output_schema,
        output_mode=output_mode,
        tools=tool_list,
        llm_config=config,
        max_steps=max_steps,
        stop_when=stop_when,
        hooks=hook_set,
        persistent_agents=companions,
        memory=memory,
        budget=budget,
        skills=provider,
        preload_skills=preload,
        capabilities=own,
        mcp_servers=servers,
        compaction=compaction,
        double_text=policy,
    )


def _check_output_mode(name: str, mode: object, output_schema: Any, tools: Sequence[Tool]) -> None:
    """A known mode; the native and prompted modes need an output schema and no finish_with tool.

    A finish_with tool is a second way to complete that the model could pick over the answer the
    mode asks for; rather than guess which one wins, the combination is refused.
    """
    if mode not in ("tool", "native", "prompted"):
        raise DefinitionError(f"agent {name!r}: output_mode must be 'tool', 'native' or 'prompted', got {mode!r}")
    if mode == "tool":
        return
    if output_schema is None:
        raise DefinitionError(f"agent {name!r}: output_mode={mode!r} needs an output_schema")
    finishing = [t.name for t in tools if t.finish_with]
    if finishing:
        raise DefinitionError(
            f"agent {name!r}: output_mode={mode!r} cannot be combined with finish_with tools {finishing}: "
            "the output comes from the model's answer, not from a tool"
        )


def _check_mcp_servers(name: str, servers: Sequence[MCPServer]) -> tuple[MCPServer, ...]:
    """Each a server config, named once (its name is part of step names).

    Whether the tools' names clash can only be known when the servers are listed, in a run.
    """
    configs = tuple(servers)
    names: set[str] = set()
    for server in configs:
        if not isinstance(server, MCPServer):
            raise DefinitionError(
                f"agent {name!r}: mcp_servers must be MCPServerStdio or MCPServerStreamableHTTP, got {server!r}"
            )
        if server.name in names:
            raise DefinitionError(f"agent {name!r}: MCP server {server.name!r} is listed twice")
        names.add(server.name)
    return configs


def _check_capabilities(name: str, capabilities: Sequence[RunCapability]) -> tuple[RunCapability, ...]:
    """Each an instance of a :class:`RunCapability` subclass, named once, with no built-in's name."""
    own = tuple(capabilities)
    seen: set[str] = set()
    for capability in own:
        if not isinstance(capability, RunCapability):
            raise DefinitionError(f"agent {name!r}: capabilities must be RunCapability instances, got {capability!r}")
        label = capability.name
        if not _AGENT_NAME.fullmatch(label) or label in RESERVED_CAPABILITY_NAMES:
            raise DefinitionError(
                f"agent {name!r}: capability name {label!r} is reserved or not a valid step name part "
                "(set the class attribute name: letters, digits, '_', '.', '-')"
            )
        if label in seen:
            raise DefinitionError(f"agent {name!r}: capability {label!r} is listed twice")
        seen.add(label)
    return own


def _check_skills(
    name: str, skills: SkillsConfig | None, preload_skills: Sequence[str]
) -> tuple[SkillProvider | None, tuple[str, ...]]:
    """The agent's skill provider and preload names.

    Whether a preload name exists is only known when the provider is asked (at run time), so here
    only its spelling is checked.
    """
    try:
        provider = to_skill_provider(skills)
    except DefinitionError as exc:
        raise DefinitionError(f"agent {name!r}: {exc.message}") from exc
    if isinstance(preload_skills, str):
        raise DefinitionError(f"agent {name!r}: preload_skills must be a list of skill names, not a string")
    preload = tuple(preload_skills)
    for skill in preload:
        problem = skill_name_problem(skill)
        if problem is not None:
            raise DefinitionError(f"agent {name!r}: preload_skills entry {skill!r}: {problem}")
    return provider, preload


def _check_persistent_agents(name: str, configs: Sequence[PersistentAgentConfig]) -> tuple[PersistentAgentConfig, ...]:
    """Refuse companions the runtime could not drive: each must finish with a typed output.

    The parent reads a companion's answer from its ``__finish__`` output, and a re-consult heals
    and continues that very transcript; an agent without an ``output_schema`` has neither.
    """
    companions = tuple(configs)
    seen: set[str] = set()
    for config in companions:
        if not isinstance(config, PersistentAgentConfig):
            raise DefinitionError(f"agent {name!r}: persistent_agents must be PersistentAgentConfig, got {config!r}")
        child = config.agent
        if child.output_schema is None:
            raise DefinitionError(
                f"agent {name!r}: persistent agent {child.name!r} needs an output_schema "
                "(a companion always completes via __finish__)"
            )
        if child.output_mode != "tool":
            raise DefinitionError(
                f"agent {name!r}: persistent agent {child.name!r} has output_mode={child.output_mode!r}; "
                "a companion completes via __finish__ (output_mode='tool')"
            )
        if child.name == name:
            raise DefinitionError(f"agent {name!r}: an agent cannot be its own persistent companion")
        if child.name in seen:
            raise DefinitionError(f"agent {name!r}: persistent agent {child.name!r} is listed twice")
        seen.add(child.name)
    return companions
