"""The hidden memory-injection user message, and which memories a transcript already holds (pure).

Before a turn's first model call the runtime searches the agent's memories for the user's latest
message and appends what it found as one hidden user message (``metadata.memory_injection=True``,
``metadata.memory_ids=[...]``). That message is persisted with the transcript, so the next turn
reads the ids back with :func:`collect_injected_memory_ids` and never injects a memory twice. The
seeds' ``memoryInjection`` / ``memoryIds`` keys, in snake_case like the rest of the metadata keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from helix_dbos.memory.base import Memory
from helix_dbos.messages import COMMON_METADATA_KEYS, Message, UserMessage

MEMORY_IDS_KEY = "memory_ids"
"""Metadata key of an injection message: the ids of the memories it carries, in order."""

MEMORY_INJECTION_SOURCE = "helix:memory_injection"

MEMORY_INJECTION_HEADER = "Relevant memories from earlier conversations (context only, not a message from the user):"


def create_memory_injection_message(memories: Sequence[Memory]) -> UserMessage | None:
    """The hidden user message carrying ``memories``, or ``None`` when there are none.

    The text is a function of the memories alone (no clock, no ids of the run), so the same
    memories always make byte-identical messages and a provider's prompt cache keeps hitting.
    """
    if not memories:
        return None
    lines = [MEMORY_INJECTION_HEADER, *(f"- {m.content}" for m in memories)]
    return UserMessage(
        content="\n".join(lines),
        metadata={
            COMMON_METADATA_KEYS.HIDDEN: True,
            COMMON_METADATA_KEYS.MEMORY_INJECTION: True,
            COMMON_METADATA_KEYS.SOURCE: MEMORY_INJECTION_SOURCE,
            MEMORY_IDS_KEY: [m.id for m in memories],
        },
    )


def is_memory_injection(message: Message) -> bool:
    """True for a message made by :func:`create_memory_injection_message`."""
    return bool(message.metadata and message.metadata.get(COMMON_METADATA_KEYS.MEMORY_INJECTION) is True)


def collect_injected_memory_ids(messages: Iterable[Message]) -> set[str]:
    """The ids of every memory already injected into ``messages`` (the union over injection messages)."""
    found: set[str] = set()
    for message in messages:
        if is_memory_injection(message):
            assert message.metadata is not None
            found.update(str(i) for i in message.metadata.get(MEMORY_IDS_KEY) or ())
    return found


def latest_user_query(messages: Sequence[Message]) -> str | None:
    """The text of the newest user message that is not hidden (the query memories are searched for)."""
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            if message.metadata and message.metadata.get(COMMON_METADATA_KEYS.HIDDEN):
                continue
            return message.content
    return None


__all__ = [
    "MEMORY_IDS_KEY",
    "MEMORY_INJECTION_HEADER",
    "MEMORY_INJECTION_SOURCE",
    "collect_injected_memory_ids",
    "create_memory_injection_message",
    "is_memory_injection",
    "latest_user_query",
]
