"""Agent memory (seeds 001/002): save memories, search them, inject the relevant ones into a turn.

- :mod:`.base` the records and the ``MemoryStore`` protocol (no implementation);
- :mod:`.injection` the hidden injection message and ``collect_injected_memory_ids`` (pure);
- :mod:`.executors` when embeddings are computed (inline, or background with a drain);
- :mod:`.manager` ``MemoryManager``; :mod:`.config` ``MemoryConfig`` for ``define_agent(memory=...)``;
- :mod:`.in_memory` and :mod:`.postgres` the stores; :mod:`.litellm_embedding` embeddings via LiteLLM.

The runtime's side (the ``{agent}.memory`` step that searches before a turn's first model call) is
:mod:`helix_dbos.runtime.memory`.
"""

from helix_dbos.memory.base import (
    DEFAULT_NAMESPACE,
    EmbeddingFunction,
    EmbeddingStatus,
    Memory,
    MemorySearchResult,
    MemoryStore,
)
from helix_dbos.memory.config import MemoryConfig, MemoryContext
from helix_dbos.memory.executors import BackgroundEmbeddingExecutor, EmbeddingExecutor, InlineEmbeddingExecutor
from helix_dbos.memory.in_memory import InMemoryMemoryStore
from helix_dbos.memory.injection import (
    MEMORY_IDS_KEY,
    collect_injected_memory_ids,
    create_memory_injection_message,
    is_memory_injection,
)
from helix_dbos.memory.litellm_embedding import LiteLLMEmbedding
from helix_dbos.memory.manager import MemoryManager
from helix_dbos.memory.postgres import PostgresMemoryStore

__all__ = [
    "DEFAULT_NAMESPACE",
    "MEMORY_IDS_KEY",
    "BackgroundEmbeddingExecutor",
    "EmbeddingExecutor",
    "EmbeddingFunction",
    "EmbeddingStatus",
    "InMemoryMemoryStore",
    "InlineEmbeddingExecutor",
    "LiteLLMEmbedding",
    "Memory",
    "MemoryConfig",
    "MemoryContext",
    "MemoryManager",
    "MemorySearchResult",
    "MemoryStore",
    "PostgresMemoryStore",
    "collect_injected_memory_ids",
    "create_memory_injection_message",
    "is_memory_injection",
]
