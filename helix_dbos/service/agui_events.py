"""Helix stream chunks -> AG-UI events, purely.

An AG-UI client (``@ag-ui/client``'s ``HttpAgent``) reads a run as server-sent events whose
``data`` is one JSON event each, and checks their order (``verifyEvents``): ``RUN_STARTED``
first, every message and tool call closed before ``RUN_FINISHED``, nothing after it. This module
turns a session's stored chunks into those events with no I/O, so the mapping is unit-tested on
its own and the route (:mod:`helix_dbos.service.routes.agui`) only moves bytes:

======================================  ===================================================================
helix                                   AG-UI events
======================================  ===================================================================
the response's start                    ``RUN_STARTED`` (the client's ``threadId``/``runId``), ``STATE_SNAPSHOT``
first content chunk of a step           ``STEP_STARTED`` ``step-<n>`` (``STEP_FINISHED`` closes the previous)
``text_delta``                          ``TEXT_MESSAGE_START`` (once per step), ``TEXT_MESSAGE_CONTENT``
``thinking``                            ``REASONING_START``/``REASONING_MESSAGE_START``/``..._CONTENT``/ends
``tool_start``                          ``TOOL_CALL_START``, ``TOOL_CALL_ARGS`` (the JSON), ``TOOL_CALL_END``
``tool_approval_request``               the same (once per call); the run finishes with an ``interrupt``
``tool_end``                            ``TOOL_CALL_RESULT`` (not for client-executed tools: the client
                                        holds the result message it posted)
``subagent_start`` / ``subagent_end``   a tool call named after the sub-agent, and its result
a sub-agent's own chunks                nothing (its work shows as that tool call's result)
``state_patch``                         ``STATE_DELTA`` (the RFC 6902 operations, unchanged)
``custom``                              ``CUSTOM`` ``{name, value}``
``error`` (recoverable)                 ``CUSTOM`` ``helix.error`` ``{message, code}``
``error`` (the run failed)              ``RUN_ERROR`` ``{message, code}`` at the end
``output``                              ``RUN_FINISHED.result``
``run_paused`` (latest chunk)           ``RUN_FINISHED``: ``outcome.pendingToolCallIds`` (client tools),
                                        or ``outcome: interrupt`` (approvals; interrupt id = tool call id)
``run_interrupted`` (latest chunk)      ``RUN_FINISHED`` ``outcome: cancelled``
the run's end                           ``RUN_FINISHED`` ``outcome: success``
======================================  ===================================================================

Message ids are deterministic (``<helix run id>-step-<n>``; a tool call's parent is its step's
message), so a replay or a resume names the same messages. A response that resumes after a
position first *consumes* the chunks up to it (:meth:`AGUIEventTranslator.consume`) and then
re-opens what was open there (the step, the text message), so the client's verifier accepts the
resumed stream and its message goes on where it stopped.
"""

from __future__ import annotations

import json
from typing import Any

from helix_dbos.errors import public_error_message
from helix_dbos.stream.base import ChunkRecord
from helix_dbos.stream.chunks import (
    CheckpointCreatedChunk,
    CustomEventChunk,
    ErrorChunk,
    OutputChunk,
    RunInterruptedChunk,
    RunPausedChunk,
    StatePatchChunk,
    StreamChunk,
    SubAgentEndChunk,
    SubAgentStartChunk,
    TextDeltaChunk,
    ThinkingChunk,
    ToolApprovalRequestChunk,
    ToolEndChunk,
    ToolStartChunk,
)
from helix_dbos.stream.projection import StreamProjector

__all__ = ["AGUIEvent", "AGUIEventTranslator", "event_json", "is_pause"]

AGUIEvent = dict[str, Any]
"""One AG-UI event: a JSON object discriminated by ``type``."""


