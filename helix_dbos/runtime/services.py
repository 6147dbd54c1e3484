"""The process-wide services the agent workflow uses: store, model, streams, registry.

DBOS workflow arguments must be serialisable, so the workflow receives only ids and JSON; the live
objects it needs are installed here once per process by
:class:`~helix_dbos.runtime.executor.DBOSAgentExecutor`.
A recovered workflow finds them the same way, which is why the executor (and its agents) must be
set up before ``DBOS.launch()``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from helix_dbos.agent import AgentHooks
from helix_dbos.capability import RunCapability
from helix_dbos.errors import HelixError
from helix_dbos.llm.base import LLMAdapter
from helix_dbos.logger import Logger
from helix_dbos.runtime.abort import ToolAbortSignals
from helix_dbos.store.base import SessionStore
from helix_dbos.tool import AbortSignal

if TYPE_CHECKING:
    # Types only: the executor builds both, and importing them here would put the stream layer
    # under every step module.
    from helix_dbos.runtime.child_deadlines import ChildDeadlines
    from helix_dbos.runtime.child_park import ParentWaker
    from helix_dbos.runtime.double_text import DoubleTexting
    from helix_dbos.runtime.registry import AgentRegistry
    from helix_dbos.runtime.starting import RunStarter
    from helix_dbos.runtime.streaming import RunStreams


@dataclass
class RuntimeServices:
    """Everything a running agent workflow needs that cannot travel through DBOS arguments."""

    store: SessionStore
    llm: LLMAdapter
    registry: AgentRegistry
    streams: RunStreams
    logger: Logger
    tool_pool: ThreadPoolExecutor
    hot_window_seconds: float = 60.0
    """How long a run waits (for HITL answers, a sub-agent, a provider's admission) before it parks."""
    call_hooks: OrderedDict[str, AgentHooks] = field(default_factory=OrderedDict)
    """Per-call hooks by workflow id (the seeds' process-local ``HookManagerRegistry``): a run
    recovered or continued in another process has only its agent's hooks. Bounded, oldest first
    out, because a long-lived server starts runs whose hooks nobody needs again."""
    max_call_hooks: int = 4096
    executor_hooks: AgentHooks | None = None
    """The executor-wide hooks (``DBOSAgentExecutor(hooks=...)``): fired first, before the agent's,
    for every run this process runs, including runs it recovers for another process."""
    abort_signals: ToolAbortSignals | None = None
    """The abort signals of the tools running in this process (built over ``store`` by default)."""
    capabilities: tuple[RunCapability, ...] = ()
    """The built-in run features, in the order the loop calls them (an agent's own come after them)."""
    run_workflow: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """The agent-run DBOS workflow, which child runs are started as (:mod:`.children`). The executor
    sets it: the workflow module imports the loop, so the loop's modules cannot import it back."""
    starter: RunStarter | None = None
    """The executor's start protocol, which a schedule's fire workflow starts its run through
    (:mod:`.schedules.fire`); the executor sets it once its client is built."""
    double_text: DoubleTexting | None = None
    """Delivers double-texted messages (:mod:`.double_text`); the client sets it, the ticket workflow uses it."""
    parent_waker: ParentWaker | None = None
    """Continues a parent parked on children when the last of them ends (:mod:`.child_park`); the
    executor sets it. Without it the workers' sweep continues such parents."""
    child_deadlines: ChildDeadlines | None = None
    """Keeps the deadlines of the sub-agent children running here (:mod:`.child_deadlines`); the executor sets it."""
    _hooks_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.abort_signals is None:
            self.abort_signals = ToolAbortSignals(self.store)

    def tool_abort_signal(self, session_id: str) -> AbortSignal:
        """The abort signal for one tool call: tripped by ``abort`` / ``interrupt`` from any process."""
        assert self.abort_signals is not None
        return self.abort_signals.for_tool(session_id)

    def remember_call_hooks(self, workflow_id: str, hooks: AgentHooks) -> None:
        """Keep the per-call hooks of a run this process starts (its steps look them up by id)."""
        with self._hooks_lock:
            self.call_hooks[workflow_id] = hooks
            self.call_hooks.move_to_end(workflow_id)
            while len(self.call_hooks) > self.max_call_hooks:
                self.call_hooks.popitem(last=False)

    def call_hooks_of(self, workflow_id: str) -> AgentHooks | None:
        """The per-call hooks a run was started with in this process, if any."""
        with self._hooks_lock:
            return self.call_hooks.get(workflow_id)

    def hooks_for(self, workflow_id: str, agent_hooks: AgentHooks) -> list[AgentHooks]:
        """Executor hooks, agent hooks, then this workflow's per-call hooks (if this process has them)."""
        per_call = self.call_hooks_of(workflow_id)
        return [h for h in (self.executor_hooks, agent_hooks, per_call) if h is not None]


_lock = threading.Lock()
_current: RuntimeServices | None = None


def install(services: RuntimeServices) -> None:
    """Make ``services`` the ones every agent workflow in this process uses.

    The runtime is process-global (a recovered workflow can only find it here), so a second,
    different one is refused rather than silently replacing the first: the first executor's runs
    would go on in the second's store, model and streams. Installing the same services again is a
    no-op; to replace them, ``uninstall`` (``DBOSAgentExecutor.close()``) first.
    """
    global _current
    with _lock:
        if _current is not None and _current is not services:
            raise HelixError(
                "Another DBOSAgentExecutor is already installed as this process's runtime; there can be "
                "only one per process. Close it (executor.close(), or helix_dbos.shutdown(executor)) "
                "before creating a new one.",
                code="framework_internal_error",
                retryable=False,
            )
        _current = services


def current() -> RuntimeServices:
    """The installed services, or an error that says how to install them."""
    services = _current
    if services is None:
        raise HelixError(
            "No DBOSAgentExecutor has been created in this process. Create one (and register your "
            "agents) before DBOS.launch() so that agent workflows, including recovered ones, can run.",
            code="framework_internal_error",
        )
    return services


def uninstall(services: RuntimeServices | None = None) -> None:
    """Forget the installed services (only if they are ``services``, when given)."""
    global _current
    with _lock:
        if services is None or _current is services:
            _current = None
