"""How an agent with an ``output_schema`` hands over its output: the output modes.

- ``"tool"`` (the default, the seeds' way): the model calls ``__finish__`` with the output as its
  arguments (:mod:`helix_dbos.orchestration.step_processor`).
- ``"native"``: the request carries the provider's structured-output format
  (``response_format={"type": "json_schema", ...}``) and the model answers with the JSON itself; an
  adapter that honours it returns a ``structured_output`` step result.
- ``"prompted"``: the schema is written into the system prompt and the model's final text answer
  is parsed, repaired when it is almost JSON, and validated. For models and servers that take no
  ``response_format`` and call tools poorly.

In the last two, tools still work: the run ends when the model answers *without* tool calls with
an output that validates. An answer that does not validate gets a corrective message and the
model tries again, bounded by ``max_steps`` like a ``__finish__`` call that fails validation.

Pure functions: the loop plans with them, deterministically, from recorded step results.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from helix_dbos.agent import OutputMode
from helix_dbos.logger import Logger
from helix_dbos.messages import COMMON_METADATA_KEYS, UserMessage
from helix_dbos.orchestration.message_builder import AssistantMessagePlan
from helix_dbos.orchestration.step_processor import (
    StatusUpdatePlan,
    StepProcessingPlan,
    validate_output,
)
from helix_dbos.step_result import (
    StepResult,
    StructuredOutputStepResult,
    TextStepResult,
    is_error_stop_reason,
)
from helix_dbos.tool import FINISH_VALUE_KEY, output_json_schema

__all__ = [
    "OUTPUT_CORRECTION_SOURCE",
    "OutputMode",
    "create_output_correction_message",
    "native_response_format",
    "parse_text_output",
    "plan_direct_output",
    "prompted_output_section",
]

OUTPUT_CORRECTION_SOURCE = "helix:output_correction"
"""``metadata.source`` of the hidden message that asks the model to fix an invalid answer."""

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)


def _schema_name(output_schema: Any) -> str:
    """A name OpenAI accepts for the schema (``[A-Za-z0-9_-]{1,64}``): the type's name when it has one."""
    name = _NAME_CHARS.sub("_", str(getattr(output_schema, "__name__", "") or ""))[:64]
    return name or "output"


def native_response_format(output_schema: Any) -> dict[str, Any]:
    """The ``response_format`` of a native-mode request, before provider-specific strictness.

    A schema that is not an object (``list[str]``) is wrapped as ``{"value": ...}``, as for
    ``__finish__``: providers require an object at the root. The LiteLLM adapter makes it strict
    (``"strict": true``, closed objects) for the providers that enforce strict schemas.
    """
    schema, _ = output_json_schema(output_schema)
    return {"type": "json_schema", "json_schema": {"name": _schema_name(output_schema), "schema": schema}}


def prompted_output_section(output_schema: Any) -> str:
    """The system-prompt section of prompted mode: the schema, and how to answer with it."""
    schema, _ = output_json_schema(output_schema)
    return (
        "## Output Format\n"
        "When you have the final answer, reply with only a JSON object that matches this JSON schema "
        "(no other text, no code fence). Call tools first if you need them.\n"
        f"```json\n{json.dumps(schema, sort_keys=True)}\n```"
    )


def create_output_correction_message(problem: str) -> UserMessage:
    """The hidden nudge after an answer that is not valid output; the model answers again."""
    return UserMessage(
        content=f"{problem} Reply again with only a JSON object that matches the required schema.",
        metadata={COMMON_METADATA_KEYS.HIDDEN: True, COMMON_METADATA_KEYS.SOURCE: OUTPUT_CORRECTION_SOURCE},
    )


def _strip_trailing_commas(text: str) -> str:
    """Remove commas right before ``}`` or ``]``, outside strings (a common model slip)."""
    out: list[str] = []
    in_string = escaped = False
    for i, char in enumerate(text):
        if in_string:
            escaped = char == "\\" and not escaped
            if char == '"' and not escaped:
                in_string = False
            out.append(char)
            continue
        if char == '"':
            in_string = True
        elif char == ",":
            rest = text[i + 1 :].lstrip()
            if rest[:1] in ("}", "]"):
                continue
        out.append(char)
    return "".join(out)


