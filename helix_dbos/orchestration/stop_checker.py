"""Stop conditions and final status (seed 000 "Stop Condition Checking").

``should_stop_execution`` checks, in the seeds' priority order: structured output (terminal for
this turn; the session stays continuable), an error that says stop, text that says stop, the
``max_steps`` safety limit, then the agent's own ``stop_when``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from helix_dbos.step_result import (
    ErrorStepResult,
    StepResult,
    StructuredOutputStepResult,
    TextStepResult,
    is_error_stop_reason,
    is_recoverable_error_stop_reason,
)


@dataclass(frozen=True)
class StopConfig:
    """Limits that end a run regardless of what the model says."""

    max_steps: int | None = None
    stop_when: Callable[[StepResult], bool] | None = None


def should_stop_execution(step_result: StepResult, step_count: int, config: StopConfig) -> bool:
    """True when the run should stop after this step (``step_count`` counts this step)."""
    if isinstance(step_result, StructuredOutputStepResult):
        return True
    if isinstance(step_result, ErrorStepResult) and step_result.should_stop:
        return True
    if isinstance(step_result, TextStepResult) and step_result.should_stop:
        return True
    if config.max_steps is not None and step_count >= config.max_steps:
        return True
    return bool(config.stop_when is not None and config.stop_when(step_result))


def determine_final_status(step_result: StepResult) -> Literal["completed", "failed"]:
    """``failed`` for error steps and error stop reasons (``max_tokens``, ``content_filter`` ...)."""
    if isinstance(step_result, ErrorStepResult):
        return "failed"
    return "failed" if is_error_stop_reason(step_result.stop_reason) else "completed"


def needs_max_tokens_recovery(step_result: StepResult, *, has_output_schema: bool) -> bool:
    """True when a structured-output agent was cut off by ``max_tokens`` and should be nudged to finish."""
    if not has_output_schema or isinstance(step_result, ErrorStepResult | StructuredOutputStepResult):
        return False
    return is_recoverable_error_stop_reason(step_result.stop_reason)


def needs_finish_reminder(step_result: StepResult, *, has_output_schema: bool) -> bool:
    """True when a structured-output agent ended its turn with text instead of its completion tool.

    Stopping there would end the run with no output; the runtime reminds the model instead and
    lets ``max_steps`` bound the retries.
    """
    return (
        has_output_schema
        and isinstance(step_result, TextStepResult)
        and step_result.should_stop
        and not is_error_stop_reason(step_result.stop_reason)
    )
