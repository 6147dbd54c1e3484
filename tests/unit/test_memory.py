"""Memory contracts that are pure logic or in-process: the injection message, dedup, ranking fusion,
the in-memory store, the manager and the embedding executors (real threads)."""

from __future__ import annotations

import threading
import time

import pytest

from helix_dbos import DefinitionError, MemoryConfig, UserMessage, define_agent
from helix_dbos.errors import EmbeddingExecutorClosedError
from helix_dbos.memory import (
    BackgroundEmbeddingExecutor,
    InlineEmbeddingExecutor,
    InMemoryMemoryStore,
    Memory,
    MemoryManager,
    collect_injected_memory_ids,
    create_memory_injection_message,
)
from helix_dbos.memory.base import fuse_rankings
from helix_dbos.memory.injection import MEMORY_IDS_KEY, is_memory_injection, latest_user_query
from helix_dbos.messages import COMMON_METADATA_KEYS, AssistantMessage
from helix_dbos.testing import deterministic_embedding


def mem(mid: str, content: str = "x", namespace: str = "default") -> Memory:
    return Memory(id=mid, content=content, namespace=namespace)


def test_injection_message_is_hidden_marked_and_byte_stable() -> None:
    memories = [mem("m1", "User likes tea."), mem("m2", "User lives in Oslo.")]
    message = create_memory_injection_message(memories)
    assert message is not None and message.role == "user"
    assert message.metadata == {
        COMMON_METADATA_KEYS.HIDDEN: True,
        COMMON_METADATA_KEYS.MEMORY_INJECTION: True,
        COMMON_METADATA_KEYS.SOURCE: "helix:memory_injection",
        MEMORY_IDS_KEY: ["m1", "m2"],
    }
    assert message.content.endswith("- User likes tea.\n- User lives in Oslo.")
    again = create_memory_injection_message(memories)
    assert again is not None and again.model_dump_json() == message.model_dump_json()
    assert create_memory_injection_message([]) is None


def test_collect_injected_memory_ids_is_the_union_of_injection_messages_only() -> None:
    first = create_memory_injection_message([mem("m1"), mem("m2")])
    second = create_memory_injection_message([mem("m3")])
    assert first is not None and second is not None
    lookalike = UserMessage(content="hi", metadata={MEMORY_IDS_KEY: ["m9"]})  # not marked: ignored
    transcript = [UserMessage(content="q"), first, AssistantMessage(content="a"), lookalike, second]
    assert collect_injected_memory_ids(transcript) == {"m1", "m2", "m3"}
    assert [is_memory_injection(m) for m in transcript] == [False, True, False, False, True]


def test_the_query_is_the_latest_visible_user_message() -> None:
    injected = create_memory_injection_message([mem("m1")])
    assert injected is not None
    assert latest_user_query([UserMessage(content="first"), AssistantMessage(content="a"), injected]) == "first"
    assert latest_user_query([AssistantMessage(content="a")]) is None


def test_fusion_ranks_by_reciprocal_rank_and_breaks_ties_by_id() -> None:
    a, b, c = mem("a"), mem("b"), mem("c")
    fused = fuse_rankings([b, a], [a, c], limit=3)
    assert [r.memory.id for r in fused] == ["a", "b", "c"]  # a is in both rankings
    assert fused[0].matched_by == ["text", "vector"]
    assert [r.memory.id for r in fuse_rankings([c, b], [b, c], limit=2)] == ["b", "c"]  # a tie: by id


def test_saved_memory_is_pending_and_text_searchable_before_any_embedding() -> None:
    store = InMemoryMemoryStore()
    manager = MemoryManager(store)  # no embedding function at all
    saved = manager.save("The user's favourite colour is teal.", namespace="u1")
    assert saved.embedding_status == "pending"
    found = manager.search("what colour do I like?", namespace="u1")
    assert [r.memory.id for r in found] == [saved.id]
    assert manager.search("colour", namespace="u2") == []  # namespaces never mix
    assert manager.search("colour", namespace="u1", exclude_ids=[saved.id]) == []


def test_inline_executor_embeds_before_save_returns_and_vector_search_finds_it() -> None:
    store = InMemoryMemoryStore()
    manager = MemoryManager(store, embed=deterministic_embedding)
    saved = manager.save("Ada prefers metric units")
    assert store.get(saved.id) == saved.model_copy(update={"embedding_status": "complete"})
    results = manager.search("metric")
    assert results[0].memory.id == saved.id and "vector" in results[0].matched_by


def test_a_failed_embedding_is_recorded_and_the_memory_stays_text_searchable() -> None:
    def broken(texts: object) -> list[list[float]]:
        raise RuntimeError("embedding service down")

    store = InMemoryMemoryStore()
    manager = MemoryManager(store, embed=broken)
    saved = manager.save("Ada likes chess")
    stored = store.get(saved.id)
    assert stored is not None and stored.embedding_status == "failed"
    assert [r.memory.id for r in manager.search("chess")] == [saved.id]


def test_process_unembedded_memories_recovers_pending_ones() -> None:
    store = InMemoryMemoryStore()
    MemoryManager(store).save("left pending by a crash")
    assert len(store.list_pending()) == 1
    assert MemoryManager(store, embed=deterministic_embedding).process_unembedded_memories() == 1
    assert store.list_pending() == []


def test_background_executor_bounds_concurrency_and_shutdown_drains() -> None:
    lock = threading.Lock()
    running = peak = 0

    def slow_embed(texts: object) -> list[list[float]]:
        nonlocal running, peak
        if not threading.current_thread().name.startswith("helix-embedding"):  # the search's query
            return deterministic_embedding(list(texts))  # type: ignore[call-overload]
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return deterministic_embedding(list(texts))  # type: ignore[call-overload]

    store = InMemoryMemoryStore()
    executor = BackgroundEmbeddingExecutor(max_concurrency=2)
    manager = MemoryManager(store, embed=slow_embed, embedding_executor=executor)
    started = time.monotonic()
    saved = [manager.save(f"memory number {i}") for i in range(8)]
    assert time.monotonic() - started < 0.2  # save does not wait for the embedding
    assert {r.memory.id for r in manager.search("memory", limit=8)} == {m.id for m in saved}  # already searchable
    manager.shutdown()
    assert executor.pending_count == 0
    assert store.list_pending() == []  # drained: every memory embedded
    assert peak == 2
    with pytest.raises(EmbeddingExecutorClosedError):
        manager.save("too late")


def test_inline_executor_refuses_after_shutdown() -> None:
    executor = InlineEmbeddingExecutor()
    executor.shutdown()
    with pytest.raises(EmbeddingExecutorClosedError):
        executor.submit(lambda: None)


def test_deterministic_embedding_is_stable_and_separates_unrelated_texts() -> None:
    a, b, c = deterministic_embedding(["tea, Oslo", "Oslo TEA", "quantum physics"])
    assert a == b
    assert sum(x * y for x, y in zip(a, c, strict=True)) < 0.5
    assert deterministic_embedding(["tea"], dimensions=8)[0] == deterministic_embedding(["tea"], dimensions=8)[0]


def test_define_agent_takes_a_memory_config_and_refuses_anything_else() -> None:
    config = MemoryConfig(store=InMemoryMemoryStore())
    agent = define_agent("rememberer", system_prompt="Hi.", llm_config="openai/fake", memory=config)
    assert agent.memory is config and config.manager is config.manager
    with pytest.raises(DefinitionError, match="memory must be a MemoryConfig"):
        define_agent("bad", system_prompt="Hi.", llm_config="openai/fake", memory=InMemoryMemoryStore())  # type: ignore[arg-type]
