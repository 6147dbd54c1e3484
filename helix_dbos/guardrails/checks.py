"""Running checks: every (guardrail, input) pair of a stage at once, inside one recorded step.

:func:`run_checks` is the body of the step ``{agent}.guardrails.{stage}`` (its output is what the
run records, so a recovered run reads the verdicts back and runs no check again). The pairs are
independent, so they run concurrently: async checks on the shared background loop, sync ones on
threads. A check that raises, or returns something that is not a verdict, trips (fails closed).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, TypedDict

from helix_dbos.guardrails.definitions import Guardrail, GuardrailInput, GuardrailVerdict
from helix_dbos.runtime.aio import background_loop


class RecordedVerdict(TypedDict):
    """One check's verdict as the step records it."""

    guard: str
    tool_call_id: str | None
    tripped: bool
    reason: str | None
    rewritten: bool
    rewrite: Any
    info: dict[str, Any]
    error: str | None
    """The exception a check raised (it then counts as tripped)."""


class GuardStepOutput(TypedDict):
    """``{agent}.guardrails.{stage}``: the verdicts, in the order the checks were listed."""

    verdicts: list[RecordedVerdict]


class HeldResultsStepOutput(TypedDict):
    """``{agent}.guardrails.held_results``: the tool results a parked question was about, by call id."""

    results: dict[str, Any]


class AppliedStepOutput(TypedDict):
    """``{agent}.guardrails.applied``: approved calls whose answers were used before their results were asked about."""

    tool_call_ids: list[str]


def run_checks(checks: list[tuple[Guardrail, GuardrailInput]]) -> GuardStepOutput:
    """The step body: run every check concurrently and record each verdict."""
    verdicts = background_loop.run(_gather(checks))
    return {"verdicts": verdicts}


async def _gather(checks: list[tuple[Guardrail, GuardrailInput]]) -> list[RecordedVerdict]:
    return list(await asyncio.gather(*(_one(guard, given) for guard, given in checks)))


async def _one(guard: Guardrail, given: GuardrailInput) -> RecordedVerdict:
    try:
        if inspect.iscoroutinefunction(guard.check):
            raw: Any = await guard.check(given)
        else:
            raw = await asyncio.to_thread(guard.check, given)
            if inspect.isawaitable(raw):
                raw = await raw
        verdict = _as_verdict(raw)
    except Exception as exc:  # fail closed: a guard that cannot decide lets nothing through
        error = f"{type(exc).__name__}: {exc}"
        return _recorded(guard, given, GuardrailVerdict(tripped=True, reason=f"the guard raised {error}"), error)
    return _recorded(guard, given, verdict, None)


def _as_verdict(raw: Any) -> GuardrailVerdict:
    if isinstance(raw, GuardrailVerdict):
        return raw
    if raw is None or isinstance(raw, bool):
        return GuardrailVerdict(tripped=bool(raw))
    raise TypeError(f"a guard check returns a GuardrailVerdict, a bool or None, not {type(raw).__name__}")


def _recorded(guard: Guardrail, given: GuardrailInput, verdict: GuardrailVerdict, error: str | None) -> RecordedVerdict:
    return {
        "guard": guard.name,
        "tool_call_id": given.tool_call_id,
        "tripped": verdict.tripped,
        "reason": verdict.reason or ("tripped" if verdict.tripped else None),
        "rewritten": verdict.rewritten,
        "rewrite": verdict.rewrite if verdict.rewritten else None,
        "info": dict(verdict.info),
        "error": error,
    }


__all__ = ["AppliedStepOutput", "GuardStepOutput", "HeldResultsStepOutput", "RecordedVerdict", "run_checks"]
