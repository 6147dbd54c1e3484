"""Double texting: what a message posted to a session whose run is in flight does.

A chat front end sends a second message before the first reply has finished all the time. Each
request (or, by default, the agent's definition) picks one policy:

- ``reject``: refuse it with :class:`~helix_dbos.errors.AgentAlreadyRunningError`
  (``state_already_running``, HTTP 409). The default, so nothing changes unless asked.
- ``enqueue``: run it as the next turn once the current run ends, after the messages queued
  before it.
- ``interrupt``: stop the current run at its next step boundary (its transcript is kept) and run
  the new message in the run that resumes the session.
- ``rollback``: abort the current run, drop its turn (its input and everything it produced), and
  run the new message in its place.
- ``steer``: deliver the message into the running loop before its next model call. Only runs of an
  agent defined with ``double_text="steer"`` listen; a message the run never took (it made no
  further model call, or does not listen) runs as the next turn instead, as ``enqueue`` would.

Every policy but ``reject`` is durable: the message is written (a DBOS workflow on a queue
partitioned by session, :mod:`helix_dbos.runtime.double_text`) before the call returns, so a
worker killed at any point loses none of them, and they are taken in the order they were posted.
This module holds only the definitions; the delivery is the runtime's.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from helix_dbos.errors import DoubleTextPolicyError

DoubleTextPolicy = Literal["reject", "enqueue", "interrupt", "rollback", "steer"]
"""What a message posted while the session's run is in flight does (see the module docstring)."""

DOUBLE_TEXT_POLICIES: tuple[DoubleTextPolicy, ...] = get_args(DoubleTextPolicy)

DoubleTextStatus = Literal["started", "queued", "steering"]
"""``started``: no run was in flight, the message started one now. ``queued``: the message waits in
the session's line and will start the run named by ``run_id``. ``steering``: the message is on its
way into the run in flight (``run_id``)."""


class DoubleTextReceipt(BaseModel):
    """What a client follows after posting a message: the run that will carry it, and where it stands."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: DoubleTextPolicy
    """The policy that applied (the request's, else the agent's)."""
    status: DoubleTextStatus
    run_id: str
    """The run that carries the message: started now, in flight (``steering``), or the one the queued
    message will start. For a queued message it is the session's turn the message will take when
    every message to the session goes through the line (the usual case); the delivery's own record
    (``ticket_id``) names the run it actually started."""
    position: int = 0
    """0 when started or steering; else the message's place in the session's line (1: next)."""
    ticket_id: str | None = None
    """The durable delivery of a queued or steering message (a DBOS workflow id); ``None`` when started."""


def check_double_text(value: object) -> DoubleTextPolicy | None:
    """``value`` as a policy (``None`` stays ``None``: the agent's default applies).

    Anything else raises :class:`DoubleTextPolicyError`.
    """
    if value is None:
        return None
    for policy in DOUBLE_TEXT_POLICIES:
        if value == policy:
            return policy
    raise DoubleTextPolicyError(value)


__all__ = ["DOUBLE_TEXT_POLICIES", "DoubleTextPolicy", "DoubleTextReceipt", "DoubleTextStatus", "check_double_text"]
