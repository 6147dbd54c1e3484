"""Guardrails: checks of a run's input, tool calls, tool results and output, with tripwires.

``define_agent(..., capabilities=[Guardrails([...])])``; see ``docs/guardrails.md``.
"""

from helix_dbos.guardrails.builtins import max_repeated_calls, model_guardrail, redact_secrets
from helix_dbos.guardrails.capability import GUARDRAILS_PATCH, Guardrails
from helix_dbos.guardrails.definitions import (
    GuardCheck,
    Guardrail,
    GuardrailInput,
    GuardrailVerdict,
    GuardStage,
    PreviousCall,
    TripAction,
    define_guardrail,
)

__all__ = [
    "GUARDRAILS_PATCH",
    "GuardCheck",
    "GuardStage",
    "Guardrail",
    "GuardrailInput",
    "GuardrailVerdict",
    "Guardrails",
    "PreviousCall",
    "TripAction",
    "define_guardrail",
    "max_repeated_calls",
    "model_guardrail",
    "redact_secrets",
]
