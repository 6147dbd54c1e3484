"""The LLM adapter contract: one call in, one :data:`StepResult` out (seed 002 "LLMAdapter Interface").

The runtime calls :meth:`LLMAdapter.generate_step` inside the durable LLM step, so the result is
what DBOS checkpoints. That is why adapters report provider failures as data: after exhausting its
own retries an adapter returns ``ErrorStepResult(error=HelixError(...), should_stop=True)`` rather
than raising, and the recorded step replays to the same failure. Only programming errors (a bug in
the adapter, a failing callback) raise.

Streaming is reported through :class:`LLMStreamCallbacks` while the call runs; the returned
step result is the complete, authoritative answer.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.files import FileKind
from helix_dbos.messages import Message
from helix_dbos.step_result import ParsedToolCall, StepResult
from helix_dbos.tool import AbortSignal, Tool

__all__ = ["LLMAdapter", "LLMGenerateInput", "LLMStreamCallbacks", "check_input_files"]


async def _invoke(callback: Callable[..., object] | None, *args: object) -> None:
    if callback is None:
        return
    result = callback(*args)
    if inspect.isawaitable(result):
        await result


@dataclass
class LLMStreamCallbacks:
    """Live notifications while a step streams; each callback may be sync or async.

    A callback that raises aborts the step with that exception: callbacks usually write to the
    run's stream, and a broken stream is a runtime failure, not a provider one.

    Adapters that retry call ``on_error`` before each retry: whatever was reported for the failed
    attempt (text deltas, tool calls) is void, and the next attempt starts from scratch.
    """

    on_text_delta: Callable[[str], Awaitable[None] | None] | None = None
    """A piece of response text, in order."""
    on_thinking: Callable[[str, bool], Awaitable[None] | None] | None = None
    """A piece of reasoning ``(delta, False)``; once reasoning ends, ``("", True)``."""
    on_tool_call: Callable[[ParsedToolCall], Awaitable[None] | None] | None = None
    """A tool call whose arguments are complete (sub-agent calls included, under their prefixed name)."""
    on_error: Callable[[BaseException], Awaitable[None] | None] | None = None
    """An attempt failed and will be retried."""

    async def text_delta(self, delta: str) -> None:
        """Report a text delta, awaiting the callback if it is async."""
        await _invoke(self.on_text_delta, delta)

    async def thinking(self, content: str, is_complete: bool) -> None:
        """Report a reasoning delta (or the end of reasoning)."""
        await _invoke(self.on_thinking, content, is_complete)

    async def tool_call(self, call: ParsedToolCall) -> None:
        """Report a completed tool call."""
        await _invoke(self.on_tool_call, call)

    async def error(self, error: BaseException) -> None:
        """Report a failed attempt."""
        await _invoke(self.on_error, error)


@dataclass
class LLMGenerateInput:
    """Everything one LLM step needs; built by the runtime from the session state."""

    messages: list[Message]
    """The transcript to send, system prompt first."""
    tools: list[Tool]
    """The effective tools, ``__finish__`` included when the agent has an output schema."""
    config: LLMConfig
    agent_id: str
    """The run id of the calling agent."""
    agent_type: str
    """The calling agent's name."""
    session_id: str | None = None
    """Used by prompt-cache strategies (cache keys, conversation headers)."""
    callbacks: LLMStreamCallbacks | None = None
    abort_signal: AbortSignal | None = None
    """Checked between attempts and between stream chunks; an abort ends the step early."""
    response_format: dict[str, Any] | None = None
    """The structured output the model must answer with (native output mode):
    ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ...}}``. An adapter that
    honours it returns the parsed answer as a ``StructuredOutputStepResult``; one that ignores it
    returns text, which the loop parses as in prompted mode."""


@runtime_checkable
class LLMAdapter(Protocol):
    """Anything that turns an :class:`LLMGenerateInput` into a :data:`StepResult`."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        """Run one model call; provider failures come back as an ``ErrorStepResult``."""
        ...


def check_input_files(adapter: object, config: LLMConfig, kinds: Collection[FileKind]) -> None:
    """Let ``adapter`` refuse files its model does not take, before a run starts.

    Adapters may define ``check_input_files(config, kinds)`` (optional, so any object with
    ``generate_step`` stays an adapter); it raises a ``validation_error`` ``HelixError`` to refuse.
    An adapter without it accepts every file kind.
    """
    check = getattr(adapter, "check_input_files", None)
    if callable(check):
        check(config, kinds)
