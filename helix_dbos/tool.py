"""Tool definitions: ``define_tool``, the ``Tool`` model, the ``__finish__`` tool and ``ToolContext``.

A tool is data plus a function: a name, a description, pydantic schemas for its input and output,
and ``execute(input, ctx)`` (sync or async). The durable runtime resolves tools by name at run
time and runs each call as its own checkpointed step, so a tool needs no decorator and editing
one never strands a run in flight.

The combinations the seeds reject are rejected here, at definition time:

- ``execute="client"`` with ``finish_with`` or ``require_approval``;
- ``require_approval`` with ``finish_with``;
- ``finish_with_transform`` without ``finish_with``;
- ``retry_safe=False`` with ``execute="client"`` or ``finish_with``, and ``unknown_outcome`` on a
  retry-safe tool;
- reserved names (``__finish__``, ``load_skill``, ``read_skill_file``) and the reserved prefixes
  ``subagent__`` / ``companion__``.
"""

from __future__ import annotations

import inspect
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from helix_dbos.errors import DefinitionError
from helix_dbos.state.tracker import StateTracker, Updater

FINISH_TOOL_NAME = "__finish__"
"""The auto-injected completion tool of agents with an ``output_schema``."""
SUBAGENT_TOOL_PREFIX = "subagent__"
"""Prefix of the tool names under which sub-agent calls are stored."""
COMPANION_TOOL_PREFIX = "companion__"
"""Prefix of the auto-injected persistent-companion tools."""
LOAD_SKILL_TOOL_NAME = "load_skill"
READ_SKILL_FILE_TOOL_NAME = "read_skill_file"
RESERVED_TOOL_NAMES: frozenset[str] = frozenset({FINISH_TOOL_NAME, LOAD_SKILL_TOOL_NAME, READ_SKILL_FILE_TOOL_NAME})
"""Names user tools may not take."""
FINISH_VALUE_KEY = "value"
"""Key under which a non-object output schema is wrapped in the ``__finish__`` arguments."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Used with ``fullmatch``: ``$`` alone would accept a trailing newline."""


