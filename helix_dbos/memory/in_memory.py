"""A memory store in a dict, for tests and single-process development.

Its "full-text search" is word overlap (lower-cased, punctuation stripped), enough to exercise
everything built on the store without PostgreSQL; its vector search is exact cosine similarity.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

from helix_dbos.memory.base import (
    EmbeddingStatus,
    Memory,
    MemorySearchResult,
    cosine_similarity,
    fuse_rankings,
)

_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


class InMemoryMemoryStore:
    """Memories in a dict; embeddings beside them."""

    def __init__(self) -> None:
        self._memories: dict[str, Memory] = {}
        self._embeddings: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    @property
    def supports_vectors(self) -> bool:
        return True

    def save(self, memory: Memory) -> None:
        with self._lock:
            self._memories[memory.id] = memory

    def get(self, memory_id: str) -> Memory | None:
        with self._lock:
            return self._memories.get(memory_id)

    def delete(self, memory_id: str) -> bool:
        with self._lock:
            self._embeddings.pop(memory_id, None)
            return self._memories.pop(memory_id, None) is not None

    def set_embedding(self, memory_id: str, embedding: list[float] | None, status: EmbeddingStatus) -> None:
        with self._lock:
            memory = self._memories.get(memory_id)
            if memory is None:
                return
            self._memories[memory_id] = memory.model_copy(update={"embedding_status": status})
            if embedding is not None:
                self._embeddings[memory_id] = list(embedding)

    def list_pending(self, limit: int = 100) -> list[Memory]:
        with self._lock:
            pending = [m for m in self._memories.values() if m.embedding_status == "pending"]
        return sorted(pending, key=lambda m: (m.created_at_ms, m.id))[:limit]

    def search(
        self,
        namespace: str,
        query: str,
        *,
        query_embedding: list[float] | None = None,
        limit: int = 5,
        exclude_ids: Iterable[str] = (),
    ) -> list[MemorySearchResult]:
        excluded = set(exclude_ids)
        terms = _words(query)
        with self._lock:
            candidates = [m for m in self._memories.values() if m.namespace == namespace and m.id not in excluded]
            embeddings = dict(self._embeddings)
        scored = [(len(terms & _words(m.content)), m) for m in candidates]
        text = [m for score, m in sorted(scored, key=lambda p: (-p[0], p[1].id)) if score > 0]
        vector: list[Memory] = []
        if query_embedding is not None:
            near = [(cosine_similarity(query_embedding, embeddings[m.id]), m) for m in candidates if m.id in embeddings]
            vector = [m for sim, m in sorted(near, key=lambda p: (-p[0], p[1].id)) if sim > 0]
        return fuse_rankings(text[: limit * 2], vector[: limit * 2], limit)


__all__ = ["InMemoryMemoryStore"]
