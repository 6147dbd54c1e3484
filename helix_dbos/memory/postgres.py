"""Memories in PostgreSQL: full-text search with ``tsvector``, vector search with pgvector when installed.

The table (``helix_memories``) comes with the store's migrations (revision 0007). Full-text search is
``to_tsvector('english', content) @@ to_tsquery('english', :query)`` (the query's words OR-ed), ranked by
``ts_rank``, backed by a GIN index on the same expression. Embeddings are stored as JSON arrays; when
the ``vector`` extension is installed (Debian: ``postgresql-15-pgvector``), the store reads them as
``vector`` and ranks by cosine distance (``<=>``) too, fusing both rankings. Without the extension it
says so once in the log and searches by full text only, so a server without pgvector still works.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from helix_dbos.memory.base import EmbeddingStatus, Memory, MemorySearchResult, fuse_rankings
from helix_dbos.store.engine import begin_read, begin_write, create_engine_for, now_ms
from helix_dbos.store.retry import RetryPolicy, retrying
from helix_dbos.store.schema import memories as t

_log = logging.getLogger("helix_dbos.memory")

_FTS = "to_tsvector('english', content) @@ to_tsquery('english', :query)"
_RANK = "ts_rank(to_tsvector('english', content), to_tsquery('english', :query)) DESC"
_WORD = re.compile(r"\w+")


def or_query(text: str) -> str:
    """``text``'s words OR-ed for ``to_tsquery``.

    A conversational question shares only some words with the memory that answers it;
    ``websearch_to_tsquery`` would require all of them.
    """
    return " | ".join(_WORD.findall(text))


class PostgresMemoryStore:
    """A :class:`~helix_dbos.memory.base.MemoryStore` on a migrated helix database (PostgreSQL)."""

    def __init__(self, database_url: str | Engine, *, retry_policy: RetryPolicy | None = None) -> None:
        self._owns_engine = not isinstance(database_url, Engine)
        self.engine = create_engine_for(database_url) if isinstance(database_url, str) else database_url
        if self.engine.dialect.name != "postgresql":
            raise ValueError("PostgresMemoryStore needs a PostgreSQL database (use InMemoryMemoryStore in tests)")
        self.retry_policy = retry_policy or RetryPolicy()
        self._vectors = self._has_vector_extension()
        if not self._vectors:
            _log.warning(
                "pgvector (the 'vector' extension) is not installed in this database: memory search "
                "uses PostgreSQL full-text search only (install postgresql-15-pgvector and run "
                "'helix-dbos db upgrade' to add vector search)"
            )

    def _has_vector_extension(self) -> bool:
        with begin_read(self.engine) as conn:
            return conn.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first() is not None

    @property
    def supports_vectors(self) -> bool:
        return self._vectors

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()

    @retrying
    def save(self, memory: Memory) -> None:
        now = now_ms()
        with begin_write(self.engine) as conn:
            conn.execute(
                t.insert().values(
                    memory_id=memory.id,
                    namespace=memory.namespace,
                    content=memory.content,
                    metadata=memory.metadata,
                    embedding_status=memory.embedding_status,
                    created_at=memory.created_at_ms or now,
                    updated_at=now,
                )
            )

    @retrying
    def get(self, memory_id: str) -> Memory | None:
        with begin_read(self.engine) as conn:
            row = conn.execute(sa.select(*_COLUMNS).where(t.c.memory_id == memory_id)).first()
        return None if row is None else _memory(row._mapping)

    @retrying
    def delete(self, memory_id: str) -> bool:
        with begin_write(self.engine) as conn:
            return conn.execute(t.delete().where(t.c.memory_id == memory_id)).rowcount > 0

    @retrying
    def set_embedding(self, memory_id: str, embedding: list[float] | None, status: EmbeddingStatus) -> None:
        with begin_write(self.engine) as conn:
            conn.execute(
                t.update()
                .where(t.c.memory_id == memory_id)
                .values(
                    embedding=embedding,
                    embedding_dimensions=None if embedding is None else len(embedding),
                    embedding_status=status,
                    updated_at=now_ms(),
                )
            )

    @retrying
    def list_pending(self, limit: int = 100) -> list[Memory]:
        query = (
            sa.select(*_COLUMNS)
            .where(t.c.embedding_status == "pending")
            .order_by(t.c.created_at, t.c.memory_id)
            .limit(limit)
        )
        with begin_read(self.engine) as conn:
            return [_memory(row._mapping) for row in conn.execute(query)]

    @retrying
    def search(
        self,
        namespace: str,
        query: str,
        *,
        query_embedding: list[float] | None = None,
        limit: int = 5,
        exclude_ids: Iterable[str] = (),
    ) -> list[MemorySearchResult]:
        excluded = sorted(set(exclude_ids))
        window = max(limit * 2, limit)
        base = sa.select(*_COLUMNS).where(t.c.namespace == namespace)
        if excluded:
            base = base.where(t.c.memory_id.not_in(excluded))
        terms = or_query(query)
        text_q = base.where(sa.text(_FTS)).order_by(sa.text(_RANK)).order_by(t.c.memory_id).limit(window)
        with begin_read(self.engine) as conn:
            text_ranked = [_memory(r._mapping) for r in conn.execute(text_q, {"query": terms})] if terms else []
            vector_ranked: list[Memory] = []
            if self._vectors and query_embedding:
                vector_q = (
                    base.where(t.c.embedding_status == "complete")
                    .where(t.c.embedding_dimensions == len(query_embedding))
                    .order_by(sa.text("(embedding::text)::vector <=> CAST(:vec AS vector)"))
                    .order_by(t.c.memory_id)
                    .limit(window)
                )
                rows = conn.execute(vector_q, {"vec": json.dumps(query_embedding)})
                vector_ranked = [_memory(r._mapping) for r in rows]
        return fuse_rankings(text_ranked, vector_ranked, limit)


_COLUMNS = (t.c.memory_id, t.c.namespace, t.c.content, t.c.metadata, t.c.embedding_status, t.c.created_at)


def _memory(row: Any) -> Memory:
    return Memory(
        id=row["memory_id"],
        namespace=row["namespace"],
        content=row["content"],
        metadata=row["metadata"],
        embedding_status=row["embedding_status"],
        created_at_ms=row["created_at"],
    )


__all__ = ["PostgresMemoryStore"]
