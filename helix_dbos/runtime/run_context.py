"""One agent run as the workflow sees it: its in-memory state (its request and summary: ``run_request``).

:class:`RunContext` is the mutable state the loop driver (``loop.py``) and the tool phases
(``tools.py``) share. It lives only in workflow memory and is rebuilt identically when DBOS replays
the workflow: every change to it comes from the request or from checkpointed step outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from dbos import DBOS

from helix_dbos.agent import AgentConfig, AgentHooks
from helix_dbos.capability import FinalStatus, RunCapability, capabilities_at
from helix_dbos.messages import Message
from helix_dbos.runtime import step_names
from helix_dbos.runtime.abort import durable_stop_reason
from helix_dbos.runtime.hooks import MessagePayload, defined_hooks
from helix_dbos.runtime.ids import RECORDED_STOP_REASON_PATCH, SCOPED_CALL_IDS_PATCH, scoped_call_key
from helix_dbos.runtime.run_request import RunIdentity, RunRequest, RunSummary
from helix_dbos.runtime.step_outputs import CommitOutput, HooksStepOutput, StopReasonStepOutput
from helix_dbos.runtime.steps import hooks_step, stop_reason_step
from helix_dbos.session import RunStatus, SessionStatus
from helix_dbos.state.tracker import StepWritesAdapter, apply_step_writes
from helix_dbos.store.base import StepCommit, UsageRecord
from helix_dbos.stream.chunks import CheckpointCreatedChunk, StatePatchChunk, StreamChunk

if TYPE_CHECKING:
    from helix_dbos.runtime.services import RuntimeServices

T = TypeVar("T")


class RunContext:
    """Mutable in-memory state of one run; rebuilt identically when DBOS replays the workflow."""

    def __init__(self, rt: RuntimeServices, agent: AgentConfig, request: RunRequest, messages: list[Message]) -> None:
        self.rt = rt
        self.agent = agent
        self.request = request
        self.who = RunIdentity(
            session_id=request.session_id,
            run_id=request.run_id,
            workflow_id=request.workflow_id,
            stream_id=request.stream_id,
            agent=agent,
            stream_start_sequence=request.stream_start_sequence,
            parent_stream_id=request.parent_stream_id,
            root_session_id=request.root_session_id or request.session_id,
            parent_session_id=request.parent_session_id,
        )
        self.hooks: list[AgentHooks] = rt.hooks_for(request.workflow_id, agent.hooks)
        self.hook_plan = frozenset(defined_hooks(self.hooks) if request.hook_names is None else request.hook_names)
        self.messages = messages
        self.custom_state = dict(request.start_custom_state)
        self.committed_count = request.start_message_count
        self.pending_messages: list[Message] = []
        self.pending_usage: list[UsageRecord] = []
        self.usage_log: list[UsageRecord] = []
        """This run's usage records already handed to a commit (with ``pending_usage``: all of them)."""
        self.step = 0
        self.last_text: str | None = None
        self.deferred_hooks: list[tuple[str, object]] = []
        self.applied_pending: list[str] = []
        self.awaiting_children: list[dict[str, Any]] = []
        """The children this step's calls wait on that wait on a human (``SuspendedChildWait`` as JSON):
        the batch stops and the run parks as ``suspended_awaiting_children`` (:mod:`.companions`), or
        sub-agent children still running when the hot window ended (:mod:`.child_park`)."""
        self.children_may_park = True
        """False while the sub-agent calls made alongside ``__finish__`` run: the run completes once
        they end, so it waits for them hot (a continuation would not complete it)."""
        self.emitted = 0
        """HITL answers turned into results since the last commit; marked applied with it."""
        self._scoped_call_ids: bool | None = None
        self.child_park_patched: bool | None = None
        """Whether this run parks on sub-agent children after the hot window (a replay patch, asked
        once per run at its first wait on one: :func:`helix_dbos.runtime.child_park.parking_enabled`)."""
        self.unknown_outcomes_patched: bool | None = None
        """Whether this run marks its not-retry-safe calls (a replay patch, asked once per run when its
        first such call starts: :func:`helix_dbos.runtime.unknown_outcomes.mark_starts`)."""
        self.capabilities: list[RunCapability] = [c.for_run() for c in (*rt.capabilities, *agent.capabilities)]
        """This run's features (built-in first, then the agent's own), in the order the loop calls them."""
        self._capabilities_at: dict[str, tuple[RunCapability, ...]] = {}

    def capabilities_at(self, point: str) -> tuple[RunCapability, ...]:
        """The run's capabilities that do something at ``point`` (:func:`~helix_dbos.capability.capabilities_at`).

        Worked out once per run and point: the loop passes most points every iteration.
        """
        found = self._capabilities_at.get(point)
        if found is None:
            found = self._capabilities_at[point] = capabilities_at(self.capabilities, point)
        return found

    @property
    def session_id(self) -> str:
        """The run's session (part of what a capability sees: :class:`~helix_dbos.capability.CapabilityRun`)."""
        return self.who.session_id

    @property
    def run_id(self) -> str:
        """The run."""
        return self.who.run_id

    def record_step(self, capability: str, name: str, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` as the step ``{agent}.{capability}.{name}``: replays return its recorded output."""
        output: T = DBOS.run_step({"name": step_names.capability(self.agent.name, capability, name)}, fn, *args)
        return output

    def abort_error(self) -> str:
        """The error a run stopped by an abort ends with: the abort's reason, read in a recorded step.

        Asked only when a recorded check (or a budget approval's wait) found the run aborted. The
        abort recorded its reason before that, so the run's error is the same whether the abort's
        workflow cancellation or this run's finish lands first; recording the read
        (``{agent}.stop_reason``) makes a replay end with it too. A run recorded before
        :data:`~.ids.RECORDED_STOP_REASON_PATCH` has another step here and reads the store, as it did.
        """
        if not DBOS.patch(RECORDED_STOP_REASON_PATCH):
            return durable_stop_reason(self.rt.store, self.who.session_id) or "aborted"
        out: StopReasonStepOutput = DBOS.run_step(
            {"name": step_names.stop_reason(self.agent.name)}, stop_reason_step, self.who.session_id
        )
        return out["reason"] or "aborted"

    def wants(self, *hooks: str) -> bool:
        """Whether the run's hook plan has any of ``hooks`` (decides hook steps; see ``hook_names``)."""
        return not self.hook_plan.isdisjoint(hooks)

    def call_key(self, tool_call_id: str) -> str:
        """What ids derived from this tool call build on: unique per turn and step, same on replay.

        The first call in a run takes the decision (:func:`scoped_call_ids`) and the rest of the run
        keeps it, so one run never mixes the two shapes. Call it only where such an id is derived:
        runs that derive none record nothing for it.
        """
        if self._scoped_call_ids is None:
            self._scoped_call_ids = scoped_call_ids()
        if not self._scoped_call_ids:
            return tool_call_id
        return scoped_call_key(tool_call_id, turn=self.request.turn, step=self.step)

    # -- transcript --------------------------------------------------------------------------------
    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.pending_messages.append(message)
        if self.wants("on_message"):
            payload = MessagePayload(self.who.session_id, self.who.run_id, self.agent.name, message)
            self.deferred_hooks.append(("on_message", payload))

    def emit(self, chunk: StreamChunk) -> None:
        """Write a chunk from workflow code, keyed by its position in the run.

        Workflow code re-runs on recovery and emits the same chunks in the same order, so
        ``{run_id}:{ordinal}`` lets a durable stream keep exactly one copy of each.
        """
        self.emitted += 1
        key = f"{self.who.run_id}:{self.emitted}"
        self.rt.streams.write(self.who.stream_id, chunk, dedupe_key=key)
        if self.who.parent_stream_id is not None:
            # A child's chunk, mirrored to its parent's stream under the same key: the key names the
            # child's run, so it never meets the parent's own keys, and a replay stores it once.
            self.rt.streams.write(self.who.parent_stream_id, chunk, dedupe_key=key)

    def chunk_base(self) -> dict[str, Any]:
        return {"agent_id": self.who.run_id, "agent_type": self.agent.name, "step": self.step}

    def pending_commit(
        self,
        *,
        session_status: SessionStatus | None = None,
        run_status: RunStatus | None = None,
        output: Any = None,
        error: str | None = None,
        checkpoint_status: str = "running",
    ) -> StepCommit:
        """Everything not yet committed; ``now_ms`` is filled in by the step that commits it."""
        commit = StepCommit(
            session_id=self.who.session_id,
            run_id=self.who.run_id,
            step_count=self.step,
            first_sequence=self.committed_count,
            messages=list(self.pending_messages),
            custom_state=dict(self.custom_state),
            usage=list(self.pending_usage),
            session_status=session_status,
            run_status=run_status,
            output=output,
            error=error,
            checkpoint_status=checkpoint_status,
            now_ms=0,
        )
        self.committed_count += len(self.pending_messages)
        self.pending_messages = []
        self.usage_log.extend(self.pending_usage)
        self.pending_usage = []
        return commit

    def flush_hooks(self) -> None:
        if not self.deferred_hooks:
            return
        events, self.deferred_hooks = self.deferred_hooks, []
        out: HooksStepOutput = DBOS.run_step(
            {"name": step_names.hooks(self.agent.name)}, hooks_step, self.who, self.hooks, events, self.custom_state
        )
        if "writes" in out:  # hooks changed the state: the recorded writes, applied once per replay
            writes = StepWritesAdapter.validate_python(out["writes"])
            self.custom_state, _ = apply_step_writes(self.custom_state, writes)
            self.emit(StatePatchChunk(**self.chunk_base(), patches=out.get("patches", [])))

    def emit_checkpoint(self, commit: CommitOutput | None, step: int) -> None:
        """Announce a committed checkpoint on the stream (nothing when no commit was made)."""
        if commit is None:
            return
        self.emit(
            CheckpointCreatedChunk(
                agent_id=self.who.run_id,
                agent_type=self.agent.name,
                step=step,
                checkpoint_id=commit["checkpoint_id"],
                step_count=step,
            )
        )


def scoped_call_ids() -> bool:
    """Workflow code: whether this run's call-derived ids carry the turn and step (a DBOS replay patch).

    A run recorded before :data:`~.ids.SCOPED_CALL_IDS_PATCH` has a step of its own where the patch
    is asked (its first ``child.start``, ``remote.start`` or ``companion.open``): ``False``, and it
    replays with the bare tool call ids it was written with. Any other run records the patch there.
    """
    patched: bool = DBOS.patch(SCOPED_CALL_IDS_PATCH)
    return patched


__all__ = ["FinalStatus", "RunContext", "RunRequest", "RunSummary", "scoped_call_ids"]
