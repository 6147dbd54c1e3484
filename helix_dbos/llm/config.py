"""``LLMConfig``: the model settings an agent carries into every LLM step.

It lives with the LLM layer, not with the agent definitions, so that the LLM layer sits below the
agent definitions in the import graph: adapters, cache strategies and the router read an
``LLMConfig`` without depending on agents, hooks or tools (``define_agent`` imports it from here).

A config may name a **chain** of models: ``model`` first, then ``fallbacks`` in order. Each model
has its own :class:`~helix_dbos.llm.retry.RetryPolicy`; :meth:`LLMConfig.model_chain` resolves the
chain to one plain config per model, which is what the adapter calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from helix_dbos.errors import ERROR_CODES
from helix_dbos.llm.retry import RetryPolicy

__all__ = ["PROVIDER_ERROR_CODES", "LLMConfig"]

PROVIDER_ERROR_CODES: frozenset[str] = frozenset(
    code for code in ERROR_CODES if code.startswith("provider_") and code != "provider_fallbacks_exhausted"
)
"""The errors a model of a chain fails over on by default: every provider failure."""


class LLMConfig(BaseModel):
    """Model settings for an agent.

    ``model`` is a LiteLLM model string (``"openai/gpt-4o-mini"``, ``"anthropic/claude-sonnet-4-5"``).
    Credentials come from the provider's usual environment variable unless ``api_key`` is given.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    model: str
    """LiteLLM model string, ``provider/model``."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    provider_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-provider request options, e.g. ``{"openai": {"reasoning_effort": "low"}}``; merged into
    the request for the matching provider."""
    strict_output: bool = False
    """Ask the provider to constrain ``__finish__`` arguments to the output schema (capability-gated)."""
    cache: Sequence[Callable[..., Any]] | Callable[..., Any] | None = None
    """Prompt-cache strategies (``anthropic_cache()``, ``openai_cache()``), applied inside the LLM step."""
    api_base: str | None = None
    """Base URL of an OpenAI-compatible (or other) endpoint."""
    api_key: SecretStr | None = None
    """Explicit API key; otherwise the provider's environment variable is used."""
    timeout_seconds: float = Field(default=120.0, gt=0)
    """Per-request timeout; always passed to the provider (LiteLLM's default is 6000 s)."""
    max_retries: int = Field(default=3, ge=0, le=20)
    """Retries of retryable provider errors (rate limits, overload, timeouts), with backoff; a
    shorthand for ``retry=RetryPolicy(max_attempts=max_retries + 1)`` (give one or the other)."""
    retry: RetryPolicy | None = None
    """How this model is retried (attempts, backoff, jitter, the ``Retry-After`` cap); ``None``:
    ``max_retries`` retries with the default backoff."""
    fallbacks: tuple[str | LLMConfig, ...] = ()
    """Models to try in order when this one fails (see :meth:`model_chain`). A model string takes
    every other setting from this config (same endpoint and key, same retry policy); a full
    ``LLMConfig`` (or a dict of one) brings its own, for another provider or endpoint."""
    fallback_on: frozenset[str] = PROVIDER_ERROR_CODES
    """The error codes that fail over to the next model; any other error ends the call at once.
    Default: every ``provider_*`` code (a 400 or a 401 may well pass on another model). The
    primary config's holds for the whole chain; a fallback config's own is not read."""

    @field_validator("model")
    @classmethod
    def _model_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("model must be a non-empty LiteLLM model string such as 'openai/gpt-4o-mini'")
        return value

    @field_validator("fallbacks", mode="before")
    @classmethod
    def _fallbacks_sequence(cls, value: Any) -> Any:
        if isinstance(value, str | dict | LLMConfig):
            return (value,)  # one fallback given bare
        return value

    @field_validator("fallback_on")
    @classmethod
    def _fallback_on_known(cls, value: frozenset[str]) -> frozenset[str]:
        unknown = sorted(value - ERROR_CODES)
        if unknown:
            raise ValueError(f"fallback_on names unknown error codes {unknown}; see helix_dbos.errors.ErrorCode")
        return value

    @model_validator(mode="after")
    def _one_chain(self) -> LLMConfig:
        if self.retry is not None and "max_retries" in self.model_fields_set:
            raise ValueError("give retry=RetryPolicy(...) or max_retries, not both")
        for fallback in self.fallbacks:
            if isinstance(fallback, str) and not fallback.strip():
                raise ValueError("a fallback model must be a non-empty LiteLLM model string")
            if isinstance(fallback, LLMConfig) and fallback.fallbacks:
                raise ValueError(
                    f"fallback {fallback.model!r} has fallbacks of its own; list every model in one chain instead"
                )
        return self

    def retry_policy(self) -> RetryPolicy:
        """The retry policy of this config's own model (``retry``, else one built from ``max_retries``)."""
        return self.retry if self.retry is not None else RetryPolicy(max_attempts=self.max_retries + 1)

    def model_chain(self) -> list[LLMConfig]:
        """The models to try, in order, each as a config without fallbacks: ``model``, then each fallback.

        A fallback given as a model string is this config with only the model changed.
        """
        primary = self.model_copy(update={"fallbacks": ()})
        chain = [primary]
        for fallback in self.fallbacks:
            if isinstance(fallback, str):
                chain.append(primary.model_copy(update={"model": fallback}))
            else:
                chain.append(fallback)
        return chain
