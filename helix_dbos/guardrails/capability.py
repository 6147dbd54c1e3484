"""Guardrails on the capability seam: each stage's checks in one recorded step, and what a trip does.

``define_agent(..., capabilities=[Guardrails([...])])``. The points it uses:

- ``between_steps`` before the first model call: the ``input`` checks on the user's message
  (only when the run starts from one: a continuation that answers tool calls has none);
- ``prepare_batch``: the ``tool_call`` checks on the batch's calls. A ``deny`` answers the call
  with a denial (the tool does not run), an ``approve`` moves a plain tool call to the batch's
  approvals (human in the loop registers and awaits it like a ``require_approval`` call), a
  ``fail`` denies it and fails the run after the batch. Sub-agent, companion, client-executed,
  approval-gated and ``finish_with`` calls are checked too (:mod:`helix_dbos.guardrails.call_kinds`):
  a denied one is taken out of its phase, so nothing dispatches it;
- ``register_calls`` / ``collect_answers`` (after the human-answered calls): the ``tool_result``
  checks on the calls that ran. A rewrite (a redaction) replaces the result the model sees, a
  ``deny`` replaces it with a denial, an ``approve`` asks a user (the run's human-in-the-loop
  capability: hot wait, then parked): approved, the model sees the result; denied, the denial.
  A batch whose approval parks stops there, like any approval; the result that ran is held with
  the run (the workflow event :data:`HELD_RESULTS_EVENT`), and the continuation that the answer
  starts reads it back (``{agent}.guardrails.held_results``): the call never runs a second time;
  the answers of sub-agents and client-submitted results are checked in the same step (a trip
  denies them: no person can approve them);
- ``after_human_calls``: the ``tool_result`` checks on the companions' answers;
- ``before_finish``: the ``output`` checks on a completing run's output; and a run whose guard
  tripped with ``fail`` ends failed, with the code ``guardrail_tripped``, whatever else ended it.

Each stage's checks run concurrently in one step, ``{agent}.guardrails.{stage}``, which records
the verdicts: a recovered run replays them and runs no check again. An agent without guardrails
has none of this; an agent given guardrails while a run was in flight replays that run without
them (the replay patch :data:`GUARDRAILS_PATCH`, asked before a run's first guard step). Runs
recorded before results were held across a park replay as they ran (:data:`HELD_RESULTS_PATCH`).
Runs recorded while only plain tool calls were checked replay so (:data:`ALL_CALLS_PATCH`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from helix_dbos.capability import CollectedAnswers, RunCapability, RunEnd
from helix_dbos.errors import DefinitionError, GuardrailTrippedError
from helix_dbos.guardrails.call_kinds import calls_to_dispatch, remove_calls, results_from_engine
from helix_dbos.guardrails.checks import (
    AppliedStepOutput,
    GuardStepOutput,
    HeldResultsStepOutput,
    RecordedVerdict,
    run_checks,
)
from helix_dbos.guardrails.definitions import Guardrail, GuardrailInput, GuardStage, PreviousCall
from helix_dbos.messages import AssistantMessage, UserMessage
from helix_dbos.orchestration.tool_batch import HitlRequest, ToolBatch
from helix_dbos.runtime.step_outputs import ToolStepOutput, empty_tool_output
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.stream.chunks import ErrorChunk
from helix_dbos.tool import Tool

if TYPE_CHECKING:
    from helix_dbos.runtime.hitl_capability import HitlCapability
    from helix_dbos.runtime.run_context import RunContext

GUARDRAILS_PATCH = "helix-guardrails"
"""Runs of agents with guardrails record a ``{agent}.guardrails.{stage}`` step per checked stage."""

HELD_RESULTS_PATCH = "helix-guardrails-held-results"
"""A run that asks a person about tool results records them (:data:`HELD_RESULTS_EVENT`), and the
continuation of such a parked question reads them back instead of running the calls again."""

ALL_CALLS_PATCH = "helix-guardrails-all-calls"
"""The tool stages see every call, not only plain tool calls: sub-agent, companion, client-executed,
approval-gated and ``finish_with`` calls before they are dispatched, and the answers of sub-agents and
companions and client-submitted results before the model reads them (:mod:`helix_dbos.guardrails.call_kinds`)."""

HELD_RESULTS_EVENT = "helix.guardrails.held_results"
"""The workflow event (call id -> tool step output) of the results a run's open question is about."""


