"""Lifecycle logs of agent runs: one stdlib logger, ``helix_dbos.lifecycle``, at INFO.

Each record is readable as a line (``run started: session=S run=R agent=A turn=1 ...``) and
structured at once: ``event``, ``session_id``, ``run_id`` and the event's fields ride on the record
as ``extra`` attributes, so a JSON formatter (:mod:`helix_dbos.observability.log_setup`) or any
structured handler gets them as fields. Events:

==================  ===============================================================================
``run_started``     a run began executing (``mode`` execute or retry)
``run_resumed``     a continuation began executing (``previous_run_id``), or a hot HITL wait was answered
``step_committed``  an iteration (model call + its tools) was committed, with ``duration_ms``
``run_suspended``   the run parked, waiting for client results or approvals
``run_recovered``   a run left in flight by a dead process is executing again, here (``executor_id``)
``runs_requeued``   a worker re-enqueued a dead worker's runs (takeover, ``helix-dbos recover``)
``run_completed``   the run ended; ``run_failed`` and ``run_interrupted`` likewise
``client_tool.*``   a pending client or approval call: see :mod:`helix_dbos.runtime.client_tool_log`
``tool.*``          ``tool.outcome_unknown`` (ERROR): a recovered run found a not-retry-safe call in
                    flight and did not run it again: see :mod:`helix_dbos.runtime.unknown_outcomes`
==================  ===============================================================================

They are emitted from inside DBOS steps where they can be (a recorded step does not run again on
replay, so a recovered run never logs "step committed" twice for one step), and a recovery logs
itself as ``run_recovered`` instead of a second ``run_started``.
"""

from __future__ import annotations

import logging
from typing import Any

LOGGER_NAME = "helix_dbos.lifecycle"
logger = logging.getLogger(LOGGER_NAME)


def enabled() -> bool:
    """Whether lifecycle records would go anywhere (checked once per run: no cost when off)."""
    return logger.isEnabledFor(logging.INFO)


def log_event(event: str, session_id: str | None, run_id: str | None, level: int = logging.INFO, **fields: Any) -> None:
    """Log ``event`` for a run: ``"{event words}: session=... run=... k=v ..."`` plus ``extra`` fields."""
    if not logger.isEnabledFor(level):
        return
    shown = {k: v for k, v in fields.items() if v is not None and v != [] and v != ""}
    words = " ".join(f"{k}={_short(v)}" for k, v in shown.items())
    ids = f"session={session_id} run={run_id}" if session_id is not None else ""
    title = event if "." in event else event.replace("_", " ")  # dotted names (client_tool.*) stay as they are
    message = f"{title}: " + " ".join(part for part in (ids, words) if part)
    logger.log(level, message, extra={"event": event, "session_id": session_id, "run_id": run_id, **shown})


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    text = str(value)
    return text if len(text) <= 300 else text[:297] + "..."


__all__ = ["LOGGER_NAME", "enabled", "log_event", "logger"]
