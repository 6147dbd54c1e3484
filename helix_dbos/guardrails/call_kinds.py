"""Which of a batch's calls the tool stages see besides plain tool calls. Pure: no I/O, no clock.

A model's call is not always a call of a plain tool: it may delegate to a sub-agent (local or
remote), start or consult a companion (``companion__*``), hand a call to the client
(``execute="client"``), ask a person first (``require_approval``), or complete the run through a
``finish_with`` tool. Each is a call the model made, and a prompt injection can make any of them,
so the ``tool_call`` stage looks at all of them before they are dispatched, and the
``tool_result`` stage at the results the engine hands back to the model (a sub-agent's or a
companion's answer, a client-submitted result). This module says which calls those are and takes
a denied call out of its phase; :mod:`helix_dbos.guardrails.capability` runs the checks.

Only a plain tool call can be sent to a person for approval by a guard (its approval runs the
tool as a step; a delegation, a companion or a client call has no step to run after an approval),
so an ``approve`` trip on any other call denies it.
"""

from __future__ import annotations

from collections.abc import Collection

from helix_dbos.orchestration.tool_batch import ToolBatch
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.tool import Tool


def calls_to_dispatch(batch: ToolBatch, checked_before: Collection[str]) -> list[tuple[ParsedToolCall, Tool]]:
    """The batch's calls that are not plain tool calls, about to be dispatched, in phase order.

    ``checked_before``: a continuation's calls, which its previous run checked before it handed
    them out (a client call already with the client, a companion already started): not again.
    """
    calls: list[tuple[ParsedToolCall, Tool]] = [
        *batch.sub_agents,
        *batch.remote_sub_agents,
        *((h.call, h.tool) for h in batch.hitl if h.kind in ("client", "approval") and h.held_result is None),
        *batch.companion,
        *batch.finishing,
    ]
    return [(call, tool) for call, tool in calls if call.id not in checked_before]


def results_from_engine(batch: ToolBatch) -> list[tuple[ParsedToolCall, Tool]]:
    """Calls whose result the engine produces before the model reads it, other than a tool step's.

    Sub-agent answers (local and remote) and client-submitted results; a companion's answer
    comes later in the batch (``after_human_calls``) and is reviewed there.
    """
    return [
        *batch.sub_agents,
        *batch.remote_sub_agents,
        *((h.call, h.tool) for h in batch.hitl if h.kind == "client"),
    ]


def remove_calls(batch: ToolBatch, call_ids: Collection[str]) -> None:
    """Take denied calls out of their phases: nothing dispatches them (their result is the denial)."""
    if not call_ids:
        return
    batch.sub_agents[:] = [(c, t) for c, t in batch.sub_agents if c.id not in call_ids]
    batch.remote_sub_agents[:] = [(c, t) for c, t in batch.remote_sub_agents if c.id not in call_ids]
    batch.hitl[:] = [h for h in batch.hitl if h.call.id not in call_ids]
    batch.companion[:] = [(c, t) for c, t in batch.companion if c.id not in call_ids]
    batch.finishing[:] = [(c, t) for c, t in batch.finishing if c.id not in call_ids]


__all__ = ["calls_to_dispatch", "remove_calls", "results_from_engine"]