def _outer_json(text: str) -> str | None:
    """The span from the first ``{`` (or ``[``) to the last matching closer: JSON inside prose."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    start = min(starts)
    end = text.rfind("}" if text[start] == "{" else "]")
    return text[start : end + 1] if end > start else None


def _loads(text: str) -> tuple[bool, Any]:
    for candidate in (text, _strip_trailing_commas(text)):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, str):  # JSON in a JSON string: decode once more
            inner = value.strip()
            if inner[:1] in ("{", "["):
                ok, nested = _loads(inner)
                if ok:
                    return True, nested
        return True, value
    return False, None


def parse_text_output(text: str) -> tuple[bool, Any]:
    """``(True, value)`` for a text answer that holds JSON, repaired; ``(False, None)`` otherwise.

    Repairs, in order: the text itself; a code fence's body; the outermost ``{...}`` (or ``[...]``)
    inside prose. Each is tried as is and without trailing commas, and a JSON string holding JSON
    is decoded once more.
    """
    stripped = text.strip()
    candidates = [stripped]
    candidates.extend(m.group(1).strip() for m in _FENCE.finditer(stripped))
    outer = _outer_json(stripped)
    if outer is not None:
        candidates.append(outer)
    for candidate in candidates:
        if candidate:
            ok, value = _loads(candidate)
            if ok:
                return True, value
    return False, None


def _validate(value: Any, output_schema: Any) -> Any:
    """The validated output: wrapped schemas accept ``{"value": x}`` and a bare ``x``."""
    _, wrapped = output_json_schema(output_schema)
    if wrapped and isinstance(value, dict) and set(value) == {FINISH_VALUE_KEY}:
        try:
            return validate_output(value[FINISH_VALUE_KEY], output_schema)
        except ValidationError:
            pass
    return validate_output(value, output_schema)


def _problem(error: ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in error.errors())
    return f"Your answer does not match the required schema: {problems}."


def _candidate(step_result: StepResult) -> tuple[str, Any] | None:
    """``(answer text, raw value)`` for a step that is the model's final answer, else ``None``."""
    if isinstance(step_result, StructuredOutputStepResult):
        raw = step_result.output
        return (raw if isinstance(raw, str) else json.dumps(raw)), raw
    if (
        isinstance(step_result, TextStepResult)
        and step_result.should_stop
        and not is_error_stop_reason(step_result.stop_reason)
    ):
        return step_result.content, step_result.content
    return None


def plan_direct_output(step_result: StepResult, output_schema: Any, logger: Logger) -> StepProcessingPlan | None:
    """Plan a native / prompted answer; ``None`` when the step is not one (tool calls, errors).

    A valid answer completes the run with its output, the answer kept as the assistant message
    (a continued session sees it). An invalid one keeps the message too, and the plan carries the
    problem in ``output_validation_error`` for a corrective message.
    """
    found = _candidate(step_result)
    if found is None:
        return None
    text, raw = found
    message = AssistantMessagePlan(content=text)
    stop_reason = step_result.stop_reason
    value: Any = raw
    if isinstance(raw, str):
        ok, value = parse_text_output(raw)
        if not ok:
            try:  # a string may itself be the output (output_schema=str)
                value = _validate(raw, output_schema)
            except ValidationError:
                logger.warn("[helix-dbos] the model's answer holds no JSON", {"length": len(raw)})
                return StepProcessingPlan(
                    assistant_message_plan=message,
                    stop_reason=stop_reason,
                    output_validation_error="Your answer is not valid JSON.",
                )
            return _completed(message, value, step_result)
    try:
        output = _validate(value, output_schema)
    except ValidationError as exc:
        logger.warn("[helix-dbos] the model's answer does not match the output schema", {"error": str(exc)})
        return StepProcessingPlan(
            assistant_message_plan=message, stop_reason=stop_reason, output_validation_error=_problem(exc)
        )
    return _completed(message, output, step_result)


def _completed(message: AssistantMessagePlan, output: Any, step_result: StepResult) -> StepProcessingPlan:
    return StepProcessingPlan(
        assistant_message_plan=message,
        status_update=StatusUpdatePlan(status="completed", output=output),
        is_terminal=True,
        output=output,
        stop_reason=step_result.stop_reason,
    )