def denial_message(verdict: RecordedVerdict) -> str:
    """What the model reads instead of a call's result when a guardrail denied it."""
    return f"Blocked by guardrail '{verdict['guard']}': {verdict['reason']}"


@dataclass(frozen=True)
class _ResultReview:
    """``register_calls`` -> ``collect_answers``: the batch's calls whose results get checked."""

    calls: list[tuple[ParsedToolCall, Tool]]
    approved_by_a_person: frozenset[str]
    from_engine: list[tuple[ParsedToolCall, Tool]]
    """Calls whose result a sub-agent or a client produced (checked behind :data:`ALL_CALLS_PATCH`)."""


class Guardrails(RunCapability):
    """The agent's guardrails, run at their stages (see the module docstring)."""

    name = "guardrails"
    replay_patches = (GUARDRAILS_PATCH, HELD_RESULTS_PATCH, ALL_CALLS_PATCH)

    def __init__(self, guardrails: Sequence[Guardrail]) -> None:
        names = [g.name for g in guardrails]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise DefinitionError(f"two guardrails are named {twice[0]!r}")
        self.guardrails = tuple(guardrails)
        self.tripped: RecordedVerdict | None = None
        self._patched: bool | None = None
        self._held_patched: bool | None = None
        self._all_calls_patched: bool | None = None
        self._checked_before: frozenset[str] = frozenset()
        self._input_checked = False

    def for_run(self) -> Guardrails:
        run_copy = Guardrails(self.guardrails)
        return run_copy

    # -- input ----------------------------------------------------------------------------------------
    def between_steps(self, run: RunContext) -> RunEnd | None:
        if self.tripped is not None:
            return self._failed(run)
        if run.step != 0 or self._input_checked:
            return None
        self._input_checked = True
        guards = self._guards("input")
        last = run.messages[-1] if run.messages else None
        if not guards or not isinstance(last, UserMessage) or not self._active():
            return None
        given = self._input(run, "input", last.content)
        self._trip_first(self._check(run, "input", [(g, given) for g in guards]))
        return self._failed(run) if self.tripped is not None else None

    # -- tool calls -----------------------------------------------------------------------------------
    def calls_left_pending(self, run: RunContext, calls: list[ParsedToolCall]) -> dict[str, Any]:
        # A continuation's batch was checked by the run that handed its calls out: not again.
        self._checked_before = frozenset(c.id for c in calls)
        return {}

    def prepare_batch(self, run: RunContext, batch: ToolBatch, results: dict[str, Any]) -> None:
        self._carry_held_results(run, batch)
        checked_before, self._checked_before = self._checked_before, frozenset()
        checks = [
            (g, self._input(run, "tool_call", call.arguments, call, previous=_previous_calls(run, call.id)))
            for call, tool in batch.regular
            for g in self._guards("tool_call", tool.name)
        ]
        others = calls_to_dispatch(batch, checked_before)
        other_checks = [
            (g, self._input(run, "tool_call", call.arguments, call, previous=_previous_calls(run, call.id)))
            for call, tool in others
            for g in self._guards("tool_call", tool.name)
        ]
        if other_checks and self._covers_all_calls():
            checks += other_checks
        if not checks or not self._active():
            return
        verdicts = self._check(run, "tool_call", checks)
        tripped = _first_trip_per_call(verdicts)
        keep: list[tuple[ParsedToolCall, Tool]] = []
        for call, tool in batch.regular:
            verdict = tripped.get(call.id)
            if verdict is None:
                keep.append((call, tool))
            elif self._action(verdict) == "approve":
                batch.hitl.append(HitlRequest(call, tool, "approval"))
            else:
                self._trip_if_fail(verdict)
                results[call.id] = _denied(call, verdict)
        batch.regular[:] = keep
        asking = {h.call.id for h in batch.hitl if h.kind == "approval"}
        denied: list[str] = []
        for call, _ in others:
            verdict = tripped.get(call.id)
            if verdict is None or (self._action(verdict) == "approve" and call.id in asking):
                continue  # an approval-gated call an approve guard flags is asked about anyway
            self._trip_if_fail(verdict)
            results[call.id] = _denied(call, verdict)
            denied.append(call.id)
        remove_calls(batch, denied)

    def register_calls(self, run: RunContext, batch: ToolBatch, *, resuming: bool) -> _ResultReview | None:
        # A held result was checked before a person was asked about it: it is not checked again.
        calls = [
            *batch.regular,
            *((h.call, h.tool) for h in batch.hitl if h.kind == "approval" and h.held_result is None),
        ]
        from_engine = results_from_engine(batch)
        if not any(self._guards("tool_result", tool.name) for _, tool in [*calls, *from_engine]):
            return None
        # A continuation recorded before results were held re-ran its approved calls and did not ask
        # about their results again (it would have asked about the re-run call forever); it replays so.
        # Otherwise an approval of a call is not an approval of its result: a tripped result asks.
        old = resuming and self._held_patched is False
        approved = frozenset(h.call.id for h in batch.hitl if h.kind == "approval") if old else frozenset()
        return _ResultReview(calls, approved, from_engine)

    def _carry_held_results(self, run: RunContext, batch: ToolBatch) -> None:
        """A continuation: give each approval of a result its previous run held that result.

        The question was registered by the run that ran the call (the row's ``workflow_id`` in the
        continuation's first check); its event holds the result, read in one recorded step. An
        approval without a held result (a ``require_approval`` call) stays a call to run.
        """
        hitl = _hitl_of(run)
        first_check = hitl.first_check if hitl is not None else None
        asked = [h for h in batch.hitl if h.kind == "approval" and self._guards("tool_result", h.tool.name)]
        rows = first_check["rows"] if first_check is not None else {}
        workflows = sorted({str(rows[h.call.id]["workflow_id"]) for h in asked if h.call.id in rows})
        if not workflows:
            return
        self._held_patched = DBOS.patch(HELD_RESULTS_PATCH)
        if not self._held_patched:
            return
        held = run.record_step(self.name, "held_results", read_held_results, workflows)["results"]
        batch.hitl[:] = [
            replace(h, held_result=held[h.call.id]) if h.kind == "approval" and h.call.id in held else h
            for h in batch.hitl
        ]

    def collect_answers(self, run: RunContext, registered: object, results: dict[str, Any]) -> CollectedAnswers:
        assert isinstance(registered, _ResultReview)
        ran = [(c, t) for c, t in registered.calls if results.get(c.id, {}).get("success")]
        checks = self._result_checks(run, ran, results)
        answered = [(c, t) for c, t in registered.from_engine if results.get(c.id, {}).get("success")]
        other_checks = self._result_checks(run, answered, results)
        if other_checks and self._covers_all_calls():
            checks += other_checks
        else:
            answered = []
        if not checks or not self._active():
            return CollectedAnswers()
        verdicts = self._check(run, "tool_result", checks)
        _apply_rewrites(verdicts, results)
        asking: list[HitlRequest] = []
        tools = dict((c.id, (c, t)) for c, t in ran)
        for call_id, verdict in _first_trip_per_call(verdicts).items():
            if call_id not in tools:
                continue
            call, tool = tools[call_id]
            action = self._action(verdict)
            if action == "approve" and call_id in registered.approved_by_a_person:
                continue
            if action == "approve":
                asking.append(HitlRequest(call, tool, "approval"))
                continue
            self._trip_if_fail(verdict)
            results[call_id] = _denied(call, verdict)
        self._deny_answers(answered, verdicts, results)
        return self._ask(run, asking, results, verdicts)

    def after_human_calls(self, run: RunContext, batch: ToolBatch, results: dict[str, Any]) -> None:
        """The ``tool_result`` checks on the companions' answers (their calls ran just before)."""
        answered = [(c, t) for c, t in batch.companion if results.get(c.id, {}).get("success")]
        checks = self._result_checks(run, answered, results)
        if not checks or not self._covers_all_calls() or not self._active():
            return
        verdicts = self._check(run, "tool_result", checks)
        _apply_rewrites(verdicts, results)
        self._deny_answers(answered, verdicts, results)

    def _result_checks(
        self, run: RunContext, calls: Sequence[tuple[ParsedToolCall, Tool]], results: dict[str, Any]
    ) -> list[tuple[Guardrail, GuardrailInput]]:
        return [
            (g, self._input(run, "tool_result", results[call.id]["result"], call))
            for call, tool in calls
            for g in self._guards("tool_result", tool.name)
        ]

    def _deny_answers(
        self, answered: Sequence[tuple[ParsedToolCall, Tool]], verdicts: list[RecordedVerdict], results: dict[str, Any]
    ) -> None:
        """A tripped answer of a sub-agent, a companion or a client is denied (no person can approve it)."""
        tripped = _first_trip_per_call(verdicts)
        for call, _ in answered:
            if call.id in tripped:
                self._trip_if_fail(tripped[call.id])
                results[call.id] = _denied(call, tripped[call.id])

    def _ask(
        self, run: RunContext, asking: list[HitlRequest], results: dict[str, Any], verdicts: list[RecordedVerdict]
    ) -> CollectedAnswers:
        """Put tripped results to a user through the run's human in the loop; approved ones keep their result."""
        hitl = _hitl_of(run)
        if not asking:
            return CollectedAnswers()
        if hitl is None:  # no one to ask: deny
            for request in asking:
                verdict = next(v for v in verdicts if v["tool_call_id"] == request.call.id and v["tripped"])
                results[request.call.id] = _denied(request.call, verdict)
            return CollectedAnswers()
        held = {r.call.id: results.pop(r.call.id) for r in asking}  # the user's answer decides what the model sees
        holding = DBOS.patch(HELD_RESULTS_PATCH)
        if holding:  # kept with the run: a continuation of a parked question reads them, never re-runs
            DBOS.set_event(HELD_RESULTS_EVENT, held)
            # A call a person approved in this run has that answer in its row: the question about its
            # result must not find it as its own answer, so the call's answer is applied first.
            approved_calls = [r.call.id for r in asking if r.call.id in run.applied_pending]
            if approved_calls:
                run.record_step(self.name, "applied", mark_answers_applied, run.who.session_id, approved_calls)
            asking = [replace(r, held_result=held[r.call.id]) for r in asking]
        registered = hitl.register_calls(run, ToolBatch(hitl=asking), resuming=False)
        answers = hitl.collect_answers(run, registered, results)
        if answers.stop is not None:
            return answers
        if holding:  # answered hot: no later question of this run may find these results
            DBOS.set_event(HELD_RESULTS_EVENT, {})
        for call, _ in answers.run_as_steps:  # recorded before the patch: approved, the result that ran
            results[call.id] = held[call.id]
        return CollectedAnswers()

    # -- output ---------------------------------------------------------------------------------------
    def before_finish(self, run: RunContext, end: RunEnd) -> RunEnd | None:
        if self.tripped is None and end.status == "completed":
            guards = self._guards("output")
            if guards and self._active():
                given = self._input(run, "output", end.output)
                self._trip_first(self._check(run, "output", [(g, given) for g in guards]))
        if self.tripped is None or (end.status == "failed" and end.error == self._error()):
            return None
        return self._failed(run)

    # -- helpers --------------------------------------------------------------------------------------
    def _guards(self, stage: GuardStage, tool_name: str | None = None) -> list[Guardrail]:
        return [g for g in self.guardrails if g.applies_to(stage, tool_name)]

    def _covers_all_calls(self) -> bool:
        """The replay patch of the calls besides plain tool calls, asked once per run.

        Asked before the guardrails patch at that point: a run recorded before it answers no and
        takes the steps it took.
        """
        if self._all_calls_patched is None:
            self._all_calls_patched = DBOS.patch(ALL_CALLS_PATCH)
        return self._all_calls_patched

    def _active(self) -> bool:
        """The replay patch, asked once per run, before its first guard step."""
        if self._patched is None:
            self._patched = DBOS.patch(GUARDRAILS_PATCH)
        return self._patched

    def _input(
        self,
        run: RunContext,
        stage: GuardStage,
        value: Any,
        call: ParsedToolCall | None = None,
        previous: tuple[PreviousCall, ...] = (),
    ) -> GuardrailInput:
        return GuardrailInput(
            stage=stage,
            value=value,
            agent=run.agent.name,
            session_id=run.who.session_id,
            run_id=run.who.run_id,
            tool_name=call.name if call else None,
            tool_call_id=call.id if call else None,
            previous_calls=previous,
        )

    def _check(
        self, run: RunContext, stage: GuardStage, checks: list[tuple[Guardrail, GuardrailInput]]
    ) -> list[RecordedVerdict]:
        out: GuardStepOutput = run.record_step(self.name, stage, run_checks, checks)
        return out["verdicts"]

    def _action(self, verdict: RecordedVerdict) -> str:
        return next(g.on_trip for g in self.guardrails if g.name == verdict["guard"])

    def _trip_first(self, verdicts: list[RecordedVerdict]) -> None:
        self.tripped = self.tripped or next((v for v in verdicts if v["tripped"]), None)

    def _trip_if_fail(self, verdict: RecordedVerdict) -> None:
        if self._action(verdict) == "fail" and self.tripped is None:
            self.tripped = verdict

    def _error(self) -> str:
        assert self.tripped is not None
        return GuardrailTrippedError(self.tripped["guard"], self.tripped["reason"] or "tripped").message

    def _failed(self, run: RunContext) -> RunEnd:
        error = self._error()
        run.emit(ErrorChunk(**run.chunk_base(), error=error, code="guardrail_tripped", recoverable=False))
        return RunEnd("failed", error=error)


