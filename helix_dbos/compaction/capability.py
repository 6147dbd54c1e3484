"""Compaction as a capability on the loop's seam: what the model sees of a long transcript.

Before every model call (:meth:`CompactionCapability.model_messages`), for an agent with a
:class:`~helix_dbos.compaction.CompactionPolicy`:

1. ``{agent}.compaction.check`` counts the tokens of the current view (the last compaction applied;
   on a run's first call, the one the previous run of the session ended with: it is sticky across
   turns). Over ``max_input_tokens``, the run compacts.
2. ``{agent}.compaction.compact`` records the new compaction: the cut (moved back so a tool call
   and its results stay together), the cleared tool results and, with ``summarize``, the summary
   (the summariser's call is inside this step, and its usage is the run's).
3. The model is sent the view (:func:`~helix_dbos.compaction.view.compacted_view`); the transcript
   is not touched.

A call the provider refuses for its context window (``provider_context_window_exceeded``) is
compacted (whatever the count said) and made again, once (:meth:`retry_model_call`).

An agent without a policy records exactly what it recorded before; an agent with one asks the
replay patch :data:`COMPACTION_PATCH` at its first model call, so a run recorded before its agent
had a policy replays without compaction.
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS

from helix_dbos.capability import RunCapability
from helix_dbos.compaction.policy import CompactionPolicy
from helix_dbos.compaction.steps import CheckStepOutput, CompactStepOutput, check_step, compact_step
from helix_dbos.compaction.view import (
    CompactionReason,
    CompactionState,
    applies_to,
    compacted_view,
    plan_cleared_until,
    plan_cut,
)
from helix_dbos.messages import Message
from helix_dbos.runtime import step_names
from helix_dbos.step_result import ErrorStepResult, TokenUsage
from helix_dbos.store.base import UsageRecord

COMPACTION_PATCH = "helix-compaction"
"""Asked at the first model call of a run whose agent has a compaction policy."""

CONTEXT_WINDOW_CODE = "provider_context_window_exceeded"
"""The error code of a call the provider refused for its context window."""


class CompactionCapability(RunCapability):
    """The built-in compaction (a no-op for an agent without ``compaction``)."""

    name = "compaction"
    replay_patches = (COMPACTION_PATCH,)

    def __init__(self) -> None:
        self.state: CompactionState | None = None
        """The compaction in effect for this run (what the model sees), ``None`` before the first."""
        self._asked = False
        self._enabled = False
        self._forced: CompactionReason | None = None
        self._retried_step = -1

    def for_run(self) -> CompactionCapability:
        return CompactionCapability()

    def model_messages(self, run: Any, messages: list[Message]) -> list[Message]:
        policy: CompactionPolicy | None = run.agent.compaction
        if policy is None:
            return messages
        first = not self._asked
        if first:
            self._asked = True
            self._enabled = DBOS.patch(COMPACTION_PATCH)
        if not self._enabled:
            return messages
        length = len(run.messages)
        self.state = applies_to(self.state, length)
        forced, self._forced = self._forced, None
        tokens = 0
        if forced is None:
            agent = run.agent.name
            load_from = None
            if first and run.request.previous_run_id:
                check_name = step_names.capability(agent, self.name, "check")
                compact_name = step_names.capability(agent, self.name, "compact")
                load_from = (run.request.previous_run_id, check_name, compact_name)
            checked: CheckStepOutput = run.record_step(
                self.name, "check", check_step, run.agent.llm_config.model, messages, length, self.state, load_from
            )
            if first and checked["inherited"] is not None:
                self.state = CompactionState.model_validate(checked["inherited"])
            tokens = checked["tokens"]
            if tokens <= policy.max_input_tokens:
                return compacted_view(messages, length, self.state)
        planned = self._plan(policy, run.messages, tokens, forced or "tokens")
        if planned is not None:
            self._compact(run, policy, planned)
        return compacted_view(messages, length, self.state)

    def retry_model_call(self, run: Any, result: ErrorStepResult) -> bool:
        policy: CompactionPolicy | None = run.agent.compaction
        if policy is None or not self._enabled or not policy.retry_on_context_window:
            return False
        if getattr(result.error, "code", None) != CONTEXT_WINDOW_CODE or self._retried_step == run.step:
            return False
        self._retried_step = run.step
        if self._plan(policy, run.messages, 0, "context_window") is None:
            return False  # nothing left to drop or clear: the same request would be refused again
        self._forced = "context_window"
        return True

    def _plan(
        self, policy: CompactionPolicy, transcript: list[Message], tokens: int, reason: CompactionReason
    ) -> CompactionState | None:
        """The next compaction (pure), or ``None`` when it would show the model nothing less."""
        previous = self.state or CompactionState()
        cut = plan_cut(transcript, policy.keep_last_messages, previous.cut)
        cleared = max(plan_cleared_until(transcript, cut, policy.clear_tool_results_after_turns), cut)
        if cut == previous.cut and cleared <= max(previous.cleared_until, cut):
            return None
        return CompactionState(
            cut=cut,
            cleared_until=cleared,
            summary=previous.summary,
            transcript_length=len(transcript),
            tokens_before=tokens,
            reason=reason,
        )

    def _compact(self, run: Any, policy: CompactionPolicy, planned: CompactionState) -> None:
        previous_cut = self.state.cut if self.state is not None else 0
        dropped = list(run.messages[previous_cut : planned.cut])
        config = (policy.summary_llm_config or run.agent.llm_config) if policy.summarize else None
        identity = (run.run_id, run.agent.name, run.session_id)
        out: CompactStepOutput = run.record_step(
            self.name, "compact", compact_step, identity, config, policy.summary_instructions, dropped, planned
        )
        self.state = CompactionState.model_validate(out["state"])
        if out["usage"] is not None or out["model"] is not None:
            usage = TokenUsage.model_validate(out["usage"] or {})
            run.pending_usage.append(
                UsageRecord(
                    kind="llm",
                    name=out["model"] or usage.model or run.agent.llm_config.model,
                    step=run.step,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cached_input_tokens=usage.cached_input_tokens,
                    reasoning_tokens=usage.reasoning_tokens,
                    value=out["duration_ms"],
                    success=self.state.summary_error is None,
                    cost_usd=usage.cost_usd,
                )
            )


__all__ = ["COMPACTION_PATCH", "CONTEXT_WINDOW_CODE", "CompactionCapability"]