class AbortSignal:
    """Cooperative cancellation for tools: check ``aborted``, call ``throw_if_aborted``, or ``wait``.

    The runtime trips a tool's signal when its run is aborted or interrupted: at once in the
    process that takes the ``abort`` / ``interrupt`` call, and from any other process through
    ``probe``, which reads the session's durable flags. A signal that is not tripped yet consults
    its probe when it is read, at most once per ``probe_interval_seconds``, so a tool that polls in
    a tight loop costs one small read per interval, and a tool that never looks costs nothing.
    """

    def __init__(
        self,
        probe: Callable[[], str | None] | None = None,
        *,
        probe_interval_seconds: float = 0.25,
    ) -> None:
        self._tripped = threading.Event()
        self._reason: str | None = None
        self._probe = probe
        self._interval = probe_interval_seconds
        self._next_probe = 0.0
        self._lock = threading.Lock()

    @property
    def aborted(self) -> bool:
        """Whether the signal was tripped (reading it may consult the probe)."""
        if not self._tripped.is_set():
            self._consult_probe()
        return self._tripped.is_set()

    @property
    def reason(self) -> str | None:
        """Why it was tripped (``"aborted: <reason>"``, ``"interrupted"``, ...), or ``None``."""
        return self._reason

    def abort(self, reason: str | None = None) -> None:
        """Mark the signal aborted (idempotent; the first reason wins)."""
        with self._lock:
            if self._tripped.is_set():
                return
            self._reason = reason
            self._tripped.set()

    def throw_if_aborted(self) -> None:
        """Raise ``RuntimeError`` when aborted (the tool then fails with the reason)."""
        if self.aborted:
            raise RuntimeError(f"aborted: {self.reason or 'no reason given'}")

    def wait(self, timeout_seconds: float | None = None) -> bool:
        """Block until the signal trips (True) or ``timeout_seconds`` pass (False): an abortable sleep."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        while not self.aborted:
            slice_seconds = self._interval if self._probe is not None else None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                slice_seconds = left if slice_seconds is None else min(slice_seconds, left)
            self._tripped.wait(slice_seconds)
        return True

    def _consult_probe(self) -> None:
        if self._probe is None:
            return
        now = time.monotonic()
        with self._lock:
            if now < self._next_probe:
                return
            self._next_probe = now + self._interval
        try:
            reason = self._probe()
        except Exception:  # an unreadable flag is not an abort; the next read tries again
            return
        if reason is not None:
            self.abort(reason)


@dataclass(frozen=True)
class CustomEvent:
    """An event a tool emitted with ``ctx.emit``; the runtime writes it as a ``custom`` chunk."""

    event_name: str
    data: Any


@dataclass
class ToolContext:
    """What a tool's ``execute`` receives besides its input.

    State changes go through a draft (``update_state``) so the runtime can record them as step
    writes and merge parallel tools by the seeds' contract. ``emit`` is synchronous and buffered,
    so sync and async tools use it alike; the runtime writes the events in order after the call.
    """

    agent_id: str
    """The run id of the calling agent (the seeds' ``agentId``)."""
    agent_type: str
    """The calling agent's name."""
    session_id: str
    tool_call_id: str
    tool_name: str
    state_tracker: StateTracker
    abort_signal: AbortSignal = field(default_factory=AbortSignal)
    events: list[CustomEvent] = field(default_factory=list)
    call_key: str | None = None
    """What :attr:`idempotency_key` is built on: ``None`` for ``tool_call_id``, or
    ``{turn}.{step}-{tool_call_id}`` when an earlier call in the session used the same id."""

    @property
    def idempotency_key(self) -> str:
        """One per tool call in the session, stable across retries and recovery of that call.

        ``{session_id}:{tool_call_id}``; when the model used the call's id before in the session
        (many models number their calls per response, so the next turn may call ``call_1`` again),
        ``{session_id}:{turn}.{step}-{tool_call_id}`` with the run's turn and model step. Pass it to
        the external systems a tool writes to, so a retried call is recognised as the same one.
        """
        return f"{self.session_id}:{self.call_key or self.tool_call_id}"

    def get_state(self) -> Any:
        """A copy of the custom state (a ``state_schema`` instance, or a dict)."""
        return self.state_tracker.get_typed_state()

    def update_state(self, fn: Updater) -> None:
        """Mutate a draft of the custom state: ``ctx.update_state(lambda d: d.notes.append(n))``."""
        self.state_tracker.update(fn)

    def emit(self, event_name: str, data: Any = None) -> None:
        """Emit a custom stream event (``custom`` chunk) from the tool."""
        self.events.append(CustomEvent(event_name=event_name, data=data))


def create_tool_context(
    *,
    agent_id: str,
    agent_type: str,
    session_id: str,
    tool_call_id: str,
    tool_name: str,
    state_tracker: StateTracker,
    abort_signal: AbortSignal | None = None,
    call_key: str | None = None,
) -> ToolContext:
    """Build a :class:`ToolContext` (the seeds' ``createToolContext``)."""
    return ToolContext(
        agent_id=agent_id,
        agent_type=agent_type,
        session_id=session_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        state_tracker=state_tracker,
        abort_signal=abort_signal or AbortSignal(),
        call_key=call_key,
    )


ExecuteFn = Callable[[Any, ToolContext], Any | Awaitable[Any]]
ApprovalPredicate = Callable[..., bool | Awaitable[bool]]
UnknownOutcomePolicy = Literal["ask", "report"]
"""What a run does with a not-retry-safe call whose worker died while it ran (see :attr:`Tool.retry_safe`)."""


class Tool(BaseModel):
    """A tool an agent can call. Build it with :func:`define_tool`."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True, extra="forbid")

    name: str
    description: str = ""
    input_schema: type[BaseModel] | None = None
    """Validates the model's arguments; ``execute`` receives an instance. ``None`` passes a dict."""
    output_schema: type[BaseModel] | None = None
    """Validates what ``execute`` returns (a mismatch is a tool error the model sees)."""
    execute: ExecuteFn | Literal["client"] | None = None
    """``(input, ctx) -> result``, sync or async; ``"client"`` for tools the front end runs."""
    strict: bool = False
    """Ask the provider to constrain arguments to ``input_schema`` (capability-gated)."""
    finish_with: bool = False
    """Calling this tool completes the agent with its result as the output."""
    finish_with_transform: Callable[[Any], Any] | None = None
    """Maps a ``finish_with`` tool's result to the agent's output; raising fails the run."""
    require_approval: bool | ApprovalPredicate = False
    """Gate execution behind a user decision; a predicate ``(input, ctx?) -> bool`` fails closed."""
    timeout_ms: int | None = None
    """How long a client-executed or approval-gated call waits for its answer before it times out."""
    retry_safe: bool = True
    """Whether running the call again after a crash is harmless (the default, DBOS's at-least-once).

    ``False`` for a tool that must not run twice (it charges a card, sends an email): when a worker
    dies while such a call runs, recovery does not run it again blindly; the call's outcome is
    unknown, and :attr:`unknown_outcome` says what happens next."""
    unknown_outcome: UnknownOutcomePolicy = "ask"
    """For ``retry_safe=False``: ``"ask"`` (the default) parks the run on an operator's approval of a
    re-run (approve: it runs once more; deny: the model gets the "outcome unknown" result);
    ``"report"`` gives the model that result at once."""
    finish_output_wrapped: bool = False
    """Internal: the ``__finish__`` arguments wrap a non-object output under ``"value"``."""
    parameters_schema: dict[str, Any] | None = None
    """Internal: an explicit JSON schema for the arguments (used by ``__finish__``)."""

    @property
    def is_client(self) -> bool:
        """True for ``execute="client"`` tools."""
        return self.execute == "client"

    def json_schema(self) -> dict[str, Any]:
        """JSON schema of the arguments, always an object schema."""
        if self.parameters_schema is not None:
            return self.parameters_schema
        if self.input_schema is None:
            return {"type": "object", "properties": {}, "additionalProperties": True}
        return self.input_schema.model_json_schema()

    def validate_input(self, arguments: Mapping[str, Any]) -> Any:
        """Validate raw arguments; raises ``pydantic.ValidationError`` on a mismatch."""
        if self.input_schema is None:
            return dict(arguments)
        return self.input_schema.model_validate(dict(arguments))

    async def run(self, arguments: Any, ctx: ToolContext) -> Any:
        """Call ``execute`` with validated input, awaiting it when it is async."""
        if not callable(self.execute):
            raise TypeError(f"tool {self.name!r} has no server-side execute function")
        result = self.execute(arguments, ctx)
        if inspect.isawaitable(result):
            result = await result
        if self.output_schema is not None and not isinstance(result, self.output_schema):
            result = self.output_schema.model_validate(result)
        return result


def define_tool(
    name: str,
    *,
    description: str = "",
    input_schema: type[BaseModel] | None = None,
    output_schema: type[BaseModel] | None = None,
    execute: ExecuteFn | Literal["client"] | None = None,
    strict: bool = False,
    finish_with: bool = False,
    finish_with_transform: Callable[[Any], Any] | None = None,
    require_approval: bool | ApprovalPredicate = False,
    timeout_ms: int | None = None,
    retry_safe: bool = True,
    unknown_outcome: UnknownOutcomePolicy | None = None,
) -> Tool:
    """Define a tool; invalid combinations raise :class:`DefinitionError` here, not at run time.

    ``retry_safe=False`` marks a tool that must not run twice (see :attr:`Tool.retry_safe`), and
    ``unknown_outcome`` (``"ask"`` unless given) what a run does when such a call's outcome is unknown.
    """
    check_tool_name(name)
    if input_schema is not None and not (isinstance(input_schema, type) and issubclass(input_schema, BaseModel)):
        raise DefinitionError(f"tool {name!r}: input_schema must be a pydantic model class")
    if output_schema is not None and not (isinstance(output_schema, type) and issubclass(output_schema, BaseModel)):
        raise DefinitionError(f"tool {name!r}: output_schema must be a pydantic model class")
    if execute is None:
        raise DefinitionError(f"tool {name!r}: execute is required (a function, or 'client')")
    if execute != "client" and not callable(execute):
        raise DefinitionError(f"tool {name!r}: execute must be callable or the string 'client'")
    gated = require_approval is not False
    if execute == "client" and finish_with:
        raise DefinitionError(f"tool {name!r}: execute='client' cannot be combined with finish_with")
    if execute == "client" and gated:
        raise DefinitionError(f"tool {name!r}: execute='client' cannot be combined with require_approval")
    if gated and finish_with:
        raise DefinitionError(f"tool {name!r}: require_approval cannot be combined with finish_with")
    if finish_with_transform is not None and not finish_with:
        raise DefinitionError(f"tool {name!r}: finish_with_transform requires finish_with=True")
    if timeout_ms is not None and (execute != "client" and require_approval is False):
        raise DefinitionError(f"tool {name!r}: timeout_ms applies only to client-executed or approval-gated tools")
    if timeout_ms is not None and timeout_ms <= 0:
        raise DefinitionError(f"tool {name!r}: timeout_ms must be positive")
    if not isinstance(require_approval, bool) and not callable(require_approval):
        raise DefinitionError(f"tool {name!r}: require_approval must be a bool or a predicate")
    _check_retry_safety(name, execute, finish_with, retry_safe, unknown_outcome)
    return Tool(
        name=name,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        execute=execute,
        strict=strict,
        finish_with=finish_with,
        finish_with_transform=finish_with_transform,
        require_approval=require_approval,
        timeout_ms=timeout_ms,
        retry_safe=retry_safe,
        unknown_outcome=unknown_outcome or "ask",
    )


def _check_retry_safety(
    name: str, execute: object, finish_with: bool, retry_safe: object, unknown_outcome: object
) -> None:
    """Reject what a not-retry-safe tool cannot be.

    Such a tool runs on the server as a regular call (its re-run approval gates a regular call),
    so client and finish_with tools cannot be one.
    """
    if not isinstance(retry_safe, bool):
        raise DefinitionError(f"tool {name!r}: retry_safe must be a bool")
    if unknown_outcome is not None and unknown_outcome not in ("ask", "report"):
        raise DefinitionError(f"tool {name!r}: unknown_outcome must be 'ask' or 'report'")
    if retry_safe:
        if unknown_outcome is not None:
            raise DefinitionError(f"tool {name!r}: unknown_outcome applies only to retry_safe=False tools")
        return
    if execute == "client":
        raise DefinitionError(f"tool {name!r}: execute='client' cannot be combined with retry_safe=False")
    if finish_with:
        raise DefinitionError(f"tool {name!r}: finish_with cannot be combined with retry_safe=False")


def check_tool_name(name: str) -> None:
    """Refuse a name providers do not accept, a reserved name, or one under a reserved prefix."""
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise DefinitionError(
            f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-' (what providers accept)"
        )
    if name in RESERVED_TOOL_NAMES:
        raise DefinitionError(f"tool name {name!r} is reserved by the framework")
    for prefix in (SUBAGENT_TOOL_PREFIX, COMPANION_TOOL_PREFIX):
        if name.startswith(prefix):
            raise DefinitionError(f"tool name {name!r} uses the reserved prefix {prefix!r}")


def _is_model_type(value: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(value, type) and issubclass(value, BaseModel)


def output_json_schema(output_schema: Any) -> tuple[dict[str, Any], bool]:
    """JSON schema for an output type, and whether it had to be wrapped to be an object schema."""
    if _is_model_type(output_schema):
        return output_schema.model_json_schema(), False
    schema = TypeAdapter(output_schema).json_schema()
    if schema.get("type") == "object":
        return schema, False
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {FINISH_VALUE_KEY: schema},
        "required": [FINISH_VALUE_KEY],
    }
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True


def create_finish_tool(output_schema: Any, *, strict: bool = False) -> Tool:
    """The ``__finish__`` tool for an output type: the model completes by calling it.

    It never executes; ``plan_step_processing`` turns the call into the agent's output. An output
    type that is not an object (``list[str]``, ``int``) is wrapped as ``{"value": ...}`` because
    providers require object-shaped tool parameters.
    """
    schema, wrapped = output_json_schema(output_schema)
    return Tool(
        name=FINISH_TOOL_NAME,
        description=(
            "Complete the task and return the final structured output. Call this exactly once, "
            "when your work is done, with arguments matching the schema."
        ),
        execute=None,
        strict=strict,
        parameters_schema=schema,
        finish_output_wrapped=wrapped,
    )


def is_finish_tool(tool: Tool | str) -> bool:
    """True for the ``__finish__`` tool (or its name)."""
    return (tool if isinstance(tool, str) else tool.name) == FINISH_TOOL_NAME


def is_sub_agent_tool_name(name: str) -> bool:
    """True for names under which sub-agent calls are stored."""
    return name.startswith(SUBAGENT_TOOL_PREFIX)


def is_companion_tool_name(name: str) -> bool:
    """True for persistent-companion tool names."""
    return name.startswith(COMPANION_TOOL_PREFIX)


def is_client_tool(tool: Tool) -> bool:
    """True for tools the front end executes."""
    return tool.is_client


def is_approval_gated_tool(tool: Tool) -> bool:
    """True for tools with ``require_approval`` set to anything but ``False``."""
    return tool.require_approval is not False


def is_finish_with_tool(tool: Tool) -> bool:
    """True for tools whose call completes the agent."""
    return tool.finish_with


def validation_error_message(tool_name: str, error: ValidationError) -> str:
    """A model-readable description of why a tool's arguments were rejected."""
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in error.errors())
    return f"Invalid arguments for tool '{tool_name}': {problems}"
