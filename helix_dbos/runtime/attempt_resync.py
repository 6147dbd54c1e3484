"""Telling a stream's readers to drop what a dead model attempt streamed (a ``stream_resync`` chunk).

An LLM step streams text and reasoning deltas as they arrive, before the call has succeeded. Two
things can void them:

- **the process died mid-call**: DBOS runs the step again, and it streams from the start;
- **the attempt failed and the adapter tries again** (a retry, or a fall-back to the next model of
  the chain): it calls ``LLMStreamCallbacks.on_error`` first, and the next attempt streams from the
  start.

Either way the stored deltas stay (a durable stream is append-only; removing chunks would make
readers already past them raise ``StreamTruncatedError``), and one ``stream_resync`` chunk after
them says where they start: ``from_sequence`` is the sequence just before the dead attempt's
first delta, and ``agent_id`` / ``step`` name the step whose text so far is void. Readers that
rebuild text (``collect_text``) drop that step's deltas and keep what follows.

Both cases use the seeds' ``reason="crash_recovery"``: for a reader they are the same event (an
attempt of the step died; the step streams again), and a seed client knows no other reason
(``docs/differences.md``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from helix_dbos.stream.base import ChunkRecord, StreamManager
from helix_dbos.stream.chunks import StreamChunk, StreamResyncChunk

__all__ = ["DeadAttempt", "ResyncPoint", "announce_dead_attempt", "dead_attempt_start"]

_STREAMED_TYPES = ("text_delta", "thinking")
"""What an LLM step streams while the call is in flight (tool calls are reported only when it succeeded)."""


@dataclass(frozen=True)
class ResyncPoint:
    """The state the step started from: what the resync chunk names as its checkpoint."""

    checkpoint_id: str
    """The last committed checkpoint; empty when the session has none yet."""
    step_count: int
    message_count: int


@dataclass(frozen=True)
class DeadAttempt:
    """Whose attempt died: the run and step its deltas carry, and what the resync names."""

    run_id: str
    agent_type: str
    step: int
    point: ResyncPoint


def dead_attempt_start(records: list[ChunkRecord], run_id: str, step: int) -> int | None:
    """The sequence just before the first delta of the step's latest attempt, or ``None`` if it streamed none.

    Deltas before an earlier resync of the same step were voided by it already; only those after
    the last one belong to the attempt that just died.
    """
    start: int | None = None
    for record in records:
        chunk = record.chunk
        if chunk.agent_id != run_id or chunk.step != step:
            continue
        if chunk.type == "stream_resync":
            start = None
        elif chunk.type in _STREAMED_TYPES and start is None:
            start = record.sequence - 1
    return start


async def announce_dead_attempt(
    manager: StreamManager,
    stream_id: str,
    write: Callable[[StreamChunk], Awaitable[None]],
    dead: DeadAttempt,
    *,
    after_sequence: int,
) -> bool:
    """Write a ``stream_resync`` for the step's dead attempt to ``stream_id``; ``False`` when it streamed nothing.

    ``stream_id`` is read (the manager flushes what is queued first) to find the dead attempt's
    deltas; ``write`` writes the chunk to it. It may be a parent's stream holding a sub-agent's
    mirrored chunks: ``write`` then keys the chunk like the copies it voids. The runtime's stream
    facade is not imported here, which keeps this module at the bottom of the runtime's imports.
    """
    records = await manager.read_records(stream_id, after_sequence)
    from_sequence = dead_attempt_start(records, dead.run_id, dead.step)
    if from_sequence is None:
        return False
    chunk = StreamResyncChunk(
        agent_id=dead.run_id,
        agent_type=dead.agent_type,
        step=dead.step,
        checkpoint_id=dead.point.checkpoint_id,
        step_count=dead.point.step_count,
        message_count=dead.point.message_count,
        from_sequence=from_sequence,
        reason="crash_recovery",
    )
    await write(chunk)
    return True
