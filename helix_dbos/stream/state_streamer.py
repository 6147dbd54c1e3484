"""Custom state onto a stream from outside a run (the seeds' ``CustomStateStreamer``).

Inside a run, tools change custom state through the draft tracker and the runtime streams the
changes as ``state_patch`` chunks (RFC 6902). An application sometimes owns state of its own that
a front end should follow the same way (a background job's progress, a document the user edits):
:class:`CustomStateStreamer` writes it to a stream as the same ``state_patch`` chunks, so a
:class:`~helix_dbos.stream.projection.StreamProjector` on the client reads both alike::

    streamer = create_state_streamer(stream_manager=manager, stream_id="job-1")
    await streamer.emit_snapshot({"done": 0, "total": 3})
    await streamer.update({"done": 1, "total": 3})   # writes [{"op": "replace", "path": "/done", "value": 1}]
    await streamer.close()

A snapshot is one ``replace`` of the document root (``"path": ""``), a valid RFC 6902 operation:
no new chunk type, and a client that applies patches needs nothing else to take it.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch

from helix_dbos.stream.base import StreamManager, StreamWriter
from helix_dbos.stream.chunks import StatePatchChunk

__all__ = ["CustomStateStreamer", "create_state_streamer"]


class CustomStateStreamer:
    """Writes custom state changes to one stream as ``state_patch`` chunks.

    The writer is created on the first emit (creating the stream, or reactivating an ended one), so
    constructing a streamer does no I/O. The streamer keeps the state it last emitted, which is what
    :meth:`update` diffs against.
    """

    def __init__(
        self,
        stream_manager: StreamManager,
        stream_id: str,
        *,
        agent_id: str | None = None,
        agent_type: str = "custom_state",
        run_id: str | None = None,
        initial_state: Any = None,
    ) -> None:
        """Stream to ``stream_id``; chunks carry ``agent_id`` (default: the stream id) and ``agent_type``."""
        self.stream_manager = stream_manager
        self.stream_id = stream_id
        self.agent_id = agent_id if agent_id is not None else stream_id
        self.agent_type = agent_type
        self.run_id = run_id if run_id is not None else stream_id
        self._state: Any = copy.deepcopy(initial_state)
        self._writer: StreamWriter | None = None

    @property
    def state(self) -> Any:
        """A copy of the state as the stream's readers will have it after the emits so far."""
        return copy.deepcopy(self._state)

    async def emit_patch(self, patches: Sequence[Mapping[str, Any]], *, step: int | None = None) -> None:
        """Write RFC 6902 ``patches`` (applied to the tracked state first, so a bad patch writes nothing).

        ``step`` tags the chunk for ``cleanup_to_step``; leave it ``None`` for state that no run's
        crash recovery should remove.
        """
        # Copied: the tracked state must not share objects the caller may mutate later.
        ops = copy.deepcopy([dict(op) for op in patches])
        if not ops:
            return
        # Raises jsonpatch's JsonPatchException / JsonPointerException (ValueError / KeyError kin).
        state = jsonpatch.apply_patch(self._state, ops, in_place=False)
        writer = await self._get_writer()
        await writer.write(
            StatePatchChunk(
                agent_id=self.agent_id,
                agent_type=self.agent_type,
                step=step,
                timestamp=int(time.time() * 1000),
                patches=ops,
            )
        )
        self._state = state

    async def emit_snapshot(self, state: Any, *, step: int | None = None) -> None:
        """Write the whole state: one ``replace`` of the root, so readers start over from it."""
        await self.emit_patch([{"op": "replace", "path": "", "value": copy.deepcopy(state)}], step=step)

    async def update(self, state: Any, *, step: int | None = None) -> list[dict[str, Any]]:
        """Write the difference from the last emitted state to ``state``; return it (empty: nothing written)."""
        ops = diff_states(self._state, copy.deepcopy(state))
        if ops:
            await self.emit_patch(ops, step=step)
        return ops

    async def close(self) -> None:
        """Close the writer (the stream stays open; end it with ``StreamManager.end_stream``)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            await writer.close()

    async def _get_writer(self) -> StreamWriter:
        if self._writer is None:
            self._writer = await self.stream_manager.create_writer(self.stream_id, self.run_id, self.agent_type)
        return self._writer


def diff_states(before: Any, after: Any) -> list[dict[str, Any]]:
    """RFC 6902 operations that turn ``before`` into ``after``: jsonpatch's diff, checked.

    ``jsonpatch.make_patch`` (1.33) sometimes emits a ``move`` within a list that does not produce
    ``after`` (``[None, None, {}]`` -> ``[0, 0, {"a": None}]`` comes out as
    ``[0, None, {"a": 0}]``), or one that does not apply at all (a ``move`` from an index past
    the list's end), and a wrong patch would leave every reader with a wrong state. Its result is
    applied here first; when it misses or fails, :func:`plain_diff` (no ``move``, lists replaced
    whole when they differ in length) is used instead.
    """
    ops: list[dict[str, Any]] = list(jsonpatch.make_patch(before, after))
    if not ops:
        return ops
    try:
        if _same_json(jsonpatch.apply_patch(before, ops, in_place=False), after):
            return ops
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
        pass  # a diff that does not even apply to the state it was computed from
    return plain_diff(before, after, "")


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON (``0`` is not ``false``, ``1`` is not ``1.0``... as Python's ``==`` would say)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def plain_diff(before: Any, after: Any, path: str) -> list[dict[str, Any]]:
    """``add``/``remove``/``replace`` only: objects key by key, equal-length lists item by item."""
    if _same_json(before, after):
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        ops: list[dict[str, Any]] = []
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": f"{path}/{_escape(str(key))}"})
        for key, value in after.items():
            where = f"{path}/{_escape(str(key))}"
            if key in before:
                ops += plain_diff(before[key], value, where)
            else:
                ops.append({"op": "add", "path": where, "value": copy.deepcopy(value)})
        return ops
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            op for i, (b, a) in enumerate(zip(before, after, strict=True)) for op in plain_diff(b, a, f"{path}/{i}")
        ]
    return [{"op": "replace", "path": path, "value": copy.deepcopy(after)}]


def _escape(key: str) -> str:
    """A JSON Pointer reference token (RFC 6901): ``~`` -> ``~0``, ``/`` -> ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def create_state_streamer(
    *,
    stream_manager: StreamManager,
    stream_id: str,
    agent_id: str | None = None,
    agent_type: str = "custom_state",
    run_id: str | None = None,
    initial_state: Any = None,
) -> CustomStateStreamer:
    """The seeds' ``createStateStreamer({streamManager, streamId})``: see :class:`CustomStateStreamer`."""
    return CustomStateStreamer(
        stream_manager,
        stream_id,
        agent_id=agent_id,
        agent_type=agent_type,
        run_id=run_id,
        initial_state=initial_state,
    )
