"""Streaming: fold LiteLLM's chunks into a :class:`RawResponse` while reporting deltas live.

Text and reasoning deltas go to the step's :class:`LLMStreamCallbacks` as they arrive; a tool call
is reported as soon as it is complete (a later call has started and its JSON already parses), and
the rest once the stream ends. Callback failures are wrapped in :class:`CallbackFailed` so the
adapter can tell them from provider failures: a broken callback is a runtime failure and must not
be retried as if the provider had failed.

LiteLLM 1.106.2 ends a stream whose connection dropped as if it had finished (a synthesised
``finish_reason="stop"``, half a tool-call JSON); :func:`stream_was_cut` reads its wrapper to tell.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import Any

from helix_dbos.llm.base import LLMStreamCallbacks
from helix_dbos.llm.litellm.response import RawCall, RawResponse, new_call_id
from helix_dbos.llm.litellm.schema import drop_optional_nulls
from helix_dbos.step_result import ParsedToolCall

__all__ = ["CallbackFailed", "StreamAccumulator", "notify", "stream_was_cut"]


class CallbackFailed(Exception):
    """Carries an exception raised by a stream callback past the provider-error handling."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def notify(awaitable: Awaitable[None]) -> None:
    """Await a callback, wrapping what it raises in :class:`CallbackFailed`."""
    try:
        await awaitable
    except Exception as exc:
        raise CallbackFailed(exc) from exc


def _merge_thinking_block(blocks: list[dict[str, Any]], delta: Mapping[str, Any]) -> None:
    """Fold a streamed thinking-block delta into the list (text appends, signature closes a block)."""
    last = blocks[-1] if blocks else None
    if last is not None and last.get("type") == delta.get("type") == "thinking" and not last.get("signature"):
        last["thinking"] = (last.get("thinking") or "") + (delta.get("thinking") or "")
        if delta.get("signature"):
            last["signature"] = delta["signature"]
    else:
        blocks.append(dict(delta))


class StreamAccumulator:
    """Collects one streamed attempt; :meth:`add` each chunk, then :meth:`finish`.

    ``reported`` counts the tool calls already passed to ``on_tool_call``, in index order, so that
    the adapter reports only the rest once the response is parsed.
    """

    def __init__(self, callbacks: LLMStreamCallbacks, strict_schemas: Mapping[str, dict[str, Any]]) -> None:
        self._callbacks = callbacks
        self._strict_schemas = strict_schemas
        self._raw = RawResponse()
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, RawCall] = {}
        self._reasoning_open = False
        self.reported = 0

    async def add(self, chunk: Any) -> None:
        """Fold one chunk in, reporting its deltas."""
        if getattr(chunk, "usage", None) is not None:
            self._raw.usage = chunk.usage
        if not chunk.choices:
            return
        choice = chunk.choices[0]
        self._raw.finish_reason = choice.finish_reason or self._raw.finish_reason
        delta = choice.delta
        await self._add_reasoning(getattr(delta, "reasoning_content", None))
        for block in getattr(delta, "thinking_blocks", None) or ():
            _merge_thinking_block(self._raw.thinking_blocks, dict(block))
        if delta.content:
            await self._add_text(delta.content)
        for tool_delta in delta.tool_calls or ():
            await self._add_tool_delta(tool_delta)

    async def finish(self) -> RawResponse:
        """Close the reasoning (if still open) and return what the stream carried."""
        await self._close_reasoning()
        raw = self._raw
        raw.text, raw.reasoning = "".join(self._text), "".join(self._reasoning)
        raw.calls = [self._calls[i] for i in sorted(self._calls)]
        return raw

    async def _add_reasoning(self, piece: str | None) -> None:
        if piece:
            self._reasoning.append(piece)
            self._reasoning_open = True
            await notify(self._callbacks.thinking(piece, False))

    async def _close_reasoning(self) -> None:
        """Reasoning ends when text or a tool call starts (or the stream ends): report its end once."""
        if self._reasoning_open:
            self._reasoning_open = False
            await notify(self._callbacks.thinking("", True))

    async def _add_text(self, content: str) -> None:
        await self._close_reasoning()
        self._text.append(content)
        await notify(self._callbacks.text_delta(content))

    async def _add_tool_delta(self, tool_delta: Any) -> None:
        await self._close_reasoning()
        index = tool_delta.index if isinstance(tool_delta.index, int) else len(self._calls)
        if index not in self._calls:
            await self._report_complete_calls(index)
            self._calls[index] = RawCall()
        call = self._calls[index]
        call.id = tool_delta.id or call.id
        function = tool_delta.function
        if function is not None:
            call.name = function.name or call.name
            call.arguments += function.arguments or ""

    async def _report_complete_calls(self, upto: int) -> None:
        """A call is complete once a later index starts; report it if its JSON already parses."""
        ordered = [self._calls[i] for i in sorted(self._calls) if i < upto]
        while self.reported < len(ordered):
            call = ordered[self.reported]
            try:
                arguments = json.loads(call.arguments) if call.arguments.strip() else {}
            except json.JSONDecodeError:
                return
            schema = self._strict_schemas.get(call.name)
            if schema is not None:
                arguments = drop_optional_nulls(arguments, schema, schema)
            call.id = call.id or new_call_id()
            await notify(self._callbacks.tool_call(ParsedToolCall(id=call.id, name=call.name, arguments=arguments)))
            self.reported += 1


def stream_was_cut(stream: Any) -> bool:
    """Tell whether LiteLLM's stream wrapper never saw a provider finish reason.

    LiteLLM 1.106.2 synthesises ``finish_reason="stop"`` for a dropped connection, so the chunks
    cannot tell; its wrapper records whether the provider sent one. Without those attributes
    (another LiteLLM version) we cannot tell and trust the stream; broken tool-call JSON is still
    caught when the response's calls are parsed.
    """
    if not hasattr(stream, "received_finish_reason"):
        return False
    return stream.received_finish_reason is None and getattr(stream, "intermittent_finish_reason", None) is None
