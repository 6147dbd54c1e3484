"""Custom state rebuilt from a stream (the seeds' ``createStateProjection`` / ``StreamProjector``).

A run streams every change of its custom state as a ``state_patch`` chunk (RFC 6902 operations on
the state document). A client that applies them in order holds the same state as the run, without
asking the server for it; a :class:`StateProjection` narrows that state to what a view needs::

    projection = create_state_projection(lambda state: {"count": state["count"]})
    projector = StreamProjector(projection, initial_state={"count": 0}, agent_id=session_id)
    async for view in projector.project(events):   # chunks, ChunkRecords or wire StreamEvents
        render(view)                                # each time the projected value changed

Where the state starts: ``initial_state`` (what the run started with), or a snapshot in the stream
(a ``replace`` of the root, as :class:`~helix_dbos.stream.state_streamer.CustomStateStreamer`
writes). A session stream interleaves a parent's chunks with its sub-agents', each patching its
own state: pass ``agent_id`` (the session id) to follow one agent.

Recovery: a ``stream_resync`` chunk or a ``truncated`` event means chunks this projector applied may
be replaced; it sets :attr:`StreamProjector.needs_resync` and goes on applying what follows. Patches
are applied atomically (all of a chunk's operations or none); one that does not apply raises
:class:`~helix_dbos.errors.StateProjectionError`. After either, fetch the state and :meth:`reset`.
Chunks with a sequence at or below the last applied one are skipped, so replaying a resumed stream
from an earlier position does not apply a patch twice.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, Generic, TypeVar

import jsonpatch

from helix_dbos.errors import StateProjectionError
from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import STREAM_CHUNK_TYPES, StatePatchChunk, StreamChunk, StreamResyncChunk
from helix_dbos.stream.events import StreamChunkEvent, StreamEvent, StreamTruncatedEvent

__all__ = ["ProjectorInput", "StateProjection", "StreamProjector", "create_state_projection"]

S = TypeVar("S")
P = TypeVar("P")

ProjectorInput = StreamChunk | ChunkRecord | StreamEvent
"""What :meth:`StreamProjector.apply` takes: a chunk, a stored record, or any wire ``StreamEvent``."""


class StateProjection(Generic[S, P]):
    """A pure view of the full state: ``select(state)`` -> what a component renders."""

    def __init__(self, select: Callable[[S], P]) -> None:
        """Project with ``select``; it must not mutate the state it is given."""
        self.select = select

    def project(self, state: S) -> P:
        """The projected value of ``state``."""
        return self.select(state)


def create_state_projection(select: Callable[[S], P]) -> StateProjection[S, P]:
    """The seeds' ``createStateProjection<FullState, View>(state => view)``."""
    return StateProjection(select)


def _identity(state: Any) -> Any:
    return state


class StreamProjector(Generic[P]):
    """Applies a stream's state patches to a state document and projects it.

    Not thread-safe; one projector per consumer. :attr:`state` and :attr:`value` are copies, so a
    caller cannot corrupt the document the next patch applies to.
    """

    def __init__(
        self,
        projection: StateProjection[Any, P] | Callable[[Any], P] | None = None,
        *,
        initial_state: Any = None,
        agent_id: str | None = None,
    ) -> None:
        """Start from ``initial_state``; follow only ``agent_id``'s patches when given (else every patch)."""
        if projection is None:
            projection = StateProjection(_identity)
        elif not isinstance(projection, StateProjection):
            projection = StateProjection(projection)
        self.projection: StateProjection[Any, P] = projection
        self.agent_id = agent_id
        self._state: Any = copy.deepcopy(initial_state)
        self.sequence = 0
        """The sequence of the last chunk applied or skipped (0 before any with a sequence)."""
        self.needs_resync = False
        """Set by a ``stream_resync`` chunk or a ``truncated`` event: the state may include replaced patches."""
        self.patches_applied = 0

    @property
    def state(self) -> Any:
        """A copy of the full state document."""
        return copy.deepcopy(self._state)

    @property
    def value(self) -> P:
        """The projection of the current state."""
        return self.projection.project(copy.deepcopy(self._state))

    def reset(self, state: Any, *, sequence: int | None = None) -> None:
        """Start over from ``state`` (fetched from the server), as of stream ``sequence`` when given."""
        self._state = copy.deepcopy(state)
        if sequence is not None:
            self.sequence = sequence
        self.needs_resync = False

    def apply(self, item: ProjectorInput) -> bool:
        """Apply one chunk, record or wire event; ``True`` when the state changed.

        Events other than chunks change nothing, except ``truncated`` (sets :attr:`needs_resync`).
        """
        sequence: int | None = None
        chunk: Any
        if isinstance(item, ChunkRecord | StreamChunkEvent):
            sequence, chunk = item.sequence, item.chunk
        elif isinstance(item, StreamTruncatedEvent):
            self.needs_resync = True
            return False
        elif getattr(item, "type", None) in STREAM_CHUNK_TYPES:
            chunk = item
        else:
            return False  # end, fail, status: nothing to project
        if sequence is not None:
            if sequence <= self.sequence:
                return False  # already seen: a resumed stream replayed from an earlier position
            self.sequence = sequence
        if isinstance(chunk, StreamResyncChunk):
            self.needs_resync = True
            return False
        if not isinstance(chunk, StatePatchChunk) or not chunk.patches:
            return False
        if self.agent_id is not None and chunk.agent_id != self.agent_id:
            return False
        try:
            # Not in place: all of the chunk's operations apply, or none (the state stays as it was).
            state = jsonpatch.apply_patch(self._state, copy.deepcopy(chunk.patches), in_place=False)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, ValueError) as exc:
            raise StateProjectionError(
                f"A state patch (sequence {sequence}) does not apply to the projected state: {exc}",
                sequence=sequence,
            ) from exc
        changed = bool(state != self._state)
        self._state = state
        self.patches_applied += 1
        return changed

    async def project(self, source: AsyncIterable[ProjectorInput]) -> AsyncIterator[P]:
        """Apply each item of ``source``; yield the projected value each time it changed."""
        last: Any = self.value
        async for item in source:
            if self.apply(item):
                value = self.value
                if value != last:
                    last = value
                    yield value
