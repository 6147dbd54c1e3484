"""``MockLLMAdapter``: a scripted, in-process adapter for unit tests (seed 002 "MockLLMAdapter").

Responses are returned in order and every input is recorded, so a test can script a run and then
assert what the agent sent. It fires the same callbacks a streaming adapter would (text as one
delta, thinking, tool calls), which lets runtime tests cover streaming without HTTP.

For tests that should exercise LiteLLM itself, use
:class:`helix_dbos.testing.fake_openai.ScriptedOpenAIServer` with the LiteLLM adapter instead.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from helix_dbos.errors import HelixError
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.step_result import (
    ParsedToolCall,
    StepResult,
    StepResultAdapter,
    TextStepResult,
    ToolCallsStepResult,
)
from helix_dbos.tool import SUBAGENT_TOOL_PREFIX

__all__ = ["MockLLMAdapter", "MockResponse"]

MockResponse = (
    StepResult
    | Mapping[str, Any]
    | Callable[[LLMGenerateInput], StepResult | Mapping[str, Any] | Awaitable[StepResult | Mapping[str, Any]]]
)
"""A scripted response: a step result, a dict validated as one, or a function of the input."""


class MockLLMAdapter:
    """Returns scripted step results in order and records every input.

    Running out of responses raises ``HelixError(code="framework_internal_error")``: an unexpected
    extra LLM call is a bug in the test or the code under test, and it should fail loudly rather
    than come back as an error step the run might absorb.
    """

    def __init__(self, responses: Sequence[MockResponse] = ()) -> None:
        self._responses: list[MockResponse] = []
        self.inputs: list[LLMGenerateInput] = []
        """Every input received, in call order (message and tool lists copied at call time)."""
        self.add_response(*responses)

    def add_response(self, *responses: MockResponse) -> MockLLMAdapter:
        """Append responses to the script; dicts are validated now so typos fail at setup."""
        for response in responses:
            if isinstance(response, Mapping):
                self._responses.append(StepResultAdapter.validate_python(dict(response)))
            else:
                self._responses.append(response)
        return self

    @property
    def call_count(self) -> int:
        """How many times :meth:`generate_step` was called."""
        return len(self.inputs)

    @property
    def remaining(self) -> int:
        """Scripted responses not used yet."""
        return max(0, len(self._responses) - len(self.inputs))

    def get_last_input(self) -> LLMGenerateInput | None:
        """Return the most recent input, or ``None`` before the first call."""
        return self.inputs[-1] if self.inputs else None

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        """Return the next scripted response, firing the input's callbacks as a stream would."""
        recorded = dataclasses.replace(input, messages=list(input.messages), tools=list(input.tools))
        self.inputs.append(recorded)
        call_number = len(self.inputs)
        if call_number > len(self._responses):
            raise HelixError(
                f"MockLLMAdapter ran out of scripted responses (call {call_number}, {len(self._responses)} scripted)",
                code="framework_internal_error",
                retryable=False,
            )
        result = await self._resolve(self._responses[call_number - 1], recorded)
        await self._fire_callbacks(result, recorded)
        return result

    @staticmethod
    async def _resolve(response: MockResponse, input: LLMGenerateInput) -> StepResult:
        value: Any = response
        if callable(response):
            value = response(input)
            if inspect.isawaitable(value):
                value = await value
        if isinstance(value, Mapping):
            return StepResultAdapter.validate_python(dict(value))
        # A copy, so a consumer mutating the result cannot change the script for a later call.
        return StepResultAdapter.validate_python(value).model_copy(deep=True)

    @staticmethod
    async def _fire_callbacks(result: StepResult, input: LLMGenerateInput) -> None:
        callbacks = input.callbacks
        if callbacks is None:
            return
        if isinstance(result, TextStepResult | ToolCallsStepResult):
            if result.thinking is not None and result.thinking.content:
                await callbacks.thinking(result.thinking.content, False)
                await callbacks.thinking("", True)
            if result.content:
                await callbacks.text_delta(result.content)
        if isinstance(result, ToolCallsStepResult):
            for call in result.tool_calls:
                await callbacks.tool_call(call)
            for sub in result.sub_agent_calls:
                await callbacks.tool_call(
                    ParsedToolCall(id=sub.id, name=SUBAGENT_TOOL_PREFIX + sub.agent_type, arguments=sub.input)
                )