def event_json(event: AGUIEvent) -> str:
    """One event as its SSE ``data``: compact JSON, what ``JSON.stringify`` would send."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def is_pause(chunk: StreamChunk) -> bool:
    """Whether ``chunk`` stops its run to wait (for answers, or for a resume)."""
    return isinstance(chunk, RunPausedChunk | RunInterruptedChunk)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class AGUIEventTranslator:
    """The AG-UI events of one response, chunk by chunk (one instance per HTTP response).

    ``session_id`` is the thread's session: chunks of its sub-agents (other sessions writing to its
    stream) are not the thread's events. ``message_prefix`` is the helix run id (message ids derive
    from it); ``client_tools`` are the agent's client-executed tools, whose results the client
    posted itself.

    ``state`` is the custom state of checkpoint ``state_checkpoint`` (``None``: a state every patch
    the response reads applies to). The stream announces each checkpoint (``checkpoint_created``)
    after the state patches it holds, so patches before that announcement are in ``state`` already
    and patches after it are not, whether the announcement comes before the response starts
    sending or after (the run committed the checkpoint but had not announced it yet).
    """

    def __init__(
        self,
        *,
        thread_id: str,
        run_id: str,
        session_id: str,
        message_prefix: str,
        client_tools: frozenset[str] = frozenset(),
        state: Any = None,
        state_checkpoint: str | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._prefix = message_prefix
        self._runs_prefix = f"{session_id}-turn-"
        self._client_tools = client_tools
        self._anchor_state: Any = state if state is not None else {}
        self._anchor = state_checkpoint
        self._state: StreamProjector[Any] = StreamProjector(initial_state=self._anchor_state)
        self._step: int | None = None
        self._text_open = False
        self._reasoning_open = False
        self._announced: set[str] = set()
        self._approvals: dict[str, str] = {}
        """Approval-gated call id -> tool name."""
        self._output: Any = None
        self._failure: ErrorChunk | None = None

    # -- boundaries ------------------------------------------------------------------------------
    def consume_state(self, record: ChunkRecord) -> None:
        """Take in a chunk from before the run (the state's checkpoint may be older than the run's start)."""
        self._track_state(record)

    def consume(self, record: ChunkRecord) -> None:
        """Take in a chunk the client has already seen (a resume's prefix): state only, no events.

        A pause the client saw ended the AG-UI run it was reading (:meth:`finish` closed the step
        and message), so what follows opens its own.
        """
        self.translate(record)
        if self.pauses_at(record.chunk):
            self._close_step()

    def start(self) -> list[AGUIEvent]:
        """``RUN_STARTED``, the state as of where the response starts, and what is open there."""
        events: list[AGUIEvent] = [
            {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id},
            {"type": "STATE_SNAPSHOT", "snapshot": self._state.state},
        ]
        if self._step is not None:
            events.append({"type": "STEP_STARTED", "stepName": self._step_name()})
        if self._text_open:
            events.append({"type": "TEXT_MESSAGE_START", "messageId": self._message_id(), "role": "assistant"})
        if self._reasoning_open:
            events.append({"type": "REASONING_START", "messageId": self._reasoning_id()})
            events.append({"type": "REASONING_MESSAGE_START", "messageId": self._reasoning_id(), "role": "reasoning"})
        return events

    def finish(self, chunk: StreamChunk | None = None) -> list[AGUIEvent]:
        """Close what is open and end the run: how depends on the chunk it stopped at (``None``: it ended)."""
        events = self._close_step()
        if self._failure is not None:
            message = public_error_message(self._failure.error)
            failed: AGUIEvent = {"type": "RUN_ERROR", "message": message}
            if self._failure.code:
                failed["code"] = self._failure.code
            return [*events, failed]
        finished: AGUIEvent = {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id}
        if isinstance(chunk, RunPausedChunk):
            finished["outcome"] = self._pause_outcome(chunk)
        elif isinstance(chunk, RunInterruptedChunk):
            finished["outcome"] = {"type": "cancelled"}
        else:
            finished["outcome"] = {"type": "success"}
            if self._output is not None:
                finished["result"] = self._output
        return [*events, finished]

    @staticmethod
    def fail(message: str, code: str | None = None) -> list[AGUIEvent]:
        """The run's stream could not be read to its end: ``RUN_ERROR`` (nothing may follow it)."""
        event: AGUIEvent = {"type": "RUN_ERROR", "message": message}
        if code:
            event["code"] = code
        return [event]

    def pauses_at(self, chunk: StreamChunk) -> bool:
        """Whether the AG-UI run ends at ``chunk`` when nothing follows it (the route checks that).

        Only the thread's own runs count: a sub-agent's pause, mirrored into the stream, is its own.
        """
        return is_pause(chunk) and self._own(chunk)

    # -- chunks ------------------------------------------------------------------------------------
    def translate(self, record: ChunkRecord) -> list[AGUIEvent]:
        """The events for one stored chunk (often none: lifecycle chunks are not run content)."""
        chunk = record.chunk
        if not self._own(chunk):
            return []
        changed = self._track_state(record)
        if isinstance(chunk, StatePatchChunk):
            if not changed:
                return []  # in the snapshot this response started from
            return [*self._content(chunk.step), {"type": "STATE_DELTA", "delta": chunk.patches}]
        if isinstance(chunk, TextDeltaChunk):
            return self._text_delta(chunk)
        if isinstance(chunk, ThinkingChunk):
            return self._thinking(chunk)
        if isinstance(chunk, ToolStartChunk):
            return self._tool_call(chunk.tool_call_id, chunk.tool_name, chunk.arguments, chunk.step)
        if isinstance(chunk, ToolApprovalRequestChunk):
            self._approvals[chunk.tool_call_id] = chunk.tool_name
            return self._tool_call(chunk.tool_call_id, chunk.tool_name, chunk.arguments, chunk.step)
        if isinstance(chunk, ToolEndChunk):
            if chunk.tool_name in self._client_tools:
                return []
            value = chunk.result if chunk.success else {"error": chunk.error or "Tool failed"}
            return self._tool_result(chunk.tool_call_id, chunk.tool_name, value, chunk.step)
        if isinstance(chunk, SubAgentStartChunk):
            return self._tool_call(chunk.tool_call_id, chunk.sub_agent_type, chunk.input, chunk.step)
        if isinstance(chunk, SubAgentEndChunk):
            value = chunk.result if chunk.error is None else {"error": chunk.error}
            return self._tool_result(chunk.tool_call_id, chunk.sub_agent_type, value, chunk.step)
        if isinstance(chunk, CustomEventChunk):
            return [*self._content(chunk.step), {"type": "CUSTOM", "name": chunk.event_name, "value": chunk.data}]
        if isinstance(chunk, OutputChunk):
            self._output = chunk.output
            return []
        if isinstance(chunk, ErrorChunk):
            if not chunk.recoverable:
                self._failure = chunk
                return []
            value = {"message": public_error_message(chunk.error), "code": chunk.code}
            return [*self._content(chunk.step), {"type": "CUSTOM", "name": "helix.error", "value": value}]
        return []

    # -- helpers -------------------------------------------------------------------------------------
    def _track_state(self, record: ChunkRecord) -> bool:
        """Follow the custom state through one chunk; ``True`` when it applied a patch (a delta to send)."""
        chunk = record.chunk
        if not self._own(chunk):
            return False
        if isinstance(chunk, CheckpointCreatedChunk) and chunk.checkpoint_id == self._anchor:
            self._anchor = None
            self._state.reset(self._anchor_state, sequence=record.sequence)
            return False
        if not isinstance(chunk, StatePatchChunk):
            return False
        if self._anchor is not None:
            return False  # before the checkpoint's announcement: in its state already
        applied = self._state.patches_applied
        self._state.apply(record)
        return self._state.patches_applied != applied

    def _own(self, chunk: StreamChunk) -> bool:
        """Whether the session's own runs (``<session>-turn-<n>``) wrote ``chunk``, not a sub-agent's."""
        agent_id = chunk.agent_id
        return agent_id.startswith(self._runs_prefix) and agent_id[len(self._runs_prefix) :].isdigit()

    def _step_name(self) -> str:
        return f"step-{self._step or 0}"

    def _message_id(self) -> str:
        return f"{self._prefix}-step-{self._step or 0}"

    def _reasoning_id(self) -> str:
        return f"{self._message_id()}-reasoning"

    def _close_text(self) -> list[AGUIEvent]:
        events: list[AGUIEvent] = []
        if self._text_open:
            events.append({"type": "TEXT_MESSAGE_END", "messageId": self._message_id()})
            self._text_open = False
        if self._reasoning_open:
            events.append({"type": "REASONING_MESSAGE_END", "messageId": self._reasoning_id()})
            events.append({"type": "REASONING_END", "messageId": self._reasoning_id()})
            self._reasoning_open = False
        return events

    def _close_step(self) -> list[AGUIEvent]:
        events = self._close_text()
        if self._step is not None:
            events.append({"type": "STEP_FINISHED", "stepName": self._step_name()})
            self._step = None
        return events

    def _content(self, step: int | None, *, keep_text: bool = False) -> list[AGUIEvent]:
        """Events due before new content of ``step``: step boundaries, the closing of open messages."""
        events: list[AGUIEvent] = []
        number = step if step is not None else (self._step or 0)
        if self._step is None or number != self._step:
            events.extend(self._close_step())
            self._step = number
            events.append({"type": "STEP_STARTED", "stepName": self._step_name()})
        elif not keep_text:
            events.extend(self._close_text())
        return events

    def _text_delta(self, chunk: TextDeltaChunk) -> list[AGUIEvent]:
        events = self._content(chunk.step, keep_text=True)
        if self._reasoning_open:
            events.extend(self._close_text())
        if not self._text_open:
            self._text_open = True
            events.append({"type": "TEXT_MESSAGE_START", "messageId": self._message_id(), "role": "assistant"})
        if chunk.content:
            events.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": self._message_id(), "delta": chunk.content})
        return events

    def _thinking(self, chunk: ThinkingChunk) -> list[AGUIEvent]:
        events = self._content(chunk.step, keep_text=True)
        if self._text_open:
            events.extend(self._close_text())
        reasoning_id = self._reasoning_id()
        if not self._reasoning_open:
            self._reasoning_open = True
            events.append({"type": "REASONING_START", "messageId": reasoning_id})
            events.append({"type": "REASONING_MESSAGE_START", "messageId": reasoning_id, "role": "reasoning"})
        if chunk.content:
            events.append({"type": "REASONING_MESSAGE_CONTENT", "messageId": reasoning_id, "delta": chunk.content})
        if chunk.is_complete:
            events.extend(self._close_text())
        return events

    def _tool_call(self, call_id: str, name: str, arguments: Any, step: int | None) -> list[AGUIEvent]:
        if call_id in self._announced:
            return []  # an approved call starting: the client was shown it with the approval request
        self._announced.add(call_id)
        events = self._content(step)
        events.append(
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call_id,
                "toolCallName": name,
                "parentMessageId": self._message_id(),
            }
        )
        events.append({"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": _text(arguments or {})})
        events.append({"type": "TOOL_CALL_END", "toolCallId": call_id})
        return events

    def _tool_result(self, call_id: str, name: str, value: Any, step: int | None) -> list[AGUIEvent]:
        events = self._tool_call(call_id, name, {}, step)
        events.extend(self._content(step))
        events.append(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": f"{self._prefix}-result-{call_id}",
                "toolCallId": call_id,
                "content": _text(value),
                "role": "tool",
            }
        )
        return events

    def _pause_outcome(self, chunk: RunPausedChunk) -> dict[str, Any]:
        approvals = [call for call in chunk.pending_tool_call_ids if call in self._approvals]
        if approvals:
            interrupts = [
                {
                    "id": call,
                    "reason": "tool_approval",
                    "toolCallId": call,
                    "message": f"Approve the call to {self._approvals[call]}?",
                    "responseSchema": {
                        "type": "object",
                        "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
                    },
                }
                for call in approvals
            ]
            return {"type": "interrupt", "interrupts": interrupts}
        return {"type": "success", "pendingToolCallIds": list(chunk.pending_tool_call_ids)}
