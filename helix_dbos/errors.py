"""Errors: one root, typed codes, and the tree of exceptions helix-dbos raises.

Every error helix-dbos raises is a :class:`HelixError`, so one ``except HelixError`` catches them
all and ``error.code`` tells what went wrong without string matching. The category is derived
from the code's prefix, as in the seeds (``provider_overloaded`` -> ``provider``)::

    HelixError (code, category, retryable, status_code)
    ├── DefinitionError                 validation_error      bad define_agent / define_tool call
    │   └── SubAgentDefinitionError     validation_error      a sub-agent tool over an agent it cannot run
    ├── ConflictingOptionsError         validation_error      two options that name the same thing, both given
    ├── AgentAlreadyRunningError        state_already_running a run is in flight for the session
    ├── DoubleTextPolicyError           validation_error      an unknown double-texting policy
    ├── AgentNotResumableError          state_not_resumable
    ├── AgentMismatchError              state_agent_mismatch  the session belongs to another agent
    ├── SessionNotFoundError            state_session_not_found
    ├── CheckpointNotFoundError         state_checkpoint_not_found  not a checkpoint of that session
    ├── ForkConflictError               state_conflict        the fork's new session id is taken by another session
    ├── ForkEditError                   validation_error      a fork's edits contradict each other or the checkpoint
    ├── AGUIInputError                  validation_error      an AG-UI RunAgentInput the service cannot act on
    ├── RunIdConflictError              state_conflict        a new run's id is taken by a run already recorded
    ├── InvalidTextError                validation_invalid_text  NUL or a lone surrogate in client input
    ├── SessionAlreadyExistsError       state_concurrency_conflict  lost the create_session race
    ├── DatabaseNotMigratedError        framework_internal_error    run `helix-dbos db upgrade`
    ├── RunNotFinishedError             transport_error       a result wait timed out (the run goes on)
    ├── StaleStateError                 state_concurrency_conflict  lost a compare-and-set race
    ├── ExecutorSupersededError         state_concurrency_conflict  graceful hand-over, not a failure
    ├── ExecutorIdInUseError            state_concurrency_conflict  a live process holds that executor id
    ├── LockNotAcquiredError            state_concurrency_conflict  a lock manager's resource is held
    ├── LockLostError                   state_concurrency_conflict  a lock expired before the work ended
    ├── FencingTokenMismatchError       state_concurrency_conflict  a newer lock holder took over
    ├── StreamTruncatedError            transport_error
    ├── StateProjectionError            state_conflict        a state patch that does not apply to the projected state
    ├── DatabaseUnavailableError        transport_error       the database stayed down past the retry bound
    ├── PendingToolCallNotFoundError    state_tool_call_not_found
    ├── ToolCallAlreadyAnsweredError    state_concurrency_conflict  a tool call takes one submission
    ├── WakeUpRefusedError              framework_internal_error    internal: a submission falls back to DBOS.send
    ├── AgentNotFoundError              state_agent_not_found  the service does not serve that agent
    ├── ScheduleNotFoundError           state_schedule_not_found  no agent schedule of that name
    ├── ScheduleExistsError             state_conflict        an agent schedule of that name exists
    ├── InvalidScheduleError            validation_invalid_schedule  a cron, time zone or backfill window refused
    ├── EmbeddingExecutorClosedError    framework_internal_error   a memory saved after shutdown()
    ├── ServiceAuthConfigError          validation_error      a service built without an auth decision
    ├── SkillNotFoundError              tool_input_invalid    a skill tool named an unknown skill
    ├── SkillPathError                  tool_input_invalid    a skill file path refused (absolute, .., symlink out)
    ├── ModelFallbacksExhaustedError    provider_fallbacks_exhausted  every model of an LLMConfig chain failed
    ├── MCPToolNameError                validation_error      an MCP server's tool names clash or cannot be tool names
    ├── MCPServerError                  tool_execution_failed, tool_timeout  an MCP server down, failing or too slow
    │                                   (a call's failure is the tool error the model sees)
    ├── GuardrailTrippedError           guardrail_tripped     a guardrail stopped the run (``guard``, ``reason``)
    ├── TenantBudgetExceededError       tenant_budget_exceeded  the tenant's spend reached its TenantBudget
    ├── RemoteSubAgentClientToolUnsupportedError  framework_not_supported  a remote sub-agent waits for a
    │                                   client-executed tool (failure_reason ``client-tool-unsupported``)
    └── ServiceResponseError            the service's code    ``helix_dbos.client``: a helix-dbos service
        │                                                     answered with an error (``status``, ``service_code``)
        ├── ServiceUnauthorizedError    401                   send a valid bearer token
        ├── ServiceNotFoundError        404                   no such session, agent, tool call, checkpoint
        ├── ServiceConflictError        409                   the session's state does not allow it now
        ├── ServiceRequestError         400, 413, 422, other 4xx  the request itself is wrong
        └── ServiceUnavailableError     408, 5xx, no answer   retryable: the service (or its database) is away

    ServiceError (code)                 errors only the HTTP layer has (not HelixErrors: no library
    └── ResultTimeoutError              transport_result_timeout    call raises them)

    ProcessExiting (BaseException)      the interpreter is exiting: the run stops unrecorded and is
                                        recovered at the next start (never caught by ``except Exception``)

Provider failures surface as plain ``HelixError`` with a ``provider_*`` code (see
``helix_dbos.llm.litellm.errors`` for the mapping from LiteLLM exceptions).

Turning any exception into a :class:`HelixError` (:func:`classify_error`) and deciding what of an
error a client may see (:func:`public_error_message`) is policy, not the tree: it lives in
:mod:`helix_dbos.error_policy`, and its names stay importable from here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict, get_args

ErrorCategory = Literal["provider", "tool", "state", "transport", "validation", "framework"]

ErrorCode = Literal[
    "provider_overloaded",
    "provider_rate_limited",
    "provider_auth_error",
    "provider_content_filtered",
    "provider_refused",
    "provider_timeout",
    "provider_invalid_request",
    "provider_context_window_exceeded",
    "provider_error",
    "provider_fallbacks_exhausted",
    "tool_input_invalid",
    "tool_execution_failed",
    "tool_not_found",
    "tool_timeout",
    "state_concurrency_conflict",
    "state_session_not_found",
    "state_agent_not_found",
    "state_tool_call_not_found",
    "state_checkpoint_not_found",
    "state_already_running",
    "state_not_resumable",
    "state_conflict",
    "state_agent_mismatch",
    "state_schedule_not_found",
    "transport_error",
    "validation_error",
    "validation_invalid_text",
    "validation_invalid_schedule",
    "framework_internal_error",
    "framework_not_supported",
    "framework_cancelled",
    "guardrail_tripped",
    "tenant_budget_exceeded",
]

ERROR_CODES: frozenset[str] = frozenset(get_args(ErrorCode))

_DEFAULT_RETRYABLE: frozenset[str] = frozenset(
    {"provider_overloaded", "provider_rate_limited", "provider_timeout", "provider_error", "transport_error"}
)


def category_of(code: ErrorCode) -> ErrorCategory:
    """Derive the category from the code prefix (``tool_not_found`` -> ``tool``)."""
    prefix = code.split("_", 1)[0]
    if prefix in ("provider", "tool", "state", "transport", "validation", "framework"):
        return prefix  # type: ignore[return-value]
    return "framework"


class HelixErrorOptions(TypedDict, total=False):
    """The keyword arguments of :class:`HelixError` (the seeds' ``HelixErrorOptions`` object).

    ``HelixError(message, **options)``: Python takes the seeds' options object as keywords.
    """

    code: ErrorCode
    retryable: bool | None
    status_code: int | None
    cause: BaseException | None
    retry_after_seconds: float | None


class HelixError(Exception):
    """The root of every helix-dbos error: a message plus a typed, serialisable code.

    ``retryable`` says whether trying the same operation again may succeed (a rate limit may; an
    authentication failure will not); the LLM adapter's retry loop reads it.
    """

    code: ErrorCode
    category: ErrorCategory
    retryable: bool
    status_code: int | None

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode = "framework_internal_error",
        retryable: bool | None = None,
        status_code: int | None = None,
        cause: BaseException | None = None,
        retry_after_seconds: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.category = category_of(code)
        self.retryable = code in _DEFAULT_RETRYABLE if retryable is None else retryable
        self.status_code = status_code
        self.retry_after_seconds = retry_after_seconds
        if cause is not None:
            self.__cause__ = cause

    @staticmethod
    def is_instance(value: object) -> bool:
        """Duck-typed check, for errors that crossed a process boundary as plain data."""
        return isinstance(value, HelixError)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form, used where an error is persisted (step outputs, stream chunks)."""
        return {
            "message": self.message,
            "code": self.code,
            "category": self.category,
            "retryable": self.retryable,
            "status_code": self.status_code,
            "error_type": type(self).__name__,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HelixError:
        """Rebuild a :class:`HelixError` from :meth:`to_dict` output (the subclass is not restored)."""
        code = data.get("code", "framework_internal_error")
        if code not in ERROR_CODES:
            code = "framework_internal_error"
        return HelixError(
            str(data.get("message", "")),
            code=code,
            retryable=bool(data.get("retryable", False)),
            status_code=data.get("status_code"),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # DBOS pickles exceptions raised by steps and workflows and unpickles them on recovery.
        # The default reduction calls ``type(self)(*self.args)``, which fails for subclasses whose
        # constructors take other arguments (``StaleStateError(session_id, expected, actual)``);
        # rebuild without calling ``__init__`` and restore the attributes from ``__dict__``.
        return (_rebuild_error, (type(self), self.args), self.__dict__)


def _rebuild_error(cls: type[HelixError], args: tuple[Any, ...]) -> HelixError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    return error


class DefinitionError(HelixError, ValueError):
    """An agent or tool definition is invalid; raised by ``define_agent`` / ``define_tool``."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="validation_error", retryable=False)


class SubAgentDefinitionError(DefinitionError):
    """``create_sub_agent_tool`` refused its agent.

    A sub-agent's result is its validated output, so the agent needs an ``output_schema``; and an
    ephemeral child cannot wait for a human (nobody can answer it: clients watch the parent, which
    is itself waiting on the child), so it may not have client-executed or approval-gated tools.
    """

    def __init__(self, agent_name: str, problem: str) -> None:
        super().__init__(f"create_sub_agent_tool({agent_name!r}): {problem}")
        self.agent_name = agent_name


class ConflictingOptionsError(HelixError, ValueError):
    """A call was given two options that mean the same thing (e.g. ``hooks=`` and ``hook_manager=``).

    Raised before anything is recorded: picking one silently would drop hooks the caller expects.
    """

    def __init__(self, first: str, second: str) -> None:
        super().__init__(f"give {first}= or {second}=, not both: they name the same option", code="validation_error")
        self.options = (first, second)


class AgentAlreadyRunningError(HelixError):
    """A run is already in flight for this session: sessions are single-writer."""

    def __init__(self, session_id: str, current_status: str, hint: str = "") -> None:
        super().__init__(
            f"Session {session_id!r} already has a run in flight (status {current_status!r}); "
            f"{hint or 'wait for it to finish, or interrupt it first'}",
            code="state_already_running",
            retryable=False,
        )
        self.session_id, self.current_status = session_id, current_status


class DoubleTextPolicyError(HelixError, ValueError):
    """A ``double_text`` value that names no policy (reject, enqueue, interrupt, rollback, steer)."""

    def __init__(self, value: object) -> None:
        super().__init__(
            f"double_text must be one of 'reject', 'enqueue', 'interrupt', 'rollback', 'steer', got {value!r}",
            code="validation_error",
            retryable=False,
        )
        self.value = value


class AgentNotResumableError(HelixError):
    """The session is in a state that cannot be resumed (for example ``failed`` after an abort)."""

    def __init__(self, session_id: str, current_status: str, reason: str | None = None) -> None:
        detail = f": {reason}" if reason else ""
        super().__init__(
            f"Session {session_id!r} cannot be resumed from status {current_status!r}{detail}",
            code="state_not_resumable",
            retryable=False,
        )
        self.session_id = session_id
        self.current_status = current_status


class AgentMismatchError(HelixError):
    """A run was asked for with an agent other than the one the session belongs to.

    A session is one agent's conversation: its transcript pairs calls of that agent's tools, and
    a parked answer is applied by that agent. Nothing is written when this is raised. The code
    ``state_agent_mismatch`` is a helix-dbos addition to the seeds' table (HTTP 409).
    """

    def __init__(self, session_id: str, session_agent: str, requested_agent: str) -> None:
        super().__init__(
            f"Session {session_id!r} belongs to agent {session_agent!r}, not {requested_agent!r}; "
            "start a new session for another agent",
            code="state_agent_mismatch",
            retryable=False,
        )
        self.session_id = session_id
        self.session_agent = session_agent
        self.requested_agent = requested_agent


class SessionNotFoundError(HelixError):
    """No session with this id exists in the store."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session {session_id!r} does not exist", code="state_session_not_found")
        self.session_id = session_id


class CheckpointNotFoundError(HelixError):
    """The session has no checkpoint with this id (or none at all, when no id was given)."""

    def __init__(self, session_id: str, checkpoint_id: str | None) -> None:
        what = f"Checkpoint {checkpoint_id!r} does not exist in" if checkpoint_id else "There is no checkpoint in"
        super().__init__(f"{what} session {session_id!r}", code="state_checkpoint_not_found")
        self.session_id = session_id


class ForkConflictError(HelixError):
    """``fork(..., new_session_id=...)`` names a session that exists and is not that same fork."""

    def __init__(self, new_session_id: str, detail: str) -> None:
        super().__init__(f"Cannot fork into session {new_session_id!r}: {detail}", code="state_conflict")


class ForkEditError(HelixError, ValueError):
    """A fork's edits cannot apply: state and state_patch both given, or no user message to replace."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"Cannot edit the fork: {detail}", code="validation_error", retryable=False)


class AGUIInputError(HelixError, ValueError):
    """An AG-UI ``RunAgentInput`` that is well-formed JSON but asks nothing the service can do.

    No user text and no tool results at the end of ``messages``, a tool message without its
    ``toolCallId``: nothing is written, and the AG-UI route answers a run whose only events are
    ``RUN_STARTED`` and ``RUN_ERROR`` with this code (a body its schema refuses is a 422).
    """

    def __init__(self, detail: str) -> None:
        super().__init__(f"Cannot run this RunAgentInput: {detail}", code="validation_error", retryable=False)


class RunIdConflictError(HelixError):
    """A run was to be recorded under an id another run already has; nothing was written.

    Run ids derive from session ids, turns and tool calls (``helix_dbos.runtime.ids``), so they
    meet only when ids are chosen to (a session named like another session's derived id).
    """

    def __init__(self, run_id: str, session_id: str) -> None:
        super().__init__(
            f"Cannot start a run of session {session_id!r}: the run id {run_id!r} is taken by a run "
            "already recorded (a session id chosen like another session's derived ids?)",
            code="state_conflict",
            retryable=False,
        )
        self.run_id = run_id
        self.session_id = session_id


class InvalidTextError(HelixError, ValueError):
    """Client-supplied text holds NUL (U+0000) or a lone surrogate; refused before anything is written.

    ``location`` is the path to the offending string (``("input", "message", 0, "content")``); see
    :mod:`helix_dbos.validation`.
    """

    def __init__(self, location: tuple[str | int, ...], problem: str) -> None:
        shown = printable_location(location)
        where = ".".join(str(part) for part in shown) or "input"
        super().__init__(f"Invalid text in {where}: {problem}", code="validation_invalid_text", retryable=False)
        self.location = location
        self.problem = problem


def printable_location(location: tuple[str | int, ...]) -> tuple[str | int, ...]:
    r"""``location`` with NUL and surrogates in keys escaped (``k\u0000``), safe to show and encode."""
    return tuple(
        _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", part) if isinstance(part, str) else part for part in location
    )


_UNSAFE = re.compile("[\x00\ud800-\udfff]")


class SessionAlreadyExistsError(HelixError):
    """``create_session`` lost the race: exactly one concurrent creator wins."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session {session_id!r} already exists", code="state_concurrency_conflict")
        self.session_id = session_id


class DatabaseNotMigratedError(HelixError):
    """The store's tables are missing or older than this version of helix-dbos expects."""

    def __init__(self, url: str, detail: str) -> None:
        super().__init__(
            f"The helix-dbos tables in {url} are not up to date ({detail}). "
            f"Run: helix-dbos db upgrade --database-url '{url}'",
            code="framework_internal_error",
            retryable=False,
        )
        self.url = url


class RunNotFinishedError(HelixError):
    """Waiting for a run's result timed out; the run goes on (ask again to keep waiting)."""

    def __init__(self, run_id: str, timeout_seconds: float) -> None:
        super().__init__(
            f"Run {run_id} did not finish within {timeout_seconds:g} s; it is still running",
            code="transport_error",
            retryable=True,
        )
        self.run_id = run_id
        self.timeout_seconds = timeout_seconds


class StaleStateError(HelixError):
    """A compare-and-set lost the race: the stored version moved on since it was read."""

    def __init__(self, session_id: str, expected_version: int, actual_version: int) -> None:
        super().__init__(
            f"Session {session_id!r} changed concurrently (expected version {expected_version}, "
            f"found {actual_version})",
            code="state_concurrency_conflict",
            retryable=True,
        )
        self.session_id = session_id
        self.expected_version = expected_version
        self.actual_version = actual_version


class ExecutorSupersededError(HelixError):
    """Another executor took over the session; a graceful shutdown signal, not a failure."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Executor for session {session_id!r} was superseded", code="state_concurrency_conflict")
        self.session_id = session_id


class ExecutorIdInUseError(HelixError):
    """A live process holds the executor id this one was told to use (``launch``, ``recover``).

    Two live processes with one executor id would each recover the other's runs in flight and run
    them twice at once, so the second one refuses to start (or to recover) rather than guess.
    """

    def __init__(self, executor_id: str, holder: str, hint: str) -> None:
        super().__init__(
            f"executor id {executor_id!r} is in use by a live process ({holder}): {hint}",
            code="state_concurrency_conflict",
            retryable=False,
        )
        self.executor_id = executor_id
        self.holder = holder


class LockNotAcquiredError(HelixError):
    """A lock manager could not take ``resource``: another holder has it (and ``wait`` ran out)."""

    def __init__(self, resource: str, held_by: str) -> None:
        super().__init__(f"Lock {resource!r} is held by {held_by!r}", code="state_concurrency_conflict", retryable=True)
        self.resource = resource
        self.held_by = held_by


class LockLostError(HelixError):
    """A held lock expired or was taken over before its holder finished (``with_lock``'s heartbeat)."""

    def __init__(self, resource: str, fencing_token: int) -> None:
        super().__init__(
            f"Lock {resource!r} (fencing token {fencing_token}) was lost before the work finished",
            code="state_concurrency_conflict",
        )
        self.resource = resource
        self.fencing_token = fencing_token


class FencingTokenMismatchError(HelixError):
    """The current holder of a lock has another fencing token: a newer holder took over (split brain).

    ``session_id`` is the locked resource (the seeds lock sessions); ``actual_token`` is ``None`` when
    nobody holds the lock any more.
    """

    def __init__(self, session_id: str, expected_token: int, actual_token: int | None = None) -> None:
        super().__init__(
            f"Fencing token of {session_id!r} is {actual_token}, not {expected_token}: another holder took over",
            code="state_concurrency_conflict",
        )
        self.session_id = session_id
        self.expected_token = expected_token
        self.actual_token = actual_token


class StreamTruncatedError(HelixError):
    """A reader's cursor is past a truncation point: chunks it had not read were removed.

    Re-attach with a resumable reader from ``last_valid_sequence`` to continue. ``at_sequence`` is
    the stream's sequence high-water mark at the cleanup (the seeds' ``atSequence``), when known.
    """

    def __init__(
        self, stream_id: str, last_valid_sequence: int, truncated_at_step: int, at_sequence: int | None = None
    ) -> None:
        super().__init__(
            f"Stream {stream_id!r} was truncated at step {truncated_at_step} after sequence {last_valid_sequence}",
            code="transport_error",
            retryable=False,
        )
        self.stream_id = stream_id
        self.last_valid_sequence = last_valid_sequence
        self.truncated_at_step = truncated_at_step
        self.at_sequence = at_sequence


class StateProjectionError(HelixError):
    """A ``state_patch`` from a stream does not apply to the state a projector holds.

    The projector missed chunks (it started mid-stream without the state they build on) or the
    stream was rebuilt under it; fetch the current state and ``reset`` the projector to it.
    """

    def __init__(self, message: str, *, sequence: int | None = None) -> None:
        super().__init__(message, code="state_conflict", retryable=False)
        self.sequence = sequence


class PendingToolCallNotFoundError(HelixError):
    """No pending tool call with this id exists in the session."""

    def __init__(self, session_id: str, tool_call_id: str) -> None:
        super().__init__(
            f"Session {session_id!r} has no pending tool call {tool_call_id!r}",
            code="state_tool_call_not_found",
            retryable=False,
        )
        self.session_id = session_id
        self.tool_call_id = tool_call_id


class ToolCallAlreadyAnsweredError(HelixError):
    """The tool call was already answered (or expired); submissions are exactly-once."""

    def __init__(self, session_id: str, tool_call_id: str, status: str) -> None:
        super().__init__(
            f"Tool call {tool_call_id!r} of session {session_id!r} is no longer pending (status {status!r}); "
            "a tool call accepts exactly one submission",
            code="state_concurrency_conflict",
            retryable=False,
        )
        self.session_id = session_id
        self.tool_call_id = tool_call_id
        self.status = status


class WakeUpRefusedError(HelixError):
    """The database refused a hot run's wake-up inside the submission's transaction (internal).

    Raised through the submission's transaction so that it rolls back whole, answer included; the
    executor then records the answer again on its own and wakes the run with ``DBOS.send``
    (:mod:`helix_dbos.runtime.wake`). It never reaches a caller.
    """

    def __init__(self, workflow_id: str, cause: BaseException) -> None:
        super().__init__(
            f"The wake-up of run {workflow_id!r} could not be written in the submission's transaction",
            code="framework_internal_error",
            retryable=False,
            cause=cause,
        )
        self.workflow_id = workflow_id


class DatabaseUnavailableError(HelixError):
    """The database stayed unreachable (or kept failing transiently) for the whole retry bound.

    A ``transport_error``, retryable: nothing was written by the failed operation, and a run that
    failed with it can be continued with ``retry()`` once the database is back. The message is safe
    to show a client; the driver's error (host, port, SQL) is ``__cause__`` and went to the log.
    """

    def __init__(self, operation: str, elapsed_seconds: float, attempts: int, cause: BaseException) -> None:
        super().__init__(
            f"The database was unavailable for {elapsed_seconds:.0f} s ({attempts} attempts at {operation}); "
            f"nothing was written. Retry once it is back (a run: retry()); the bound is HELIX_DB_RETRY_SECONDS.",
            code="transport_error",
            retryable=True,
            cause=cause,
        )
        self.operation = operation
        self.elapsed_seconds = elapsed_seconds
        self.attempts = attempts


class AgentNotFoundError(HelixError):
    """The request names an agent this server does not serve (HTTP 404, code ``state_agent_not_found``)."""

    def __init__(self, name: str, served: Sequence[str]) -> None:
        super().__init__(
            f"Agent {name!r} is not registered on this server (it serves: {', '.join(served) or 'no agents'})",
            code="state_agent_not_found",
            retryable=False,
        )
        self.name = name


class ScheduleNotFoundError(HelixError):
    """No agent schedule has this name (HTTP 404, code ``state_schedule_not_found``)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Schedule {name!r} does not exist", code="state_schedule_not_found", retryable=False)
        self.name = name


class ScheduleExistsError(HelixError):
    """An agent schedule of this name exists already (HTTP 409, code ``state_conflict``); delete it first."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"Schedule {name!r} exists already; delete it first to replace it", code="state_conflict", retryable=False
        )
        self.name = name


class InvalidScheduleError(HelixError, ValueError):
    """A schedule DBOS would not run, or a backfill window refused (HTTP 422, ``validation_invalid_schedule``).

    ``field`` names what is wrong: ``cron``, ``timezone``, ``start`` or ``end``.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, code="validation_invalid_schedule", retryable=False)
        self.field = field


class EmbeddingExecutorClosedError(HelixError):
    """A memory saved after the embedding executor's ``shutdown()``: refused, not left ``pending`` forever."""

    def __init__(self) -> None:
        super().__init__("the embedding executor is shut down; save memories before shutdown()", retryable=False)


class ServiceAuthConfigError(HelixError, ValueError):
    """The service was built without an authentication decision (or with contradictory ones)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="validation_error", retryable=False)


class SkillNotFoundError(HelixError, LookupError):
    """A skill tool named a skill the agent's provider does not have (the model sees the message)."""

    def __init__(self, name: str, available: list[str] | None = None) -> None:
        known = f"; available skills: {', '.join(available)}" if available else ""
        super().__init__(f"Unknown skill {name!r}{known}", code="tool_input_invalid", retryable=False)
        self.name = name


class SkillPathError(HelixError, ValueError):
    """``read_skill_file`` refused a path: absolute, with ``..``, or resolving outside the skill's folder."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"Refused skill file path {path!r}: {problem}", code="tool_input_invalid", retryable=False)
        self.path = path


class ModelFallbacksExhaustedError(HelixError):
    """Every model of an ``LLMConfig`` chain (``model`` plus ``fallbacks``) that was tried failed.

    The last one tried either failed over with no model left, or failed in a way that ends the call.
    ``failures`` holds one ``(model, code, status_code, attempts)`` per model tried, in order; the
    message lists them. Only models, codes and statuses: a provider's own message may name hosts or
    echo request content, so it stays in the logs. ``retryable`` is the last model's. The code
    ``provider_fallbacks_exhausted`` is a helix-dbos addition to the seeds' table.
    """

    def __init__(self, failures: Sequence[tuple[str, str, int | None, int]], *, retryable: bool) -> None:
        parts = [
            f"{model}: {code}{f' ({status})' if status is not None else ''} after {n} attempt{'s' if n != 1 else ''}"
            for model, code, status, n in failures
        ]
        super().__init__(
            f"All {len(failures)} models of the chain failed: " + "; ".join(parts),
            code="provider_fallbacks_exhausted",
            retryable=retryable,
        )
        self.failures = list(failures)


class MCPToolNameError(DefinitionError):
    """An MCP server's tools cannot be exposed under the names they would get: a clash or an invalid name.

    Raised while a run sets up its tools (the run fails with this message): the names are only
    known once the server has been asked. Set the server's ``tool_prefix`` to tell them apart.
    """


class MCPServerError(HelixError):
    """An MCP server could not be reached, answered with an error, or took longer than its limit.

    Inside a tool call this is the tool error the model sees (the run goes on); ``server`` names
    the server's config.
    """

    def __init__(self, server: str, problem: str, *, timed_out: bool = False) -> None:
        super().__init__(
            f"MCP server {server!r}: {problem}",
            code="tool_timeout" if timed_out else "tool_execution_failed",
            retryable=True,
        )
        self.server = server


class TenantBudgetExceededError(HelixError):
    """A tenant asked for a new run after its spend reached its :class:`~helix_dbos.TenantBudget`.

    Nothing was written. ``retryable`` when the budget has a period (the spend falls out of the
    window with time), not for an all-time cap.
    """

    def __init__(self, tenant: str, spent: str, limit: str, *, periodic: bool) -> None:
        window = "in its budget period" if periodic else "in total"
        super().__init__(
            f"Tenant {tenant!r} has spent {spent} {window}, reaching its limit of {limit}: no new runs until it drops",
            code="tenant_budget_exceeded",
            retryable=periodic,
        )
        self.tenant = tenant


class GuardrailTrippedError(HelixError):
    """A guardrail tripped and its author chose to fail the run (:mod:`helix_dbos.guardrails`).

    The run's error (``AgentResult.error``, the stream's ``error`` chunk, the run's span) is this
    error's message, which names the guard and its reason; its code is ``guardrail_tripped``.
    """

    def __init__(self, guard: str, reason: str) -> None:
        super().__init__(f"guardrail_tripped: guardrail {guard!r} tripped: {reason}", code="guardrail_tripped")
        self.guard = guard
        self.reason = reason


class RemoteSubAgentClientToolUnsupportedError(HelixError):
    """A remote sub-agent's run waits for a client-executed tool: nobody can answer it across HTTP.

    The browser-submitted result has no route to the remote service, so the delegation fails at
    once (the seeds' ``failureReason: 'client-tool-unsupported'``) instead of waiting forever.
    """

    failure_reason = "client-tool-unsupported"

    def __init__(self, agent_name: str, remote_session_id: str) -> None:
        super().__init__(
            f"Remote sub-agent {agent_name!r} (session {remote_session_id!r}) waits for a client-executed tool, "
            "which a remote sub-agent cannot use: the client's answer has no route to the remote service",
            code="framework_not_supported",
            retryable=False,
        )
        self.agent_name = agent_name
        self.remote_session_id = remote_session_id


class ServiceResponseError(HelixError):
    """A helix-dbos service answered a :mod:`helix_dbos.client` request with an error (or not at all).

    ``status`` is the HTTP status (0: no answer), ``service_code`` the service's own ``error.code``
    (``unauthenticated``, ``state_session_not_found``, ...); ``code`` is that code when it is one of
    the library's :data:`ErrorCode` values, else ``transport_error``. Branch on the subclass or on
    ``service_code``, never on the message.
    """

    def __init__(self, message: str, *, status: int, service_code: str, retryable: bool | None = None) -> None:
        code: ErrorCode = service_code if service_code in ERROR_CODES else "transport_error"  # type: ignore[assignment]
        if retryable is None:  # by status, not by code: a 401 mapped to ``transport_error`` is not retryable
            retryable = status == 0 or status == 408 or status >= 500
        super().__init__(message, code=code, retryable=retryable, status_code=status or None)
        self.status = status
        self.service_code = service_code


class ServiceUnauthorizedError(ServiceResponseError):
    """401: the service refused the credentials (send ``Authorization: Bearer <token>``)."""


class ServiceNotFoundError(ServiceResponseError):
    """404: the session, agent, tool call or checkpoint the request names does not exist there."""


class ServiceConflictError(ServiceResponseError):
    """409: the session's state does not allow the request now (already running, not resumable, ...)."""


class ServiceRequestError(ServiceResponseError):
    """400, 413, 422 and other 4xx: the request itself is wrong; sending it again will not help."""


class ServiceUnavailableError(ServiceResponseError):
    """408, 5xx, or no answer at all (connection refused, reset, timed out): try again later."""


class ServiceError(Exception):
    """An error only the HTTP layer has (its ``code`` is one of :data:`HTTP_ERROR_CODES`)."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable


class ResultTimeoutError(ServiceError):
    """The run did not finish within the wait the client asked for (HTTP 408); ask again to keep waiting."""

    def __init__(self, session_id: str, run_id: str, timeout_seconds: float) -> None:
        super().__init__(
            "transport_result_timeout",
            f"Run {run_id!r} of session {session_id!r} did not finish within {timeout_seconds:g} s; "
            "it is still going: ask again to keep waiting",
            retryable=True,
        )


class ProcessExiting(BaseException):
    """The process is exiting: this run stops here, unrecorded, and is recovered at the next start."""


class RunParked(BaseException):
    """The run's workflow stops here, unrecorded and still ``PENDING``, to go on when DBOS resumes it.

    A run whose model call waits long for a provider's admission parks
    (:mod:`helix_dbos.runtime.admission`): its thread leaves the workflow, which DBOS neither
    records as failed nor as done (a ``BaseException``, like :class:`ProcessExiting`), and it is
    resumed once admitted; the resumed execution replays the recorded steps and goes on from the
    wait. A caller waiting on the run's local future waits on its outcome instead.
    """


# -- the policy, re-exported ---------------------------------------------------------------------------
# Defined in helix_dbos.error_policy, which imports this module (it builds and reads HelixErrors), so
# the names are resolved on first use rather than imported here: either module may be imported first.
_POLICY_NAMES = frozenset(
    {"DatabaseErrorKind", "classify_error", "database_error_kind", "ensure_error", "extract_error_message"}
    | {"public_error_message"}
)

if TYPE_CHECKING:
    from helix_dbos.error_policy import DatabaseErrorKind as DatabaseErrorKind
    from helix_dbos.error_policy import classify_error as classify_error
    from helix_dbos.error_policy import database_error_kind as database_error_kind
    from helix_dbos.error_policy import ensure_error as ensure_error
    from helix_dbos.error_policy import extract_error_message as extract_error_message
    from helix_dbos.error_policy import public_error_message as public_error_message


def __getattr__(name: str) -> Any:
    """The error policy's names, kept importable from ``helix_dbos.errors`` (where they used to live)."""
    if name in _POLICY_NAMES:
        from helix_dbos import error_policy

        return getattr(error_policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
