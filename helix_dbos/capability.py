"""The capability seam: a run feature is one object that says what it adds to the agent loop.

The loop (``helix_dbos.runtime.loop``) and its tool phases (``helix_dbos.runtime.tools``) know no
feature by name. They call every capability of a run at named points, in a fixed order, and a
capability that has nothing to do at a point inherits the no-op. The built-in features are
capabilities like any other (skills, budgets, memory, companions, sub-agents, remote sub-agents,
human in the loop: ``helix_dbos.runtime.builtin_capabilities``); an agent adds its own with
``define_agent(..., capabilities=[...])``, after the built-ins.

The points, in the order a run passes them (each runs in workflow code, under replay too)::

    system_fragment     once, before on_agent_start: text appended to every system prompt of the run
    run_tools           once, after system_fragment: tools this feature adds to the run's tool set
    on_start            after on_agent_start; may end the run (RunEnd)
    after_outstanding   a continuation, after it answered the batch its previous run suspended on
    between_steps       before the first model call and after every step; may end the run
    before_first_model_call   once, after a resume's input is appended
    before_model_call   before every model call (the step number already advanced)
    model_messages      right before every model call: what the model sees (the transcript stays)
    retry_model_call    after a model call that failed: whether to make it once more (compaction)
    after_model_call    after every model call, with its recorded result
    a step's tool calls, in this order:
      calls_left_pending  a continuation, before its batch is split: calls its previous run left
                          pending with this feature (they stay human-answered)
      gates_call          while the batch is split, once per call of a gated tool, in call order:
                          whether it waits for a user's approval
      prepare_batch       before any call runs: answer the calls this feature refuses
      register_calls      after the batch's ``tool_start``: record the calls this feature waits on
      start_calls / finish_calls   this feature's calls, started before the regular tools, awaited after
      collect_answers     after finish_calls: the answers to the registered calls; may stop the
                          batch (BatchStop) or hand back calls to run as tool steps (approved ones)
      after_human_calls   calls that must see the human-answered calls' outcome
      result_chunk        the chunk announcing a call's result
    before_finish       once, as the run is about to end: may replace how it ends (an output check)
    on_finish           once, when the run ends (before the finalize step), with how it ends

**Determinism is the contract.** Workflow code runs again, from the top, when DBOS recovers a run:
a point must decide only from the run's state (its transcript, custom state, request, recorded
step outputs) and do its I/O in a recorded step (:meth:`CapabilityRun.record_step`), whose output
DBOS replays instead of running it again. A capability that changes what a run records (a new step,
a different argument) does so behind a named replay patch (``DBOS.patch``), listed in
:attr:`RunCapability.replay_patches`, so runs recorded before the change replay the old way.

A capability instance is copied for each run (:meth:`RunCapability.for_run`), so per-run state
kept on ``self`` is the run's own.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from helix_dbos.agent import AgentConfig
    from helix_dbos.messages import Message
    from helix_dbos.orchestration.tool_batch import HitlKind
    from helix_dbos.step_result import ErrorStepResult, ParsedToolCall, StepResult
    from helix_dbos.stream.chunks import StreamChunk
    from helix_dbos.tool import Tool

FinalStatus = Literal["completed", "failed", "interrupted", "suspended_client_tool", "suspended_awaiting_children"]
"""How a run can end."""

BatchStop = Literal["suspended", "aborted", "interrupted", "awaiting_children"]
"""How a batch of tool calls stops before all its calls have results (the run ends that way).
``awaiting_children``: a child the batch waits on (a blocking companion) waits on a human."""

T = TypeVar("T")

RESERVED_CAPABILITY_NAMES = frozenset(
    {"llm", "tool", "hooks", "finalize", "approval_gate", "hitl", "child", "companion", "memory", "budget"}
    | {"remote", "skills", "fail_run", "sub_agents", "remote_sub_agents", "companions", "tool_starts"}
    | {"mcp", "rate_limit", "compaction", "double_text"}
)
"""Names an agent's own capability may not take: its steps would read as a built-in step's."""


@dataclass(frozen=True)
class RunEnd:
    """A capability's decision to end the run here, and how (the loop records and announces it)."""

    status: FinalStatus
    output: Any = None
    error: str | None = None
    reason: str | None = None
    """An interruption's reason (``run_interrupted``)."""
    pending_ids: list[str] = field(default_factory=list)
    """The calls a suspended run waits on."""


