"""Memory injection in the agent workflow: search in a step, append the hidden message from its output.

The search reads a mutable table and may call an embedding service, so it is the ``{agent}.memory``
step: DBOS records what it found, and a recovered run appends the very message it appended before
the crash (even if memories were saved or deleted since), which the next commit persists once. The
ids already in the transcript (``collect_injected_memory_ids``) are excluded, so a memory reaches a
session at most once, across turns and across crashes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dbos import DBOS

from helix_dbos.agent import AgentConfig
from helix_dbos.capability import RunCapability
from helix_dbos.memory.config import MemoryContext
from helix_dbos.memory.injection import MEMORY_IDS_KEY, collect_injected_memory_ids, latest_user_query
from helix_dbos.messages import UserMessage
from helix_dbos.runtime import step_names
from helix_dbos.runtime.step_outputs import MemoryStepOutput

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext


def inject_memories(run: RunContext) -> None:
    """Before the turn's first model call: append the relevant memories not yet in the session.

    No step at all for an agent without memory (or with injection off), or without a user message
    to search for, so runs of other agents record exactly the steps they always did.
    """
    config = run.agent.memory
    if config is None or config.max_injected_memories == 0:
        return
    query = latest_user_query(run.messages)
    if not query:
        return
    context = MemoryContext(
        session_id=run.who.session_id,
        root_session_id=run.who.root_session_id or run.who.session_id,
        agent_name=run.agent.name,
        custom_state=dict(run.custom_state),
    )
    exclude = sorted(collect_injected_memory_ids(run.messages))
    out: MemoryStepOutput = DBOS.run_step(
        {"name": step_names.memory(run.agent.name)}, memory_step, run.agent, context, query, exclude
    )
    if out["message"] is not None:
        run.append(UserMessage.model_validate(out["message"]))


class MemoryCapability(RunCapability):
    """Memory on the seam: the relevant memories, injected once per run before its first model call."""

    name = "memory"

    def before_first_model_call(self, run: RunContext) -> None:
        inject_memories(run)


def memory_step(agent: AgentConfig, context: MemoryContext, query: str, exclude: list[str]) -> MemoryStepOutput:
    """Search the agent's memories for ``query`` and build the injection message (the step body)."""
    config = agent.memory
    assert config is not None
    message = config.manager.build_injection_message(
        query,
        namespace=config.namespace_for(context),
        limit=config.max_injected_memories,
        exclude_memory_ids=exclude,
    )
    if message is None:
        return {"memory_ids": [], "message": None}
    ids = [str(i) for i in (message.metadata or {}).get(MEMORY_IDS_KEY, [])]
    return {"memory_ids": ids, "message": message.model_dump(mode="json")}


__all__ = ["MemoryCapability", "inject_memories", "memory_step"]
