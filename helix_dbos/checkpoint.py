"""Checkpoint ids and records (seed 002 "Checkpoints").

A checkpoint is the state of a session after a step. Its id is readable and sortable by step:
``cpv1-{session_id}-s{step_count}-t{timestamp_ms}-{random}``. Session ids may contain dashes; the
parser anchors on the fixed suffix, so they round-trip.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

from pydantic import BaseModel, ConfigDict

from helix_dbos._clock import now_ms
from helix_dbos.session import AgentState, AgentStatus

CHECKPOINT_ID_VERSION = 1
CHECKPOINT_ID_PREFIX = f"cpv{CHECKPOINT_ID_VERSION}"

_CHECKPOINT_ID = re.compile(r"^cpv(?P<version>\d+)-(?P<session>.+)-s(?P<step>\d+)-t(?P<ts>\d+)-(?P<random>[a-z0-9]+)$")


class ParsedCheckpointId(BaseModel):
    """The parts of a checkpoint id."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    version: int
    session_id: str
    step_count: int
    timestamp: int
    random: str


def generate_checkpoint_id(
    session_id: str, step_count: int, *, timestamp_ms: int | None = None, random: str | None = None
) -> str:
    """A new checkpoint id: ``generate_checkpoint_id("session-123", 5)``, as in the seeds.

    ``timestamp_ms`` defaults to the wall clock and ``random`` to six fresh hex digits. Code that
    must be deterministic on replay (the store's commit, which runs inside a step) passes the time
    it recorded.
    """
    stamp = timestamp_ms if timestamp_ms is not None else now_ms()
    suffix = random if random is not None else secrets.token_hex(3)
    return f"{CHECKPOINT_ID_PREFIX}-{session_id}-s{step_count}-t{stamp}-{suffix}"


def parse_checkpoint_id(checkpoint_id: str) -> ParsedCheckpointId | None:
    """Split a checkpoint id into its parts, or ``None`` when it is not one."""
    match = _CHECKPOINT_ID.match(checkpoint_id)
    if match is None:
        return None
    return ParsedCheckpointId(
        version=int(match["version"]),
        session_id=match["session"],
        step_count=int(match["step"]),
        timestamp=int(match["ts"]),
        random=match["random"],
    )


STATE_SUMMARY_LIMIT = 120
"""Characters of compact JSON a checkpoint listing shows of its custom state."""


def summarize_state(custom_state: dict[str, Any], *, limit: int = STATE_SUMMARY_LIMIT) -> str:
    """Compact JSON of a custom state, cut at ``limit`` characters: a history line, not the state."""
    text = json.dumps(custom_state, separators=(",", ":"), sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


class CheckpointMeta(BaseModel):
    """Listing view of a checkpoint: one line of a session's state history (what ``fork`` can branch from)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    session_id: str
    step_count: int
    timestamp: int
    """Milliseconds since the epoch."""
    status: AgentStatus
    run_id: str | None = None
    """The run whose step wrote it (a fork's own checkpoint names the source's run it branched from)."""
    message_count: int = 0
    """How many messages the transcript had at this checkpoint."""
    state_summary: str = ""
    """The custom state as compact JSON, cut at :data:`STATE_SUMMARY_LIMIT` characters."""


class Checkpoint(BaseModel):
    """A complete snapshot of a session after a step."""

    model_config = ConfigDict(extra="forbid")
    id: str
    session_id: str
    step_count: int
    timestamp: int
    state: AgentState
    message_count: int
    """How many messages the transcript had at this checkpoint (recovery truncates back to it)."""
    stream_sequence: int
    """The stream's sequence at this checkpoint (readers resume after it)."""
    metadata: dict[str, Any] | None = None
