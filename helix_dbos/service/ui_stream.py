"""Helix stream chunks -> the AI SDK's UI message stream parts (``ai`` 5+ ``UIMessageChunk``), purely.

The AI SDK's ``useChat`` (its ``DefaultChatTransport``) reads a chat reply as server-sent events
whose ``data`` is one JSON *part* each, ending with ``data: [DONE]``, on a response carrying the
``x-vercel-ai-ui-message-stream: v1`` header (:data:`UI_MESSAGE_STREAM_HEADERS`). This module
turns a session's stored chunks into those parts, with no I/O, so the mapping is unit-tested on
its own and the route (``helix_dbos.service.routes.ui_chat``) only moves bytes:

======================================  ===================================================================
helix chunk                             UI message parts
======================================  ===================================================================
first content chunk of a step           ``start-step`` (``finish-step`` closes the previous step)
``text_delta``                          ``text-start`` (once per text run), ``text-delta``
``thinking``                            ``reasoning-start``, ``reasoning-delta``, ``reasoning-end`` when complete
``tool_start``                          ``tool-input-available`` (once per call id)
``tool_approval_request``               ``tool-approval-request`` (``approvalId`` = the tool call id)
``tool_end``                            ``tool-output-available`` / ``tool-output-error``;
                                        ``tool-output-denied`` when an approval was refused
``subagent_start`` / ``subagent_end``   a dynamic tool part (``dynamic: true``) named after the sub-agent
a sub-agent's own chunks                ``data-subagent-chunk`` (transient: ``onData`` only)
``state_patch``                         ``data-state-patch`` ``{"patches": [...]}``
``custom``                              ``data-<event_name>`` with the event's data
``output``                              ``data-output`` ``{"output": ...}``
``error``                               ``error`` (``data-error``, transient, when recoverable)
``run_paused`` (latest chunk)           ``finish`` (``finishReason: "tool-calls"``): the browser answers
``run_interrupted`` (latest chunk)      ``finish`` (``finishReason: "interrupted"``)
the run's end                           ``finish`` (``"stop"``); a failed stream: ``error``
======================================  ===================================================================

Open text and reasoning parts are closed (``text-end`` / ``reasoning-end``) before any other part,
so the client never sees interleaved parts. Lifecycle chunks (checkpoints, commits, resync) are
not part of a chat message and produce nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from helix_dbos.errors import public_error_message
from helix_dbos.orchestration.message_builder import NOT_APPROVED_MESSAGE
from helix_dbos.stream.chunks import (
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
    chunk_to_json,
)

__all__ = [
    "UI_MESSAGE_STREAM_DONE",
    "UI_MESSAGE_STREAM_HEADERS",
    "FinishReason",
    "UIMessagePart",
    "UIMessageStreamTranslator",
    "ends_reply",
    "part_json",
]

UIMessagePart = dict[str, Any]
"""One ``UIMessageChunk`` of the AI SDK: a JSON object discriminated by ``type``."""

FinishReason = Literal["stop", "tool-calls", "interrupted", "error", "other"]

UI_MESSAGE_STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
    "x-vercel-ai-ui-message-stream": "v1",
}
"""The AI SDK's ``UI_MESSAGE_STREAM_HEADERS`` (the content type comes with the SSE response)."""

UI_MESSAGE_STREAM_DONE = "[DONE]"
"""The ``data`` of the stream's last event (the AI SDK's ``JsonToSseTransformStream`` flush)."""


def part_json(part: UIMessagePart) -> str:
    """One part as its event's ``data``: compact JSON, what ``JSON.stringify`` would send."""
    return json.dumps(part, separators=(",", ":"), ensure_ascii=False)


def ends_reply(chunk: StreamChunk) -> FinishReason | None:
    """How the reply the browser reads ends at ``chunk`` when nothing follows it (``None``: it goes on).

    A paused run waits for the browser (a client-executed tool's result, an approval), so the
    response must end for ``useChat`` to answer and post again; an interrupted run waits for a
    resume. The route checks that nothing was written after the chunk (a pause already answered
    is followed by ``run_resumed``) before it ends a replayed response there.
    """
    if isinstance(chunk, RunPausedChunk):
        return "tool-calls"
    if isinstance(chunk, RunInterruptedChunk):
        return "interrupted"
    return None


