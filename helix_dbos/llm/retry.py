"""How a model call is retried and when it fails over to the next model: pure policy, no I/O.

The adapter asks two questions after every failed attempt, and both answers live here so they can
be tested without a provider:

- :func:`next_move`: retry the same model, fail over to the next model of the chain, or fail;
- :func:`retry_delay_seconds`: how long to wait before the retry.

The rules, by error (``helix_dbos.llm.litellm.errors`` turns a provider failure into a code):

- **retryable** (``provider_error`` 5xx and connection, ``provider_timeout``, ``provider_overloaded``,
  ``provider_rate_limited``): retried on the same model up to ``RetryPolicy.max_attempts`` with
  backoff (or the server's ``Retry-After``, capped), then failed over;
- **not retryable** (400-class, ``provider_auth_error`` 401/403, ``provider_content_filtered``, a
  context window exceeded): never sent to the same model again. Another model may take it (a larger
  window, another provider's key or policy), so it fails over at once, or the call fails;
- a code outside the config's ``fallback_on`` fails the call instead of failing over, and an abort
  (``framework_cancelled``) or an error that is not the provider's always does.

LiteLLM's own retries are off (every request carries ``num_retries=0``) and its own fallbacks are
never asked for (``provider_options`` may not set them), so these are the only retries there are:
they cannot multiply.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from helix_dbos.errors import HelixError

__all__ = ["DEFAULT_RETRY_POLICY", "Move", "RetryPolicy", "next_move", "retry_delay_seconds"]

Move = Literal["retry", "fall_back", "fail"]
"""What the adapter does after a failed attempt."""


class RetryPolicy(BaseModel):
    """Retries of one model of a chain: how many attempts, and how long to wait between them.

    The wait before retry *n* (from 1) is ``min(max_backoff_seconds, initial_backoff_seconds *
    2**(n-1))``, of which the fraction ``jitter`` is random (so runs throttled together do not retry
    in lockstep). A server's ``Retry-After`` (seconds or an HTTP date) replaces it, capped at
    ``max_retry_after_seconds``: a step should not sleep for minutes while it holds a worker.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(default=4, ge=1, le=21)
    """Attempts on this model, the first included (1: never retried)."""
    initial_backoff_seconds: float = Field(default=0.5, ge=0.0)
    """The wait before the first retry (before jitter)."""
    max_backoff_seconds: float = Field(default=20.0, ge=0.0)
    """The longest backoff wait, however many retries."""
    jitter: float = Field(default=0.5, ge=0.0, le=1.0)
    """The random share of each backoff wait (0: exact waits; 0.5: "equal jitter")."""
    max_retry_after_seconds: float = Field(default=60.0, ge=0.0)
    """A server's ``Retry-After`` longer than this is waited only this long."""

    @model_validator(mode="after")
    def _backoff_bounds(self) -> RetryPolicy:
        if self.max_backoff_seconds < self.initial_backoff_seconds:
            raise ValueError("max_backoff_seconds must be at least initial_backoff_seconds")
        return self


DEFAULT_RETRY_POLICY = RetryPolicy()
"""Four attempts, backoff from 0.5 s to 20 s with equal jitter, ``Retry-After`` capped at 60 s."""


def next_move(
    error: HelixError,
    *,
    attempts_on_model: int,
    policy: RetryPolicy,
    has_next_model: bool,
    fallback_on: frozenset[str],
) -> Move:
    """After attempt number ``attempts_on_model`` (from 1) of a model failed with ``error``: what now."""
    if error.category != "provider":
        return "fail"  # an abort, a bug, a broken callback: no model would do better
    if error.retryable and attempts_on_model < policy.max_attempts:
        return "retry"
    if has_next_model and error.code in fallback_on:
        return "fall_back"
    return "fail"


def retry_delay_seconds(
    attempt: int,
    error: HelixError,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    *,
    rng: Callable[[], float] = random.random,
) -> float:
    """How long to wait before retry number ``attempt + 1`` (``attempt`` counts from 0).

    The server's ``Retry-After`` wins when present (capped); otherwise exponential backoff with
    ``policy.jitter`` of it random.
    """
    if error.retry_after_seconds is not None:
        return min(max(0.0, error.retry_after_seconds), policy.max_retry_after_seconds)
    backoff = min(policy.max_backoff_seconds, policy.initial_backoff_seconds * (2.0**attempt))
    return backoff * (1.0 - policy.jitter) + rng() * backoff * policy.jitter
