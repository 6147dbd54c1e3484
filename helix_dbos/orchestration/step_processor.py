"""``plan_step_processing``: what to do with one LLM step's result (seed 000).

Pure: it reads a :data:`StepResult` and returns a :class:`StepProcessingPlan` - the assistant
message to append, the tools to run, the status change, whether the run is over. Every runtime
decision that depends on the model's answer starts here, so it is where the seeds' contracts live:

- ``__finish__`` is never executed; its arguments become the output and the run ends. Tool calls
  made alongside it are not executed either; the plan lists them so the runtime can record a
  "not executed" result for each and keep the history invariant.
- Tool arguments are always objects (:func:`coerce_tool_call_arguments`); structured output is
  repaired from a JSON string when that string matches the schema (:func:`repair_structured_output`).

One deliberate strengthening of the seeds: ``__finish__`` arguments that do not validate against the
output schema do not end the run with an invalid output. The plan carries the validation error
instead; the runtime answers the ``__finish__`` call with it as a tool error, and the model tries again
(bounded by ``max_steps``).
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from helix_dbos.errors import extract_error_message
from helix_dbos.logger import Logger, std_logger
from helix_dbos.orchestration.message_builder import AssistantMessagePlan
from helix_dbos.step_result import (
    ErrorStepResult,
    ParsedSubAgentCall,
    ParsedToolCall,
    StepResult,
    StopReason,
    StructuredOutputStepResult,
    TextStepResult,
    ToolCallsStepResult,
)
from helix_dbos.tool import FINISH_TOOL_NAME, FINISH_VALUE_KEY, output_json_schema

_default_log = std_logger("helix_dbos.orchestration")
"""Where a direct call with no ``logger`` logs its repairs (the runtime passes its own)."""


class StatusUpdatePlan(BaseModel):
    """A status change the step causes."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["completed", "failed"]
    output: Any = None
    error: str | None = None


class StepProcessingPlan(BaseModel):
    """Everything the runtime needs to carry out one step's result."""

    model_config = ConfigDict(extra="forbid")

    assistant_message_plan: AssistantMessagePlan | None
    """Data for the assistant message; ``None`` for structured output and errors."""
    pending_tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    """Tools to execute (never ``__finish__``)."""
    pending_sub_agent_calls: list[ParsedSubAgentCall] = Field(default_factory=list)
    status_update: StatusUpdatePlan | None = None
    is_terminal: bool = False
    output: Any = None
    """The output, when ``__finish__`` (or structured output) completed the run; JSON-able."""
    stop_reason: StopReason | None = None
    finish_tool_call_id: str | None = None
    """Id of the ``__finish__`` call, which the runtime pairs with a synthetic result."""
    skipped_tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    """Calls made alongside ``__finish__``; they are not executed but need a result in history."""
    output_validation_error: str | None = None
    """Set when ``__finish__`` arguments failed the output schema; the run continues."""


