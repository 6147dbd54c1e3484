"""Steering: a message posted with ``double_text="steer"`` reaches the running loop before its next model call.

The message travels as a DBOS message (``DBOS.send`` to the run's workflow, topic
:data:`STEER_TOPIC`), written by the message's durable delivery (:mod:`.double_text`). A run of an
agent defined with ``double_text="steer"`` takes every message waiting for it before each model
call with ``DBOS.recv(timeout_seconds=0)``, which DBOS records: a replay takes the same messages at
the same step. Each taken message is appended to the transcript as a user message (so the model
sees it in this call and it is committed with the step), and the ids of the deliveries taken are
published as the workflow event :data:`STEERED_EVENT`, which tells a delivery whether its message
got in or must run as the next turn instead.

Only agents that ask for it listen: a check costs a few database round trips per model call, and a
run of any other agent records exactly what it recorded before. The first check of a run asks the
named replay patch :data:`STEER_PATCH`, so a run recorded before steering existed replays without.
"""

from __future__ import annotations

from typing import Any, ClassVar

from dbos import DBOS
from pydantic import BaseModel, ConfigDict

from helix_dbos.capability import RunCapability
from helix_dbos.orchestration.state_operations import input_messages
from helix_dbos.session import AgentInput

STEER_PATCH = "helix-steer"
STEER_TOPIC = "helix.double_text.steer"
STEERED_EVENT = "helix.double_text.steered"


class SteerMessage(BaseModel):
    """What a delivery sends a listening run: its id and the user's message (a ``SendInput``)."""

    model_config = ConfigDict(extra="forbid")

    ticket_id: str
    message: Any


class SteeringCapability(RunCapability):
    """Appends the steering messages waiting for the run before each model call (listening agents only)."""

    name: ClassVar[str] = "double_text"
    replay_patches: ClassVar[tuple[str, ...]] = (STEER_PATCH,)

    def __init__(self) -> None:
        self._patched: bool | None = None
        self._taken: list[str] = []

    def for_run(self) -> SteeringCapability:
        """A fresh instance per run: the deliveries it took are the run's own."""
        return SteeringCapability()

    def before_model_call(self, run: Any) -> None:
        """Take every waiting steering message into the transcript, then say which deliveries got in."""
        if run.agent.double_text != "steer":
            return
        if self._patched is None:
            self._patched = bool(DBOS.patch(STEER_PATCH))
        if not self._patched:
            return
        taken: list[str] = []
        while (raw := DBOS.recv(STEER_TOPIC, timeout_seconds=0)) is not None:
            steer = SteerMessage.model_validate(raw)
            for message in input_messages(AgentInput.model_validate({"message": steer.message}).message):
                run.append(message)
            taken.append(steer.ticket_id)
        if taken:
            self._taken.extend(taken)
            DBOS.set_event(STEERED_EVENT, list(self._taken))


__all__ = ["STEERED_EVENT", "STEER_PATCH", "STEER_TOPIC", "SteerMessage", "SteeringCapability"]
