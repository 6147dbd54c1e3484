"""What a guardrail is: a named check of one or more stages of a run, and what a trip does.

A guardrail looks at one thing a run is about to act on and answers with a verdict:

- ``input``: the user's message, before the first model call of the run;
- ``tool_call``: a call's arguments, before the call runs or is handed out (every kind of call:
  plain tools, sub-agents, companions, client-executed and ``finish_with`` tools);
- ``tool_result``: a call's result, after it ran and before the model sees it (a tool's result,
  a sub-agent's or a companion's answer, a client-submitted result);
- ``output``: the run's final output, before the run completes with it.

Its check is a plain function (sync or async) of a :class:`GuardrailInput`; a model call is a
check too (:func:`helix_dbos.guardrails.model_guardrail`). The verdict is recorded in a DBOS step
(:mod:`helix_dbos.guardrails.capability`), so a recovered run reads it back and never asks the
check again: a check may be slow, costly, or not deterministic.

A tripped guardrail either fails the run (``on_trip="fail"``, the error code
``guardrail_tripped``) or, at the tool stages, turns the call into a user's approval request
(``"approve"``) or answers the model with a denial (``"deny"``). A check that raises is treated as
tripped (fails closed): a guard that cannot decide must not let the call through.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from helix_dbos.errors import DefinitionError

GuardStage = Literal["input", "tool_call", "tool_result", "output"]
"""Where in a run a guardrail looks."""

TripAction = Literal["fail", "approve", "deny"]
"""What a tripped guardrail does: fail the run, ask a user to approve the call, or deny it to the model."""

GUARD_STAGES: tuple[GuardStage, ...] = get_args(GuardStage)
_TOOL_STAGES = frozenset({"tool_call", "tool_result"})
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class GuardrailVerdict(BaseModel):
    """What a check decided (and what the run records of it)."""

    tripped: bool = False
    reason: str | None = None
    """Why it tripped: in the run's error, the stream and the trace span."""
    rewrite: Any = None
    """``tool_result`` only, with ``rewritten``: the result the model sees instead (a redaction)."""
    rewritten: bool = False
    info: dict[str, Any] = Field(default_factory=dict)
    """What the check wants recorded with its verdict (never the secret it found)."""


@dataclass(frozen=True)
class PreviousCall:
    """A tool call the session's model made before (for loop guards)."""

    name: str
    arguments: Any


@dataclass(frozen=True)
class GuardrailInput:
    """What a check sees: the stage, the value under review, and where it comes from."""

    stage: GuardStage
    value: Any
    """The user's message text (``input``), the call's arguments (``tool_call``), the call's result
    (``tool_result``) or the run's output (``output``)."""
    agent: str
    session_id: str
    run_id: str
    tool_name: str | None = None
    tool_call_id: str | None = None
    previous_calls: tuple[PreviousCall, ...] = ()
    """The session's earlier tool calls, oldest first (``tool_call`` stage: not counting this one)."""


CheckResult = GuardrailVerdict | bool | None
"""A check returns a verdict; ``True`` means tripped, ``False`` or ``None`` passed."""

GuardCheck = Callable[[GuardrailInput], CheckResult | Awaitable[CheckResult]]


@dataclass(frozen=True)
class Guardrail:
    """A named check of some stages of a run (build one with :func:`define_guardrail`)."""

    name: str
    check: GuardCheck
    stages: frozenset[GuardStage]
    on_trip: TripAction = "fail"
    tools: frozenset[str] | None = None
    """The tool stages look only at calls of these tools (``None``: every tool)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def applies_to(self, stage: GuardStage, tool_name: str | None = None) -> bool:
        """Whether this guardrail looks at ``stage`` (for a call of ``tool_name``)."""
        if stage not in self.stages:
            return False
        return self.tools is None or tool_name is None or tool_name in self.tools


def define_guardrail(
    name: str,
    check: GuardCheck,
    *,
    stages: GuardStage | Iterable[GuardStage],
    on_trip: TripAction = "fail",
    tools: Iterable[str] | None = None,
) -> Guardrail:
    """A guardrail: ``check`` runs at each of ``stages``; a trip does ``on_trip``.

    ``"approve"`` and ``"deny"`` are for the tool stages only (an input or an output has no call
    to approve or deny). The name names the guard in recorded verdicts and errors.
    """
    if not _NAME.match(name):
        raise DefinitionError(f"guardrail name {name!r}: use 1-64 letters, digits, '_' or '-'")
    chosen = frozenset([stages] if isinstance(stages, str) else stages)
    unknown = chosen - set(GUARD_STAGES)
    if not chosen or unknown:
        raise DefinitionError(f"guardrail {name!r}: stages must be some of {list(GUARD_STAGES)}, got {sorted(chosen)}")
    if on_trip not in get_args(TripAction):
        raise DefinitionError(f"guardrail {name!r}: on_trip must be 'fail', 'approve' or 'deny', got {on_trip!r}")
    if on_trip != "fail" and not chosen <= _TOOL_STAGES:
        raise DefinitionError(f"guardrail {name!r}: on_trip={on_trip!r} needs tool stages only (a call to act on)")
    if not callable(check):
        raise DefinitionError(f"guardrail {name!r}: check must be a function")
    return Guardrail(name, check, chosen, on_trip, frozenset(tools) if tools is not None else None)


__all__ = [
    "GUARD_STAGES",
    "CheckResult",
    "GuardCheck",
    "GuardStage",
    "Guardrail",
    "GuardrailInput",
    "GuardrailVerdict",
    "PreviousCall",
    "TripAction",
    "define_guardrail",
]
