"""Ready-made guardrails: a secret and PII redactor, a repeated-call (loop) guard, a model as a guard.

Each is an ordinary :class:`~helix_dbos.guardrails.definitions.Guardrail` built by a function, and
a worked example of writing one (``docs/guardrails.md`` walks through it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from helix_dbos.guardrails.definitions import Guardrail as Guardrail
from helix_dbos.guardrails.definitions import (
    GuardrailInput,
    GuardrailVerdict,
    GuardStage,
    TripAction,
    define_guardrail,
)

if TYPE_CHECKING:
    from helix_dbos.llm.base import LLMAdapter
    from helix_dbos.llm.config import LLMConfig

SECRET_PATTERNS: Mapping[str, str] = {
    "openai_api_key": r"\bsk-[A-Za-z0-9_-]{20,}",
    "aws_access_key_id": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "github_token": r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
    "slack_token": r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    "bearer_token": r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*",
    "email": r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b",
    "card_number": r"\b(?:\d[ -]?){13,16}\b",
}
"""What :func:`redact_secrets` looks for by default: a kind -> a regular expression."""


def redact_secrets(
    name: str = "redact_secrets",
    *,
    patterns: Mapping[str, str] | None = None,
    tools: Iterable[str] | None = None,
) -> Guardrail:
    """A ``tool_result`` guard that rewrites secrets and PII out of the result the model sees.

    Every string in the result (nested in lists and objects too) has each match replaced with
    ``[REDACTED:<kind>]``. It never trips; its recorded verdict counts what it redacted by kind
    (``info["redacted"]``), never the secret itself. The tool step's own record still holds the
    result as the tool returned it: redaction protects the model and the transcript.
    """
    compiled = {kind: re.compile(rx) for kind, rx in (patterns or SECRET_PATTERNS).items()}

    def check(given: GuardrailInput) -> GuardrailVerdict:
        counts: dict[str, int] = {}
        rewritten = _redact(given.value, compiled, counts)
        if not counts:
            return GuardrailVerdict()
        return GuardrailVerdict(rewritten=True, rewrite=rewritten, info={"redacted": counts})

    return define_guardrail(name, check, stages="tool_result", tools=tools)


def _redact(value: Any, patterns: Mapping[str, re.Pattern[str]], counts: dict[str, int]) -> Any:
    if isinstance(value, str):
        for kind, pattern in patterns.items():
            value, found = pattern.subn(f"[REDACTED:{kind}]", value)
            if found:
                counts[kind] = counts.get(kind, 0) + found
        return value
    if isinstance(value, list):
        return [_redact(v, patterns, counts) for v in value]
    if isinstance(value, dict):
        return {k: _redact(v, patterns, counts) for k, v in value.items()}
    return value


def max_repeated_calls(
    limit: int = 3,
    name: str = "max_repeated_calls",
    *,
    on_trip: TripAction = "deny",
    tools: Iterable[str] | None = None,
) -> Guardrail:
    """A ``tool_call`` guard against loops: trips on a call made ``limit`` times before with the same arguments.

    Counts the session's earlier calls of the same tool with equal arguments (from the transcript).
    The default denies the call, telling the model why, so it can change course; ``on_trip="fail"``
    ends the run instead.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")

    def check(given: GuardrailInput) -> GuardrailVerdict:
        key = _canonical(given.value)
        same = sum(1 for c in given.previous_calls if c.name == given.tool_name and _canonical(c.arguments) == key)
        if same < limit:
            return GuardrailVerdict(info={"same_calls_before": same})
        reason = f"'{given.tool_name}' was already called {same} times with these arguments; try something else"
        return GuardrailVerdict(tripped=True, reason=reason, info={"same_calls_before": same})

    return define_guardrail(name, check, stages="tool_call", on_trip=on_trip, tools=tools)


def _canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, default=str)


MODEL_GUARD_PROTOCOL = (
    "You review content for an AI agent's guardrail. Reply with exactly one line: 'PASS' when the "
    "content is acceptable, or 'TRIPPED: <short reason>' when it is not."
)


def model_guardrail(
    name: str,
    llm_config: LLMConfig | Mapping[str, Any] | str,
    instructions: str,
    *,
    stages: GuardStage | Iterable[GuardStage],
    on_trip: TripAction = "fail",
    tools: Iterable[str] | None = None,
    llm_adapter: LLMAdapter | None = None,
) -> Guardrail:
    """A guard that asks a model: ``instructions`` say what to refuse; the model answers PASS or TRIPPED.

    The call goes through the LiteLLM adapter (or ``llm_adapter``) with the content as the user
    message, inside the guard step: its verdict is recorded like any other. A failed call raises,
    so the guard fails closed.
    """
    from helix_dbos.llm.config import LLMConfig

    config = LLMConfig.model_validate({"model": llm_config} if isinstance(llm_config, str) else llm_config)

    async def check(given: GuardrailInput) -> GuardrailVerdict:
        from helix_dbos.llm.base import LLMGenerateInput
        from helix_dbos.messages import SystemMessage, UserMessage
        from helix_dbos.step_result import ErrorStepResult, TextStepResult

        adapter = llm_adapter
        if adapter is None:
            from helix_dbos.llm.litellm import LiteLLMAdapter

            adapter = LiteLLMAdapter()
        content = given.value if isinstance(given.value, str) else json.dumps(given.value, default=str)
        result = await adapter.generate_step(
            LLMGenerateInput(
                messages=[
                    SystemMessage(content=f"{MODEL_GUARD_PROTOCOL}\n\n{instructions}"),
                    UserMessage(content=content),
                ],
                tools=[],
                config=config,
                agent_id=given.run_id,
                agent_type=given.agent,
                session_id=given.session_id,
            )
        )
        if isinstance(result, ErrorStepResult):
            raise RuntimeError(f"the guard model failed: {result.error}")
        text = result.content.strip() if isinstance(result, TextStepResult) else ""
        if text.upper().startswith("PASS"):
            return GuardrailVerdict()
        reason = text.split(":", 1)[1].strip() if text.upper().startswith("TRIPPED") and ":" in text else text
        return GuardrailVerdict(tripped=True, reason=reason or "the guard model refused the content")

    return define_guardrail(name, check, stages=stages, on_trip=on_trip, tools=tools)


__all__ = ["MODEL_GUARD_PROTOCOL", "SECRET_PATTERNS", "max_repeated_calls", "model_guardrail", "redact_secrets"]