def _hitl_of(run: RunContext) -> HitlCapability | None:
    """The run's human-in-the-loop capability (its own instance: it holds the run's first check)."""
    from helix_dbos.runtime.hitl_capability import HitlCapability

    return next((c for c in run.capabilities if isinstance(c, HitlCapability)), None)


def mark_answers_applied(session_id: str, tool_call_ids: list[str]) -> AppliedStepOutput:
    """The step body: the calls' approvals are used (the calls ran); their rows can hold a new question."""
    from helix_dbos.runtime import services

    services.current().store.pending.mark_applied(session_id, tool_call_ids)
    return {"tool_call_ids": tool_call_ids}


def read_held_results(workflow_ids: list[str]) -> HeldResultsStepOutput:
    """The step body: the results the runs that asked held (their :data:`HELD_RESULTS_EVENT`)."""
    held: dict[str, Any] = {}
    for workflow_id in workflow_ids:
        held.update(DBOS.get_event(workflow_id, HELD_RESULTS_EVENT, timeout_seconds=0) or {})
    return {"results": held}


def _apply_rewrites(verdicts: list[RecordedVerdict], results: dict[str, Any]) -> None:
    """Redactions first: a later denial or approval sees the rewritten result."""
    for verdict in verdicts:
        call_id = verdict["tool_call_id"]
        if verdict["rewritten"] and not verdict["tripped"] and call_id in results:
            results[call_id] = {**results[call_id], "result": verdict["rewrite"]}


