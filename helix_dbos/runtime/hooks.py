"""Lifecycle hook payloads and the code that fires hooks (sync or async, never fatal).

Hooks observe; they do not steer the loop. A hook that raises is logged and ignored, because one
broken tracing integration must not fail a user's run. Tool and message hooks may change the custom
state (seed 001 "Hook customState reconcile"): ``payload.update_state(fn)`` works like a tool's
``ctx.update_state``. In ``before_tool`` the change joins the tool's own step writes; in ``after_tool``
and ``on_message`` (fired in the ``{agent}.hooks`` step) it is that step's recorded output, merged into
the run's state by workflow code and streamed as a ``state_patch``, so a replay applies the recorded
writes once and never runs the hook again. Where a hook fires inside a DBOS step it fires
once per step execution (at-least-once across crashes, exactly once when nothing crashes); the
runtime puts every hook it can inside a step so recovery does not fire it again.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from helix_dbos.agent import AgentHooks, HookFn
from helix_dbos.errors import ConflictingOptionsError
from helix_dbos.logger import Logger
from helix_dbos.runtime.aio import background_loop
from helix_dbos.state.tracker import StateTracker, Updater


class _StateAccess:
    """``get_state`` / ``update_state`` for the payloads of hooks that may change the custom state."""

    state_tracker: StateTracker | None

    def get_state(self) -> Any:
        """A copy of the custom state (a ``state_schema`` instance, or a dict)."""
        return self._tracker().get_typed_state()

    def update_state(self, fn: Updater) -> None:
        """Mutate a draft of the custom state, as a tool's ``ctx.update_state`` does."""
        self._tracker().update(fn)

    def _tracker(self) -> StateTracker:
        if self.state_tracker is None:
            raise RuntimeError("this hook payload carries no state (state is only available while the hook runs)")
        return self.state_tracker


@dataclass(frozen=True)
class ToolHookPayload(_StateAccess):
    """``before_tool`` / ``after_tool``: one tool call (``result``/``error`` set after it ran)."""

    session_id: str
    run_id: str
    agent_type: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    success: bool | None = None
    result: Any = None
    error: str | None = None
    duration_ms: float | None = None
    state_tracker: StateTracker | None = field(default=None, repr=False, compare=False)
    """Set while the hook runs: what ``get_state`` / ``update_state`` act on."""


@dataclass(frozen=True)
class StateChangePayload:
    """``on_state_change``: the custom state a tool produced, and the RFC 6902 patches."""

    session_id: str
    run_id: str
    agent_type: str
    tool_call_id: str
    patches: list[dict[str, Any]]
    state: dict[str, Any]


@dataclass(frozen=True)
class MessagePayload(_StateAccess):
    """``on_message``: a message appended to the transcript."""

    session_id: str
    run_id: str
    agent_type: str
    message: Any
    state_tracker: StateTracker | None = field(default=None, repr=False, compare=False)
    """Set while the hook runs: what ``get_state`` / ``update_state`` act on."""


@dataclass(frozen=True)
class LLMCallPayload:
    """``before_llm_call`` / ``after_llm_call``: one model call of a run (``step`` counts from 1).

    ``step_result`` and ``duration_ms`` are set after the call; ``messages`` are what the model was
    sent (system prompt first) and ``tool_names`` the tools it was offered.
    """

    session_id: str
    run_id: str
    agent_type: str
    step: int
    messages: list[Any]
    tool_names: list[str]
    step_result: Any = None
    duration_ms: float | None = None


@dataclass(frozen=True)
class RunPayload:
    """Run lifecycle: ``on_agent_start``, ``_complete``, ``_fail``, ``_suspended``, ``_resumed``."""

    session_id: str
    run_id: str
    agent_type: str
    status: str
    output: Any = None
    error: str | None = None
    previous_run_id: str | None = None
    resumed_from_checkpoint_id: str | None = None
    """``on_agent_resumed``: the session's checkpoint the run continues from (``None``: none yet)."""
    extra: dict[str, Any] = field(default_factory=dict)


def _call(fn: HookFn, payload: object) -> None:
    result = fn(payload)
    if inspect.isawaitable(result):

        async def _await() -> None:
            await result

        background_loop.run(_await())


def fire(hook_sets: list[AgentHooks], name: str, payload: object, logger: Logger) -> None:
    """Fire hook ``name`` of every hook set in order (agent hooks, then per-call hooks)."""
    for hooks in hook_sets:
        fn = getattr(hooks, name, None)
        if fn is None:
            continue
        try:
            _call(fn, payload)
        except Exception as exc:  # a hook must never fail the run
            logger.warn(f"[helix-dbos] hook {name} raised; ignored", {"error": repr(exc)})


def has_hook(hook_sets: list[AgentHooks], *names: str) -> bool:
    """True when any hook set defines any of ``names``."""
    return any(getattr(h, n, None) is not None for h in hook_sets for n in names)


HOOK_NAMES: tuple[str, ...] = tuple(AgentHooks.model_fields)
"""Every hook an :class:`AgentHooks` can define."""


def defined_hooks(hook_sets: list[AgentHooks]) -> list[str]:
    """The names of the hooks any of ``hook_sets`` defines, sorted.

    A run records this list when it starts: it decides which hook steps the run takes, so a replay
    in a process that lacks the per-call hooks takes the same steps (firing only what it has).
    """
    return sorted(n for n in HOOK_NAMES if has_hook(hook_sets, n))


def per_call_hooks(hooks: AgentHooks | None, hook_manager: AgentHooks | dict[str, Any] | None) -> AgentHooks | None:
    """The per-call hooks of an ``execute`` / ``resume`` / ``retry``, from either of its two options.

    The seeds give a call ``hooks`` or a ``hookManager``; here both are one hook set (a run merges
    its hook sets itself, executor then agent then call), so ``hook_manager`` is the same option under
    the seeds' name, also accepted as a dict of :class:`AgentHooks` fields. Given both, the call is
    refused rather than one silently dropped.
    """
    if hooks is not None and hook_manager is not None:
        raise ConflictingOptionsError("hooks", "hook_manager")
    if isinstance(hook_manager, dict):
        return AgentHooks.model_validate(hook_manager)
    return hooks if hook_manager is None else hook_manager