@dataclass(frozen=True)
class CollectedAnswers:
    """What :meth:`RunCapability.collect_answers` found: stop the batch, or go on."""

    stop: BatchStop | None = None
    """The batch stops here (its answered calls are recorded; the run ends so)."""
    pending_ids: list[str] = field(default_factory=list)
    """The calls a stopped batch leaves open (a suspended run waits on them)."""
    run_as_steps: list[tuple[ParsedToolCall, Tool]] = field(default_factory=list)
    """Calls to run now as tool steps, from the merged state (approved calls), in this order."""


class CapabilityRun(Protocol):
    """What a capability sees of a run: the public part of the loop's run state."""

    agent: AgentConfig
    step: int
    """The current step (0 before the first model call)."""
    messages: list[Message]
    """The transcript as the model will see it (append with :meth:`append`)."""
    custom_state: dict[str, Any]

    @property
    def session_id(self) -> str:
        """The run's session."""
        ...

    @property
    def run_id(self) -> str:
        """The run."""
        ...

    def append(self, message: Message) -> None:
        """Add a message to the transcript (committed with the next step)."""
        ...

    def emit(self, chunk: StreamChunk) -> None:
        """Write a chunk to the run's stream, exactly once across replays."""
        ...

    def record_step(self, capability: str, name: str, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` as the recorded step ``{agent}.{capability}.{name}``; replays return its output.

        The output must be JSON-like (dicts, lists, strings, numbers): DBOS records it.
        """
        ...


class RunCapability:
    """Base class of a run feature: every point is a no-op; override the ones the feature needs."""

    name: ClassVar[str] = "capability"
    """Names the capability in logs and in the steps it records (``{agent}.{name}.{step}``)."""
    replay_patches: ClassVar[tuple[str, ...]] = ()
    """The ``DBOS.patch`` names this capability asks, newest last: the replay versions it knows."""

    def for_run(self) -> RunCapability:
        """The instance one run uses (a shallow copy: per-run state on ``self`` stays the run's)."""
        return copy.copy(self)

    # -- the run's life -------------------------------------------------------------------------------
    def system_fragment(self, run: Any) -> str:
        """Text appended to the run's system prompt on every model call (resolved once per run)."""
        return ""

    def run_tools(self, run: Any) -> Sequence[Tool]:
        """Tools this feature adds to the run, after the agent's own (resolved once per run).

        The model sees them on every call and the loop runs their calls as tool steps. What they
        are must come from recorded steps (a replay must see the same set); a name another tool
        of the run already has makes the run fail.
        """
        return ()

    def on_start(self, run: Any) -> RunEnd | None:
        """After ``on_agent_start``: set the run up; return a :class:`RunEnd` to end it at once."""
        return None

    def after_outstanding(self, run: Any) -> RunEnd | None:
        """A continuation, once the batch its previous run suspended on is answered."""
        return None

    def between_steps(self, run: Any) -> RunEnd | None:
        """Before the first model call and after each step's tools: end the run, or ``None`` to go on."""
        return None

    def before_first_model_call(self, run: Any) -> None:
        """Once per run, after a resume's input is in the transcript (add context for this turn)."""

    def before_model_call(self, run: Any) -> None:
        """Before every model call (add messages the model must see in this call)."""

    def model_messages(self, run: Any, messages: list[Message]) -> list[Message]:
        """Right before every model call: the messages the model is sent (system prompt first).

        Called in capability order, each seeing the previous one's list. The transcript is not
        changed; what a feature sends instead must be rebuilt from recorded steps on replay.
        """
        return messages

    def retry_model_call(self, run: Any, result: ErrorStepResult) -> bool:
        """After a model call that failed: True to make the call again, once, at the same step."""
        return False

    def after_model_call(self, run: Any, result: StepResult) -> None:
        """After every model call, with its recorded result (before its tools run)."""

    def before_finish(self, run: Any, end: RunEnd) -> RunEnd | None:
        """As the run is about to end ``end``'s way: another :class:`RunEnd` to end it so instead, or ``None``.

        Asked in capability order, each seeing the end the ones before it chose (e.g. an output
        guardrail fails a run about to complete with an output it refuses).
        """
        return None

    def on_finish(self, run: Any, end: RunEnd) -> None:
        """Once, as the run ends (before the step that records the end)."""

    # -- a step's tool calls ------------------------------------------------------------------------
    def calls_left_pending(self, run: Any, calls: list[ParsedToolCall]) -> Mapping[str, HitlKind]:
        """A continuation, before its batch is split: the calls its previous run left pending here.

        By call id, with their kind; they stay human-answered whatever their tool says now.
        """
        return {}

    def gates_call(self, run: Any, call: ParsedToolCall, tool: Tool) -> bool:
        """While the batch is split: whether a call of a gated tool waits for a user's approval.

        Asked once per call whose tool has ``require_approval`` set, in call order, until a
        capability says yes (a decision that takes a step is part of what the run records).
        """
        return False

    def prepare_batch(self, run: Any, batch: Any, results: dict[str, Any]) -> None:
        """Before any call of the batch runs: answer calls this feature refuses (into ``results``)."""

    def register_calls(self, run: Any, batch: Any, *, resuming: bool) -> object | None:
        """After the batch's ``tool_start`` announcements: record the calls this feature waits on.

        ``resuming``: the batch a suspended run left behind (its calls were announced then).
        Returns what :meth:`collect_answers` needs (``None``: nothing to wait for).
        """
        return None

    def start_calls(self, run: Any, batch: Any, results: dict[str, Any]) -> object | None:
        """Start this feature's calls of the batch; they run while the regular tools do.

        Returns what :meth:`finish_calls` needs (``None``: nothing started).
        """
        return None

    def finish_calls(self, run: Any, started: object, results: dict[str, Any]) -> None:
        """After the regular tools: wait for the calls :meth:`start_calls` started; their results into ``results``."""

    def collect_answers(self, run: Any, registered: object, results: dict[str, Any]) -> CollectedAnswers:
        """After :meth:`finish_calls`: wait for the answers to the calls :meth:`register_calls` recorded.

        Answers go into ``results``; the calls it returns in ``run_as_steps`` run next as tool steps.
        """
        return CollectedAnswers()

    def after_human_calls(self, run: Any, batch: Any, results: dict[str, Any]) -> None:
        """After the batch's human-answered calls: run this feature's calls that must see their outcome."""

    def result_chunk(self, run: Any, call: ParsedToolCall, output: Mapping[str, Any]) -> StreamChunk | None:
        """The chunk announcing a call's result, if this feature announces it (else ``tool_end``)."""
        return None


def capabilities_at(capabilities: Sequence[RunCapability], point: str) -> tuple[RunCapability, ...]:
    """The capabilities that do something at ``point``, in order: the ones whose class overrides it.

    A capability that inherits the base class's no-op at a point records nothing and returns the
    neutral answer there, so skipping it changes nothing a run records; it only spares the call
    (the loop passes a dozen points per iteration, and most built-ins use one or two). A point set
    on the instance itself counts as overridden, and so does one the class lacks (calling it
    fails, as it would have).
    """
    base = getattr(RunCapability, point)
    return tuple(
        c for c in capabilities if getattr(type(c), point, None) is not base or point in getattr(c, "__dict__", ())
    )


__all__ = [
    "RESERVED_CAPABILITY_NAMES",
    "BatchStop",
    "CapabilityRun",
    "CollectedAnswers",
    "FinalStatus",
    "RunCapability",
    "RunEnd",
    "capabilities_at",
]