def coerce_tool_call_arguments(raw: Any, logger: Logger | None = None) -> dict[str, Any]:
    """Always return an object: objects pass, JSON-object strings are parsed, anything else is ``{}``.

    "Object" means a JSON object: one holding ``Infinity`` or ``NaN`` (which Python's parser
    accepts, and no JSON store does) is not one either.
    """
    parsed, problem = _arguments_object(raw)
    if parsed is not None:
        return parsed
    (logger or _default_log).warn(
        "[helix-dbos] non-object tool-call input coerced to {}", {"type": type(raw).__name__, "problem": problem}
    )
    return {}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _has_non_finite_number(value: Any) -> bool:
    stack = [value]
    while stack:  # iterative: arguments may nest deeper than the recursion limit
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def _arguments_object(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``(object, None)`` for arguments that are a JSON object (or blank), else ``(None, why not)``."""
    value = raw
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None
        try:
            value = json.loads(raw, parse_constant=_reject_constant)
        except RecursionError:
            return None, "the arguments are nested too deeply to parse"
        except ValueError as exc:
            return None, f"the arguments are not valid JSON ({_short(str(exc))})"
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
        what = "null" if value is None else kind.get(type(value), type(value).__name__)
        return None, f"the arguments must be a JSON object, not {what}"
    if _has_non_finite_number(value):
        return None, "the arguments hold a number JSON cannot represent (Infinity or NaN)"
    return value, None


def tool_call_argument_error(raw: Any) -> str | None:
    """Why a model's raw tool-call arguments are not an object (``None`` when they are, or are blank).

    :func:`coerce_tool_call_arguments` turns such arguments into ``{}`` so the transcript keeps an
    object; the runtime uses this to answer the call with an error instead of running the tool on
    arguments the model never gave.
    """
    return _arguments_object(raw)[1]


def tool_call_argument_errors(step_result: StepResult) -> dict[str, str]:
    """``{tool_call_id: message}`` for the calls of a step whose arguments are not an object."""
    if not isinstance(step_result, ToolCallsStepResult):
        return {}
    errors: dict[str, str] = {}
    for call in step_result.tool_calls:
        problem = tool_call_argument_error(call.arguments)
        if problem is not None:
            errors[call.id] = (
                f"Invalid arguments for tool '{_short(call.name)}': {problem}. "
                "Call it again with a JSON object that matches its schema."
            )
    return errors


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


@functools.lru_cache(maxsize=256)
def _adapter(output_schema: Any) -> TypeAdapter[Any]:
    return TypeAdapter(output_schema)


def _cached_adapter(output_schema: Any) -> TypeAdapter[Any]:
    try:
        return _adapter(output_schema)
    except TypeError:  # unhashable schema object
        return TypeAdapter(output_schema)


@functools.lru_cache(maxsize=256)
def _wrapped(output_schema: Any) -> bool:
    return output_json_schema(output_schema)[1]


def _is_wrapped(output_schema: Any) -> bool:
    try:
        return _wrapped(output_schema)
    except TypeError:
        return output_json_schema(output_schema)[1]


def repair_structured_output(raw: Any, output_schema: Any, logger: Logger | None = None) -> Any:
    """Parse a JSON string into structured output when, and only when, the parse matches the schema.

    Never object-coerces and never raises: a legitimate string output stays a string.
    """
    if output_schema is None or not isinstance(raw, str):
        return raw
    adapter = _cached_adapter(output_schema)
    try:
        adapter.validate_python(raw)
        return raw  # the string itself is a valid output
    except ValidationError:
        pass
    try:
        parsed = json.loads(raw)
        adapter.validate_python(parsed)
    except (ValueError, ValidationError):
        return raw
    (logger or _default_log).warn("[helix-dbos] structured output repaired from JSON string")
    return parsed


def validate_output(value: Any, output_schema: Any) -> Any:
    """Validate ``value`` against the schema and return its JSON-able form; raises ``ValidationError``."""
    adapter = _cached_adapter(output_schema)
    return adapter.dump_python(adapter.validate_python(value), mode="json")


def _unwrap_finish_arguments(arguments: dict[str, Any], output_schema: Any) -> Any:
    if output_schema is not None and _is_wrapped(output_schema) and FINISH_VALUE_KEY in arguments:
        return arguments[FINISH_VALUE_KEY]
    return arguments


def _format_validation_error(error: ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in error.errors())
    return (
        f"The output does not match the required schema: {problems}. "
        f"Call {FINISH_TOOL_NAME} again with corrected arguments."
    )


def plan_step_processing(
    step_result: StepResult,
    *,
    output_schema: Any = None,
    logger: Logger | None = None,
) -> StepProcessingPlan:
    """Plan the handling of one step result. Pure; never raises for model misbehaviour."""
    log = logger or _default_log
    if isinstance(step_result, TextStepResult):
        return StepProcessingPlan(
            assistant_message_plan=AssistantMessagePlan(content=step_result.content, thinking=step_result.thinking),
            stop_reason=step_result.stop_reason,
        )
    if isinstance(step_result, StructuredOutputStepResult):
        output = repair_structured_output(step_result.output, output_schema, log)
        if output_schema is not None:
            try:
                output = validate_output(output, output_schema)
            except ValidationError as exc:
                log.warn("[helix-dbos] structured output does not match the output schema", {"error": str(exc)})
        return StepProcessingPlan(
            assistant_message_plan=None,
            status_update=StatusUpdatePlan(status="completed", output=output),
            is_terminal=True,
            output=output,
            stop_reason=step_result.stop_reason,
        )
    if isinstance(step_result, ErrorStepResult):
        message = extract_error_message(step_result.error)
        return StepProcessingPlan(
            assistant_message_plan=None,
            status_update=StatusUpdatePlan(status="failed", error=message) if step_result.should_stop else None,
            is_terminal=step_result.should_stop,
            stop_reason=step_result.stop_reason,
        )
    return _plan_tool_calls(step_result, output_schema, log)


_Call = TypeVar("_Call", ParsedToolCall, ParsedSubAgentCall)


def _with_object(call: _Call, field: str, log: Logger) -> _Call:
    """``call`` with its ``field`` (its arguments) coerced to an object.

    The call itself when they already are one (the usual case): a copy would be equal, so the
    per-call copy is spared.
    """
    raw = getattr(call, field)
    coerced = coerce_tool_call_arguments(raw, log)
    if coerced is raw and field in call.model_fields_set:
        return call
    return call.model_copy(update={field: coerced})


def _plan_tool_calls(step_result: ToolCallsStepResult, output_schema: Any, log: Logger) -> StepProcessingPlan:
    calls = [_with_object(c, "arguments", log) for c in step_result.tool_calls]
    sub_calls = [_with_object(c, "input", log) for c in step_result.sub_agent_calls]
    message_plan = AssistantMessagePlan(
        content=step_result.content,
        tool_calls=calls,
        sub_agent_calls=sub_calls,
        thinking=step_result.thinking,
    )
    finish = next((c for c in calls if c.name == FINISH_TOOL_NAME), None)
    if finish is None:
        return StepProcessingPlan(
            assistant_message_plan=message_plan,
            pending_tool_calls=calls,
            pending_sub_agent_calls=sub_calls,
            stop_reason=step_result.stop_reason,
        )
    siblings = [c for c in calls if c.id != finish.id]
    skipped = siblings + [
        ParsedToolCall(id=s.id, name=f"subagent__{s.agent_type}", arguments=s.input) for s in sub_calls
    ]
    raw_output = _unwrap_finish_arguments(finish.arguments, output_schema)
    output = repair_structured_output(raw_output, output_schema, log)
    if output_schema is not None:
        try:
            output = validate_output(output, output_schema)
        except ValidationError as exc:
            log.warn("[helix-dbos] __finish__ arguments do not match the output schema", {"error": str(exc)})
            return StepProcessingPlan(
                assistant_message_plan=message_plan,
                stop_reason=step_result.stop_reason,
                finish_tool_call_id=finish.id,
                skipped_tool_calls=skipped,
                output_validation_error=_format_validation_error(exc),
            )
    return StepProcessingPlan(
        assistant_message_plan=message_plan,
        status_update=StatusUpdatePlan(status="completed", output=output),
        is_terminal=True,
        output=output,
        stop_reason=step_result.stop_reason,
        finish_tool_call_id=finish.id,
        skipped_tool_calls=skipped,
    )
