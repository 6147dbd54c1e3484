"""The PostgreSQL memory store on a real, migrated database: full-text search right after save,
embeddings, pending recovery, namespaces, and pgvector (or the logged full-text fallback)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from helix_dbos.memory import BackgroundEmbeddingExecutor, MemoryManager, PostgresMemoryStore
from helix_dbos.store.schema import memories
from helix_dbos.testing import deterministic_embedding

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_store_url: str) -> Iterator[PostgresMemoryStore]:
    memory_store = PostgresMemoryStore(pg_store_url)
    with memory_store.engine.begin() as conn:
        conn.execute(memories.delete())
    yield memory_store
    memory_store.close()


def _vector_available(store: PostgresMemoryStore) -> bool:
    with store.engine.connect() as conn:
        found = conn.execute(sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).first()
    return found is not None


def test_a_saved_memory_is_pending_and_full_text_searchable_immediately(store: PostgresMemoryStore) -> None:
    manager = MemoryManager(store)  # no embedding function: nothing but full-text search
    saved = manager.save("The user's favourite colour is teal.", namespace="u1", metadata={"source": "chat"})
    stored = store.get(saved.id)
    assert stored is not None and stored.embedding_status == "pending" and stored.metadata == {"source": "chat"}
    # Stemming and an OR of the question's words: "colours" and "favourite" find it.
    found = manager.search("Which colours are my favourite?", namespace="u1")
    assert [r.memory.id for r in found] == [saved.id] and found[0].matched_by == ["text"]
    assert manager.search("teal", namespace="u2") == []
    assert manager.search("teal", namespace="u1", exclude_ids=[saved.id]) == []
    assert manager.search("?!", namespace="u1") == []  # no words: no query, no error


def test_full_text_ranks_the_better_match_first(store: PostgresMemoryStore) -> None:
    manager = MemoryManager(store)
    weak = manager.save("The user owns a cat.")
    strong = manager.save("The user's cat is called Miso; the cat is ginger.")
    assert [r.memory.id for r in manager.search("cat called Miso")] == [strong.id, weak.id]


def test_embeddings_are_recorded_and_pending_ones_recovered(store: PostgresMemoryStore) -> None:
    MemoryManager(store).save("left pending by a crash")
    assert [m.content for m in store.list_pending()] == ["left pending by a crash"]
    embedded = MemoryManager(store, embed=deterministic_embedding)
    assert embedded.process_unembedded_memories() == 1
    assert store.list_pending() == []
    saved = embedded.save("embedded inline")
    stored = store.get(saved.id)
    assert stored is not None and stored.embedding_status == "complete"
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(memories.c.embedding_dimensions).where(memories.c.memory_id == saved.id)).one()
    assert row.embedding_dimensions == 64


def test_background_executor_drains_on_shutdown(store: PostgresMemoryStore) -> None:
    gate = threading.Event()

    def slow_embed(texts: object) -> list[list[float]]:
        gate.wait(5)
        time.sleep(0.02)
        return deterministic_embedding(list(texts))  # type: ignore[call-overload]

    executor = BackgroundEmbeddingExecutor(max_concurrency=2)
    manager = MemoryManager(store, embed=slow_embed, embedding_executor=executor)
    saved = [manager.save(f"note {i} about gardening") for i in range(6)]
    assert len(store.list_pending()) == 6  # saved, not yet embedded...
    assert len(manager.search("gardening", limit=10)) == 6  # ...and already searchable
    gate.set()
    manager.shutdown()  # returns only once every queued embedding is stored
    assert store.list_pending() == []
    assert {store.get(m.id).embedding_status for m in saved} == {"complete"}  # type: ignore[union-attr]


def test_without_pgvector_search_falls_back_to_full_text_with_one_log_line(
    pg_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="helix_dbos.memory"):
        store = PostgresMemoryStore(pg_store_url)
    try:
        if _vector_available(store):
            assert store.supports_vectors
            assert not [r for r in caplog.records if "pgvector" in r.getMessage()]
            return
        assert not store.supports_vectors
        lines = [r.getMessage() for r in caplog.records if "pgvector" in r.getMessage()]
        assert len(lines) == 1 and "full-text search only" in lines[0]
        manager = MemoryManager(store, embed=deterministic_embedding)
        saved = manager.save("Ada plays the cello")
        assert [r.memory.id for r in manager.search("cello")] == [saved.id]
    finally:
        store.close()


def test_vector_search_with_pgvector(store: PostgresMemoryStore) -> None:
    if not _vector_available(store):
        pytest.skip("the 'vector' extension is not available on this server (no postgresql-15-pgvector package)")
    assert store.supports_vectors
    manager = MemoryManager(store, embed=deterministic_embedding)
    saved = manager.save("zebra quokka")
    manager.save("unrelated words entirely")
    found = manager.search("quokka zebra")
    assert found[0].memory.id == saved.id and found[0].matched_by == ["text", "vector"]
