"""The seeds' ``client_tool.*`` structured log events (seed 001), on the lifecycle logger.

==============================  ===========================================================================
``client_tool.suspended``       a run recorded a call it waits on (``tool_call_id``, ``tool_name``, ``kind``,
                                ``agent_type``, ``timeout_ms``); from the registration step
``client_tool.submitted``       an answer was recorded (``kind`` of the answer, ``delivery`` hot or parked,
                                ``wait_ms`` from the call's record to the answer's, ``approved``)
``client_tool.timeout``         a call's deadline passed before an answer (``timeout_ms``), WARNING
``client_tool.aborted``         an abort cancelled a call still open (``reason``)
``client_tool.validation_failed``  an answer was refused as malformed or not fitting its call (``code``,
                                ``error``), WARNING
``client_tool.ownership_recorded``  a call of a session below its root (a sub-agent's, a companion's) was
                                recorded, so answers to the root reach it (``root_session_id``); from the
                                registration step
``client_tool.ownership_routed``  an answer submitted to the root session was routed to the session that
                                owns the call (``root_session_id``, ``owner_session_id``)
==============================  ===========================================================================

Each is logged where the transition it reports is made once: in a recorded DBOS step (not run
again on replay) or after a compare-and-set that only one caller wins.

The ownership of a call is its own row together with its session's parent chain
(:meth:`~helix_dbos.store.hitl.SqlPendingCallStore.owner_in_tree`), written by the same
registration that makes the call answerable: there is no separate ownership map to write, clear or
retry, so the seeds' ``ownership_write_failed`` / ``ownership_clear_failed`` / ``ownership_retry``
have nothing to report, and their successful counterparts above are logged instead.
"""

from __future__ import annotations

import logging
from typing import Any

from helix_dbos.observability import lifecycle
from helix_dbos.store.base import PendingToolCall

__all__ = ["log_call_event", "timeout_ms_of"]


def log_call_event(event: str, call: PendingToolCall, level: int = logging.INFO, **fields: Any) -> None:
    """Log ``client_tool.{event}`` for ``call``, with its id and tool name and ``fields``."""
    lifecycle.log_event(
        f"client_tool.{event}",
        call.session_id,
        call.run_id,
        level,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        **fields,
    )


def timeout_ms_of(call: PendingToolCall) -> int | None:
    """The call's timeout as the tool set it (its deadline less its record time)."""
    return None if call.deadline_ms is None else call.deadline_ms - call.created_at
