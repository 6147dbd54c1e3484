"""Agents resolved by name, and the fingerprint that says whether a definition changed.

The DBOS workflow takes an agent *name*, not an agent: definitions are data looked up when the
workflow runs, so adding an agent or editing a prompt never changes workflow source (DBOS hashes
that source into the application version, and a changed version strands runs in flight).

Because a recovered or continued run may meet an edited definition, every run records the
fingerprint of the definition it started with; :func:`agent_fingerprint` covers what changes the
model's behaviour (prompt, tools and their schemas, output schema, model).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
from typing import Any

from helix_dbos.agent import AgentConfig
from helix_dbos.errors import HelixError
from helix_dbos.orchestration.state_operations import build_effective_tools
from helix_dbos.sub_agent import sub_agents_of


def _callable_identity(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _output_schema_json(schema: Any) -> Any:
    if schema is None:
        return None
    from pydantic import TypeAdapter

    return TypeAdapter(schema).json_schema()


def agent_fingerprint(agent: AgentConfig) -> str:
    """A short, stable hash of the parts of a definition that change what a run does."""
    prompt = agent.system_prompt if isinstance(agent.system_prompt, str) else _callable_identity(agent.system_prompt)
    tools = [
        {
            "name": t.name,
            "description": t.description,
            "schema": t.json_schema(),
            "strict": t.strict,
            "finish_with": t.finish_with,
            "client": t.is_client,
            "approval": t.require_approval is not False,
        }
        for t in build_effective_tools(agent)
    ]
    payload = {
        "name": agent.name,
        "prompt": prompt,
        "tools": tools,
        "output": _output_schema_json(agent.output_schema),
        "model": agent.llm_config.model,
        "max_steps": agent.max_steps,
    }
    if agent.capabilities:  # only then: the fingerprints of agents without any stay what they were
        payload["capabilities"] = [c.name for c in agent.capabilities]
    if agent.output_mode != "tool":  # likewise
        payload["output_mode"] = agent.output_mode
    if agent.mcp_servers:  # likewise
        payload["mcp_servers"] = [[s.name, s.prefix] for s in agent.mcp_servers]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return digest[:16]


class AgentRegistry:
    """Name -> agent, thread-safe. Registering an edited agent under the same name replaces it."""

    def __init__(self) -> None:
        self._agents: dict[str, AgentConfig] = {}
        self._fingerprints: dict[str, str] = {}
        self._lock = threading.Lock()

    def register(self, agent: AgentConfig) -> AgentConfig:
        """Add or replace an agent; returns it for chaining (re-registering the same object is free).

        The agents it delegates to (sub-agent tools, persistent companions) are registered with it:
        a worker that recovers a child run resolves the child's agent by name before the parent has
        replayed anything.
        """
        with self._lock:
            if self._agents.get(agent.name) is agent:
                return agent
        fingerprint = agent_fingerprint(agent)
        with self._lock:
            self._agents[agent.name] = agent
            self._fingerprints[agent.name] = fingerprint
        for child in [*sub_agents_of(agent), *(c.agent for c in agent.persistent_agents)]:
            self.register(child)
        return agent

    def get(self, name: str) -> AgentConfig | None:
        """The agent registered under ``name``, if any."""
        with self._lock:
            return self._agents.get(name)

    def require(self, name: str) -> AgentConfig:
        """The agent, or a clear error saying the worker must register it before launch."""
        agent = self.get(name)
        if agent is None:
            raise HelixError(
                f"Agent {name!r} is not registered in this process. Register it with "
                "executor.register(agent) (or import the module that defines it) before DBOS.launch(), "
                "so runs recovered at start-up can find it.",
                code="framework_internal_error",
            )
        return agent

    def fingerprint(self, name: str) -> str | None:
        """Fingerprint of the registered definition."""
        with self._lock:
            return self._fingerprints.get(name)

    def names(self) -> list[str]:
        """Registered agent names."""
        with self._lock:
            return sorted(self._agents)
