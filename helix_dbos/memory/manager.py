"""The memory manager: save, embed, search, and build the injection message (the seeds' ``MemoryManager``)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

from helix_dbos.memory.base import DEFAULT_NAMESPACE, EmbeddingFunction, Memory, MemorySearchResult, MemoryStore
from helix_dbos.memory.executors import EmbeddingExecutor, InlineEmbeddingExecutor
from helix_dbos.memory.injection import create_memory_injection_message
from helix_dbos.messages import UserMessage

_log = logging.getLogger("helix_dbos.memory")


class MemoryManager:
    """Saves memories and finds them again; one per store, shared by every agent that uses it.

    ``embed`` is optional: without it memories stay ``pending`` and search is full-text only.
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        embed: EmbeddingFunction | None = None,
        embedding_executor: EmbeddingExecutor | None = None,
    ) -> None:
        self.store = store
        self.embed = embed
        self.embedding_executor: EmbeddingExecutor = embedding_executor or InlineEmbeddingExecutor()

    def save(
        self,
        content: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        metadata: dict[str, Any] | None = None,
        memory_id: str | None = None,
    ) -> Memory:
        """Save a memory (``pending``, full-text searchable now) and hand its embedding to the executor."""
        memory = Memory(
            id=memory_id or f"mem_{uuid.uuid4().hex}",
            content=content,
            namespace=namespace,
            metadata=metadata,
            embedding_status="pending",
            created_at_ms=int(time.time() * 1000),
        )
        self.store.save(memory)
        if self.embed is not None:
            self.embedding_executor.submit(lambda: self._embed_one(memory))
        return memory

    def _embed_one(self, memory: Memory) -> None:
        assert self.embed is not None
        try:
            vector = [float(x) for x in self.embed([memory.content])[0]]
        except Exception:
            _log.warning("embedding memory %s failed; it stays full-text searchable", memory.id, exc_info=True)
            self.store.set_embedding(memory.id, None, "failed")
            return
        self.store.set_embedding(memory.id, vector, "complete")

    def process_unembedded_memories(self, limit: int = 100) -> int:
        """Embed memories left ``pending`` (a crash, an embedding outage); returns how many were tried."""
        if self.embed is None:
            return 0
        pending = self.store.list_pending(limit)
        for memory in pending:
            self._embed_one(memory)
        return len(pending)

    def search(
        self, query: str, *, namespace: str = DEFAULT_NAMESPACE, limit: int = 5, exclude_ids: Iterable[str] = ()
    ) -> list[MemorySearchResult]:
        """Best memories for ``query``: full-text, fused with vector search when the store and ``embed`` allow."""
        query_embedding: list[float] | None = None
        if self.embed is not None and self.store.supports_vectors and query.strip():
            try:
                query_embedding = [float(x) for x in self.embed([query])[0]]
            except Exception:
                _log.warning("embedding the memory query failed; searching by full text only", exc_info=True)
        return self.store.search(
            namespace, query, query_embedding=query_embedding, limit=limit, exclude_ids=exclude_ids
        )

    def build_injection_message(
        self,
        query: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        limit: int = 5,
        exclude_memory_ids: Iterable[str] = (),
    ) -> UserMessage | None:
        """The hidden injection message for ``query`` (``None`` when nothing new matches)."""
        found = self.search(query, namespace=namespace, limit=limit, exclude_ids=exclude_memory_ids)
        return create_memory_injection_message([r.memory for r in found])

    def shutdown(self) -> None:
        """Drain the embedding executor (a background one finishes what is queued)."""
        self.embedding_executor.shutdown(wait=True)


__all__ = ["MemoryManager"]
