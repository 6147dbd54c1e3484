"""``define_agent(memory=MemoryConfig(...))``: which memories an agent sees, and where they live."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from helix_dbos.memory.base import DEFAULT_NAMESPACE, EmbeddingFunction, MemoryStore
from helix_dbos.memory.executors import EmbeddingExecutor
from helix_dbos.memory.manager import MemoryManager


@dataclass(frozen=True)
class MemoryContext:
    """What a ``namespace`` function may look at: the run's session and its custom state."""

    session_id: str
    root_session_id: str
    agent_name: str
    custom_state: dict[str, Any]


class MemoryConfig(BaseModel):
    """An agent's memory (the seeds' ``MemoryConfig``).

    Before a turn's first model call, the memories of ``namespace`` that best match the user's
    latest message (at most ``max_injected_memories``, none already injected into the session) are
    appended as one hidden user message. The search runs in a DBOS step, so a recovered run sees
    the memories it saw before the crash, even if memories were saved or deleted since.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    store: MemoryStore
    embed: EmbeddingFunction | None = None
    """Texts to vectors (``LiteLLMEmbedding(...)``, ``helix_dbos.testing.deterministic_embedding``);
    ``None`` searches by full text only."""
    embedding_executor: EmbeddingExecutor | None = None
    """``InlineEmbeddingExecutor()`` when ``None``."""
    namespace: str | Callable[[MemoryContext], str] = DEFAULT_NAMESPACE
    """Whose memories: a constant, or a function of the run (e.g. a user id kept in the custom state)."""
    max_injected_memories: int = Field(default=5, ge=0)
    """Per turn; ``0`` turns automatic injection off (the manager can still be used by tools)."""
    _manager: MemoryManager | None = PrivateAttr(default=None)

    @property
    def manager(self) -> MemoryManager:
        """The manager over ``store`` (built once; share it with tools that save memories)."""
        if self._manager is None:
            self._manager = MemoryManager(self.store, embed=self.embed, embedding_executor=self.embedding_executor)
        return self._manager

    def namespace_for(self, context: MemoryContext) -> str:
        return self.namespace if isinstance(self.namespace, str) else str(self.namespace(context))


__all__ = ["MemoryConfig", "MemoryContext"]
