"""The wake-up of a run waiting hot for human answers: its topic, its message, and sending it.

Both faces send it: the executor when a submission completes a batch or a run is stopped, and a
parent run's steps when they stop or interrupt a child (:mod:`.child_control`). So it lives apart
from the waiting itself (:mod:`.hitl`), which needs the steps and the hooks.
"""

from __future__ import annotations

import uuid

from dbos import DBOS

from helix_dbos.logger import Logger
from helix_dbos.runtime.step_outputs import PendingRow, WakeMessage
from helix_dbos.store.base import PendingToolCall

HITL_TOPIC = "helix.hitl"
"""The DBOS message topic a waiting run listens on (wake-ups only; answers live in the store)."""


def pending_row(row: PendingToolCall) -> PendingRow:
    """A pending call's row as a step records it (JSON)."""
    dumped: PendingRow = row.model_dump(mode="json")  # type: ignore[assignment]
    return dumped


def wake_message(key: str, answer: PendingToolCall | None = None) -> WakeMessage:
    """The message that wakes a hot run: why (``key``), and the answered call's row if there is one."""
    message: WakeMessage = {"wake": key}
    if answer is not None:
        message["answer"] = pending_row(answer)
    return message


def wake_run(workflow_id: str, key: str, logger: Logger, answer: PendingToolCall | None = None) -> None:
    """Wake a run waiting hot on its HITL topic; a failure is only logged.

    The answer is already durable, so a lost wake-up only delays the run to its next check.
    ``answer``: the call's row as the submission recorded it; the message carries it, so the run
    need not read it back (:func:`~.hitl.rows_with_answer`).
    """
    message = wake_message(key, answer)
    try:
        DBOS.send(workflow_id, message, HITL_TOPIC, idempotency_key=f"{workflow_id}:{key}:{uuid.uuid4().hex}")
    except Exception as exc:
        logger.warn("[helix-dbos] could not wake waiting run", {"workflow_id": workflow_id, "error": repr(exc)})


__all__ = ["HITL_TOPIC", "pending_row", "wake_message", "wake_run"]
