"""Memory records and the store protocol (the seeds' memory contracts), with no implementation.

A memory is a short text an agent should remember across sessions ("the user prefers metric
units"). It is saved with ``embedding_status="pending"`` and is full-text searchable at once; an
:class:`~helix_dbos.memory.executors.EmbeddingExecutor` computes its embedding afterwards and the
store marks it ``complete`` (or ``failed``). Search therefore never waits on an embedding service,
and a memory whose embedding failed is still found by its words.

Implementations: :class:`~helix_dbos.memory.in_memory.InMemoryMemoryStore` (tests, one process) and
:class:`~helix_dbos.memory.postgres.PostgresMemoryStore` (full-text search with ``tsvector``, vectors
with pgvector when the extension is installed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

EmbeddingStatus = Literal["pending", "complete", "failed"]
"""``pending`` until the executor has run; ``failed`` keeps the memory text-searchable only."""

EmbeddingFunction = Callable[[Sequence[str]], list[list[float]]]
"""Texts in, one vector per text out (same order). Called outside workflow code only."""

DEFAULT_NAMESPACE = "default"


class Memory(BaseModel):
    """One saved memory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    """Unique id (the injection message records these, so a memory is injected once per session)."""
    content: str
    """The text the model sees, and the text full-text search matches."""
    namespace: str = DEFAULT_NAMESPACE
    """Whose memory it is (a user, a tenant): search never crosses namespaces."""
    metadata: dict[str, Any] | None = None
    embedding_status: EmbeddingStatus = "pending"
    created_at_ms: int = 0
    """Milliseconds since the epoch."""


class MemorySearchResult(BaseModel):
    """A memory found by a search, best first."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: Memory
    score: float
    """Reciprocal-rank fusion of the text and vector rankings: higher is better, comparable within one search."""
    matched_by: list[Literal["text", "vector"]] = Field(default_factory=list)


@runtime_checkable
class MemoryStore(Protocol):
    """Where memories live. Every method is synchronous and safe to call from several threads."""

    @property
    def supports_vectors(self) -> bool:
        """Whether :meth:`search` ranks by embedding too (else by full-text search only)."""
        ...

    def save(self, memory: Memory) -> None:
        """Insert ``memory`` (status ``pending``); searchable by its words as soon as this returns."""
        ...

    def get(self, memory_id: str) -> Memory | None:
        """The memory with this id, if any."""
        ...

    def delete(self, memory_id: str) -> bool:
        """Remove a memory; ``True`` if it existed."""
        ...

    def set_embedding(self, memory_id: str, embedding: list[float] | None, status: EmbeddingStatus) -> None:
        """Record the embedding computed for a memory (``None`` with ``failed``)."""
        ...

    def list_pending(self, limit: int = 100) -> list[Memory]:
        """Memories still ``pending`` (oldest first): what a crash or an outage left unembedded."""
        ...

    def search(
        self,
        namespace: str,
        query: str,
        *,
        query_embedding: list[float] | None = None,
        limit: int = 5,
        exclude_ids: Iterable[str] = (),
    ) -> list[MemorySearchResult]:
        """The best ``limit`` memories of ``namespace`` for ``query``, never one of ``exclude_ids``."""
        ...


RRF_K = 60
"""The usual reciprocal-rank-fusion constant: damps the weight of the very first ranks."""


def fuse_rankings(
    text_ranked: Sequence[Memory], vector_ranked: Sequence[Memory], limit: int
) -> list[MemorySearchResult]:
    """Merge a full-text ranking and a vector ranking by reciprocal-rank fusion (pure).

    Scores of ``ts_rank`` and cosine distance are not comparable, ranks are; ties break by id so
    the order is a function of the inputs alone.
    """
    scores: dict[str, float] = {}
    matched: dict[str, list[Literal["text", "vector"]]] = {}
    by_id: dict[str, Memory] = {}
    for kind, ranking in (("text", text_ranked), ("vector", vector_ranked)):
        for rank, memory in enumerate(ranking):
            by_id[memory.id] = memory
            scores[memory.id] = scores.get(memory.id, 0.0) + 1.0 / (RRF_K + rank + 1)
            matched.setdefault(memory.id, []).append(kind)  # type: ignore[arg-type]
    order = sorted(scores, key=lambda mid: (-scores[mid], mid))[:limit]
    return [MemorySearchResult(memory=by_id[mid], score=scores[mid], matched_by=matched[mid]) for mid in order]


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 for a zero vector or vectors of different lengths."""
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


__all__ = [
    "DEFAULT_NAMESPACE",
    "EmbeddingFunction",
    "EmbeddingStatus",
    "Memory",
    "MemorySearchResult",
    "MemoryStore",
    "cosine_similarity",
    "fuse_rankings",
]
