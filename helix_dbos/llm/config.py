"""``LLMConfig``: the model settings an agent carries into every LLM step.

It lives with the LLM layer, not with the agent definitions, so that the LLM layer sits below the
agent definitions in the import graph: adapters, cache strategies and the router read an
``LLMConfig`` without depending on agents, hooks or tools (``define_agent`` imports it from here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

__all__ = ["LLMConfig"]


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
    """Retries of retryable provider errors (rate limits, overload, timeouts), with backoff."""

    @field_validator("model")
    @classmethod
    def _model_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("model must be a non-empty LiteLLM model string such as 'openai/gpt-4o-mini'")
        return value