def _data_name(event_name: str) -> str:
    """``custom`` events become ``data-<name>`` parts; characters a part type should not hold become ``-``."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in event_name)
    return f"data-{cleaned or 'custom'}"


class UIMessageStreamTranslator:
    """The parts of one reply, chunk by chunk (one instance per HTTP response).

    ``known_tool_calls`` are the tool calls the browser already shows (the tool parts of the
    assistant message it posted when answering: call id -> whether the part is dynamic), so their
    ``tool_start`` is not announced again (``useChat`` would reset the part and call its
    ``onToolCall`` once more). Every tool part is announced the same way; ``onToolCall`` picks the
    client-executed ones by name. ``approval_calls`` are the calls among them the browser was asked
    to approve, so a refusal's ``tool_end`` reads as ``tool-output-denied``.
    """

    def __init__(
        self, *, known_tool_calls: Mapping[str, bool] | None = None, approval_calls: Iterable[str] = ()
    ) -> None:
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        self._step: int | None = None
        self._in_step = False
        self._counter = 0
        self._announced: dict[str, bool] = dict(known_tool_calls or {})
        """Tool call id -> dynamic (a sub-agent's call), for every call the browser has a part for."""
        self._approvals: set[str] = set(approval_calls)
        self._sub_agents: dict[str, str] = {}
        """Sub-agent session id -> the parent's tool call id, while the sub-agent runs."""

    # -- boundaries ------------------------------------------------------------------------------
    def start(self, message_id: str, metadata: dict[str, Any] | None = None) -> list[UIMessagePart]:
        """The reply's first part: its message id (stable across answers and replays) and metadata."""
        part: UIMessagePart = {"type": "start", "messageId": message_id}
        if metadata:
            part["messageMetadata"] = metadata
        return [part]

    def finish(self, reason: FinishReason = "stop") -> list[UIMessagePart]:
        """Close what is open and end the message."""
        return [*self._close_step(), {"type": "finish", "finishReason": reason}]

    def fail(self, error_text: str) -> list[UIMessagePart]:
        """Close what is open and report the failure (``useChat`` shows it as the chat's error)."""
        return [*self._close_step(), {"type": "error", "errorText": error_text}]

    # -- chunks ------------------------------------------------------------------------------------
    def translate(self, chunk: StreamChunk) -> list[UIMessagePart]:
        """The parts for one stored chunk (often none: lifecycle chunks are not message content)."""
        if self._is_sub_agent_chunk(chunk):
            return [{"type": "data-subagent-chunk", "data": json.loads(chunk_to_json(chunk)), "transient": True}]
        if isinstance(chunk, TextDeltaChunk):
            return self._text(chunk)
        if isinstance(chunk, ThinkingChunk):
            return self._reasoning(chunk)
        if isinstance(chunk, ToolStartChunk):
            return self._tool_input(chunk.tool_call_id, chunk.tool_name, chunk.arguments, chunk.step)
        if isinstance(chunk, ToolApprovalRequestChunk):
            return self._approval(chunk)
        if isinstance(chunk, ToolEndChunk):
            return self._tool_output(chunk)
        if isinstance(chunk, SubAgentStartChunk):
            self._sub_agents[chunk.sub_agent_id] = chunk.tool_call_id
            return self._tool_input(chunk.tool_call_id, chunk.sub_agent_type, chunk.input, chunk.step, dynamic=True)
        if isinstance(chunk, SubAgentEndChunk):
            self._sub_agents.pop(chunk.sub_agent_id, None)
            return self._sub_agent_output(chunk)
        if isinstance(chunk, StatePatchChunk):
            return [*self._content(chunk.step), {"type": "data-state-patch", "data": {"patches": chunk.patches}}]
        if isinstance(chunk, CustomEventChunk):
            return [*self._content(chunk.step), {"type": _data_name(chunk.event_name), "data": chunk.data}]
        if isinstance(chunk, OutputChunk):
            return [*self._content(chunk.step), {"type": "data-output", "data": {"output": chunk.output}}]
        if isinstance(chunk, ErrorChunk):
            return self._error(chunk)
        # ``run_paused`` / ``run_interrupted`` end the reply only when nothing follows them, which
        # the route knows (:func:`ends_reply`); it then calls :meth:`finish`.
        return []

    # -- helpers -------------------------------------------------------------------------------------
    def _next_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._counter}"

    def _is_sub_agent_chunk(self, chunk: StreamChunk) -> bool:
        # A child's run ids start with its session id (``<child session>-turn-N``), and so do its own
        # children's: what a sub-agent streams is not the parent's message text.
        return any(chunk.agent_id.startswith(child) for child in self._sub_agents)

    def _close_open(self) -> list[UIMessagePart]:
        parts: list[UIMessagePart] = []
        if self._text_id is not None:
            parts.append({"type": "text-end", "id": self._text_id})
            self._text_id = None
        if self._reasoning_id is not None:
            parts.append({"type": "reasoning-end", "id": self._reasoning_id})
            self._reasoning_id = None
        return parts

    def _close_step(self) -> list[UIMessagePart]:
        parts = self._close_open()
        if self._in_step:
            parts.append({"type": "finish-step"})
            self._in_step = False
        return parts

    def _content(self, step: int | None, *, keep: Literal["text", "reasoning", None] = None) -> list[UIMessagePart]:
        """Parts due before new content of ``step``: step boundaries, and the closing of open parts."""
        parts: list[UIMessagePart] = []
        if not self._in_step or (step is not None and self._step is not None and step != self._step):
            parts.extend(self._close_step())
            parts.append({"type": "start-step"})
            self._in_step = True
        if step is not None:
            self._step = step
        if keep != "text" and self._text_id is not None:
            parts.append({"type": "text-end", "id": self._text_id})
            self._text_id = None
        if keep != "reasoning" and self._reasoning_id is not None:
            parts.append({"type": "reasoning-end", "id": self._reasoning_id})
            self._reasoning_id = None
        return parts

    def _text(self, chunk: TextDeltaChunk) -> list[UIMessagePart]:
        parts = self._content(chunk.step, keep="text")
        if self._text_id is None:
            self._text_id = self._next_id("text")
            parts.append({"type": "text-start", "id": self._text_id})
        if chunk.content:
            parts.append({"type": "text-delta", "id": self._text_id, "delta": chunk.content})
        return parts

    def _reasoning(self, chunk: ThinkingChunk) -> list[UIMessagePart]:
        parts = self._content(chunk.step, keep="reasoning")
        if self._reasoning_id is None:
            self._reasoning_id = self._next_id("reasoning")
            parts.append({"type": "reasoning-start", "id": self._reasoning_id})
        if chunk.content:
            parts.append({"type": "reasoning-delta", "id": self._reasoning_id, "delta": chunk.content})
        if chunk.is_complete:
            parts.append({"type": "reasoning-end", "id": self._reasoning_id})
            self._reasoning_id = None
        return parts

    def _tool_input(
        self, call_id: str, name: str, arguments: Any, step: int | None, *, dynamic: bool = False
    ) -> list[UIMessagePart]:
        if call_id in self._announced:
            # Already shown (an approved call starting, or the browser's own copy of the call).
            return []
        self._announced[call_id] = dynamic
        part: UIMessagePart = {
            "type": "tool-input-available",
            "toolCallId": call_id,
            "toolName": name,
            "input": arguments,
        }
        if dynamic:
            part["dynamic"] = True
        return [*self._content(step), part]

    def _approval(self, chunk: ToolApprovalRequestChunk) -> list[UIMessagePart]:
        parts = self._tool_input(chunk.tool_call_id, chunk.tool_name, chunk.arguments, chunk.step)
        self._approvals.add(chunk.tool_call_id)
        return [
            *parts,
            *self._content(chunk.step),
            {"type": "tool-approval-request", "approvalId": chunk.tool_call_id, "toolCallId": chunk.tool_call_id},
        ]

    def _tool_output(self, chunk: ToolEndChunk) -> list[UIMessagePart]:
        parts = self._tool_input(chunk.tool_call_id, chunk.tool_name, {}, chunk.step)
        if chunk.success:
            return [*parts, *self._output(chunk.tool_call_id, chunk.step, output=chunk.result)]
        if chunk.tool_call_id in self._approvals and chunk.error == NOT_APPROVED_MESSAGE:
            return [
                *parts,
                *self._content(chunk.step),
                {"type": "tool-output-denied", "toolCallId": chunk.tool_call_id},
            ]
        return [*parts, *self._output(chunk.tool_call_id, chunk.step, error=chunk.error or "Tool failed")]

    def _sub_agent_output(self, chunk: SubAgentEndChunk) -> list[UIMessagePart]:
        parts = self._tool_input(chunk.tool_call_id, chunk.sub_agent_type, None, chunk.step, dynamic=True)
        if chunk.error is None:
            return [*parts, *self._output(chunk.tool_call_id, chunk.step, output=chunk.result)]
        return [*parts, *self._output(chunk.tool_call_id, chunk.step, error=chunk.error)]

    def _output(
        self, call_id: str, step: int | None, *, output: Any = None, error: str | None = None
    ) -> list[UIMessagePart]:
        part: UIMessagePart = (
            {"type": "tool-output-available", "toolCallId": call_id, "output": output}
            if error is None
            else {"type": "tool-output-error", "toolCallId": call_id, "errorText": public_error_message(error)}
        )
        if self._announced.get(call_id):
            part["dynamic"] = True
        return [*self._content(step), part]

    def _error(self, chunk: ErrorChunk) -> list[UIMessagePart]:
        if chunk.recoverable:
            data = {"error": public_error_message(chunk.error), "code": chunk.code}
            return [*self._content(chunk.step), {"type": "data-error", "data": data, "transient": True}]
        return [*self._close_open(), {"type": "error", "errorText": public_error_message(chunk.error)}]