def _first_trip_per_call(verdicts: list[RecordedVerdict]) -> dict[str, RecordedVerdict]:
    """Each call's first tripped verdict (in guard order)."""
    first: dict[str, RecordedVerdict] = {}
    for verdict in verdicts:
        call_id = verdict["tool_call_id"]
        if verdict["tripped"] and call_id is not None and call_id not in first:
            first[call_id] = verdict
    return first


def _denied(call: ParsedToolCall, verdict: RecordedVerdict) -> ToolStepOutput:
    """The result the model gets for a call a guardrail denied (no ``after_tool`` hook)."""
    return {**empty_tool_output(call.id, call.name), "error": denial_message(verdict), "after_tool": False}


def _previous_calls(run: RunContext, call_id: str) -> tuple[PreviousCall, ...]:
    """The session's tool calls before ``call_id`` (from the transcript: a replay sees the same)."""
    calls: list[PreviousCall] = []
    for message in run.messages:
        if isinstance(message, AssistantMessage):
            calls.extend(PreviousCall(c.name, c.arguments) for c in message.tool_calls or [] if c.id != call_id)
    return tuple(calls)


__all__ = [
    "ALL_CALLS_PATCH",
    "GUARDRAILS_PATCH",
    "HELD_RESULTS_EVENT",
    "HELD_RESULTS_PATCH",
    "Guardrails",
    "denial_message",
]
