"""What one LLM step produced: the ``StepResult`` union and normalised stop reasons (seed 000).

Step results are the output of the LLM step, so on the durable runtime they are what DBOS
checkpoints. They are therefore plain JSON-able pydantic models (the error of an
:class:`ErrorStepResult` serialises through :meth:`HelixError.to_dict`) and round-trip through
:data:`StepResultAdapter`; nothing here depends on where a class lives, so moving code never breaks
recovery of a recorded step.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeGuard

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, TypeAdapter

from helix_dbos.errors import HelixError, classify_error
from helix_dbos.messages import ThinkingContent

StopReason = Literal[
    "end_turn", "stop_sequence", "tool_use", "max_tokens", "content_filter", "refusal", "error", "unknown"
]
"""Why the model stopped, normalised across providers."""

_ERROR_STOP_REASONS: frozenset[str] = frozenset({"max_tokens", "content_filter", "refusal", "error", "unknown"})


def is_error_stop_reason(reason: StopReason | None) -> bool:
    """True for stop reasons that mean the step did not end normally."""
    return reason is not None and reason in _ERROR_STOP_REASONS


def is_recoverable_error_stop_reason(reason: StopReason | None) -> bool:
    """True only for ``max_tokens``: a correction message can nudge a structured-output agent to finish."""
    return reason == "max_tokens"


class TokenUsage(BaseModel):
    """Token counts reported by the provider for one step."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    """Input tokens served from the provider's prompt cache (included in ``input_tokens``)."""
    reasoning_tokens: int = 0
    """Output tokens spent on reasoning (included in ``output_tokens``)."""
    cost_usd: float | None = None
    """What the call cost in US dollars, from LiteLLM's local cost map at the time of the call;
    ``None`` when the model is not in the map (or the adapter does not price calls)."""
    model: str | None = None
    """The model that answered, as the adapter called it (``None``: the agent's configured model)."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd,
            model=self.model if self.model == other.model else None,
        )


class ParsedToolCall(BaseModel):
    """A tool call the model requested."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: Any = Field(default_factory=dict)
    """Parsed arguments; ``plan_step_processing`` coerces anything that is not an object to one."""


class ParsedSubAgentCall(BaseModel):
    """A call to a sub-agent (a tool call whose name carries the ``subagent__`` prefix)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    agent_type: str
    input: Any = Field(default_factory=dict)


def _serialize_error(error: BaseException) -> dict[str, Any]:
    return classify_error(error).to_dict()


def _validate_error(value: object) -> BaseException:
    if isinstance(value, BaseException):
        return value
    if isinstance(value, dict):
        return HelixError.from_dict(value)
    return HelixError(str(value))


StepError = Annotated[
    BaseException,
    BeforeValidator(_validate_error),
    PlainSerializer(_serialize_error, return_type=dict[str, Any]),
]
"""An exception that serialises as ``HelixError.to_dict()`` and validates back into a HelixError."""


AttemptOutcome = Literal["answered", "retried", "fell_back", "failed", "aborted"]
"""What followed one model attempt: it answered the step; the same model was tried again; the next
model of the chain was; the step ended in this attempt's error; the run was aborted during it."""


class ModelAttempt(BaseModel):
    """One request to one model within an LLM step, as the step recorded it (a helix-dbos addition).

    A step that retried or failed over records every attempt, in order, so usage, traces and
    anyone reading the run know which models were asked, what each said and how long the step
    waited; the attempt with ``outcome="answered"`` names the model that produced the step.
    """

    model_config = ConfigDict(extra="forbid")

    model: str
    """The model string as configured (``openai/gpt-4o-mini``)."""
    outcome: AttemptOutcome
    error_code: str | None = None
    """The failure's ``HelixError.code`` (``provider_rate_limited``); ``None`` when it answered."""
    status_code: int | None = None
    """The provider's HTTP status, when it sent one."""
    wait_seconds: float = 0.0
    """How long the step waited after this attempt before the next (backoff or ``Retry-After``)."""
    started_at_ms: float = 0.0
    """When the attempt started, in ms since the epoch (places it on a trace)."""
    duration_ms: float = 0.0
    usage: TokenUsage | None = None
    """What the provider billed for this attempt (``None``: it reported nothing, e.g. a 500)."""


class _StepResultBase(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    usage: TokenUsage | None = None
    """Token usage of the step, when the provider reported it (a helix-dbos addition)."""
    failed_attempts_usage: list[TokenUsage] = Field(default_factory=list)
    """Usage of earlier attempts of this same call that the provider billed but the adapter could
    not use and retried (e.g. tool-call JSON that does not parse). Recorded apart from ``usage``,
    as failed attempts: the tokens were spent, but they bought no step (a helix-dbos addition)."""
    model_attempts: list[ModelAttempt] = Field(default_factory=list)
    """Every request of this call, in order, with the model asked and what came of it; empty for a
    step recorded before attempts were, or from an adapter that does not report them."""

    @property
    def answered_by(self) -> str | None:
        """The model whose answer this is (from :attr:`model_attempts`); ``None`` when unknown or failed."""
        answered = [a.model for a in self.model_attempts if a.outcome == "answered"]
        return answered[-1] if answered else None


class TextStepResult(_StepResultBase):
    """A plain text response."""

    type: Literal["text"] = "text"
    content: str
    thinking: ThinkingContent | None = None
    should_stop: bool = False
    """The model indicated it is done (a normal end of turn)."""
    stop_reason: StopReason | None = None


class ToolCallsStepResult(_StepResultBase):
    """One or more tool (and sub-agent) invocations, optionally with text."""

    type: Literal["tool_calls"] = "tool_calls"
    content: str | None = None
    tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    sub_agent_calls: list[ParsedSubAgentCall] = Field(default_factory=list)
    thinking: ThinkingContent | None = None
    stop_reason: StopReason | None = None


class StructuredOutputStepResult(_StepResultBase):
    """Direct structured output, without a ``__finish__`` tool call."""

    type: Literal["structured_output"] = "structured_output"
    output: Any
    stop_reason: StopReason | None = None


class ErrorStepResult(_StepResultBase):
    """The LLM call failed."""

    type: Literal["error"] = "error"
    error: StepError
    should_stop: bool = True
    """Whether the run should terminate (false for an error the loop may retry)."""
    stop_reason: StopReason | None = None


StepResult = Annotated[
    TextStepResult | ToolCallsStepResult | StructuredOutputStepResult | ErrorStepResult,
    Field(discriminator="type"),
]
"""What an LLM step produced, discriminated by ``type``."""

StepResultAdapter: TypeAdapter[StepResult] = TypeAdapter(StepResult)
"""Validates and serialises step results; the LLM step's checkpointed output goes through it."""


def is_error_step(result: object) -> TypeGuard[ErrorStepResult]:
    """True for an error step."""
    return isinstance(result, ErrorStepResult)
