"""The pure parts of model chains: ``LLMConfig.model_chain``, ``RetryPolicy`` waits and ``next_move``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from helix_dbos.errors import HelixError
from helix_dbos.llm.config import PROVIDER_ERROR_CODES, LLMConfig
from helix_dbos.llm.retry import RetryPolicy, next_move, retry_delay_seconds
from helix_dbos.step_result import ModelAttempt, StepResultAdapter, TextStepResult


def test_a_chain_is_the_primary_then_each_fallback_in_order() -> None:
    other = LLMConfig(model="anthropic/claude-sonnet-4-5", max_retries=0)
    config = LLMConfig(
        model="openai/a", api_base="http://a", temperature=0.3, max_retries=1, fallbacks=["openai/b", other]
    )
    chain = config.model_chain()
    assert [c.model for c in chain] == ["openai/a", "openai/b", "anthropic/claude-sonnet-4-5"]
    assert all(c.fallbacks == () for c in chain)
    # a model string takes every other setting from the primary; a full config brings its own
    assert (chain[1].api_base, chain[1].temperature, chain[1].retry_policy().max_attempts) == ("http://a", 0.3, 2)
    assert (chain[2].api_base, chain[2].retry_policy().max_attempts) == (None, 1)


def test_a_dict_fallback_and_a_bare_one_are_accepted() -> None:
    config = LLMConfig(model="openai/a", fallbacks={"model": "openai/b", "retry": {"max_attempts": 5}})  # type: ignore[arg-type]
    assert [(c.model, c.retry_policy().max_attempts) for c in config.model_chain()] == [
        ("openai/a", 4),
        ("openai/b", 5),
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"fallbacks": [""]}, "non-empty"),
        ({"fallbacks": [{"model": "openai/b", "fallbacks": ["openai/c"]}]}, "one chain"),
        ({"retry": {"max_attempts": 2}, "max_retries": 1}, "not both"),
        ({"fallback_on": ["provider_eror"]}, "unknown error codes"),
        ({"retry": {"max_attempts": 0}}, "max_attempts"),
        ({"retry": {"initial_backoff_seconds": 5, "max_backoff_seconds": 1}}, "max_backoff_seconds"),
        ({"retry": {"jitter": 1.5}}, "jitter"),
    ],
)
def test_bad_chains_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        LLMConfig(model="openai/a", **fields)  # type: ignore[arg-type]


def test_max_retries_is_a_shorthand_for_the_attempts_of_the_default_policy() -> None:
    assert LLMConfig(model="m").retry_policy() == RetryPolicy(max_attempts=4)
    assert LLMConfig(model="m", max_retries=0).retry_policy().max_attempts == 1


def test_backoff_doubles_up_to_its_cap_and_jitter_is_the_random_share() -> None:
    policy = RetryPolicy(initial_backoff_seconds=1, max_backoff_seconds=3, jitter=0.5)
    error = HelixError("boom", code="provider_error")
    assert [retry_delay_seconds(n, error, policy, rng=lambda: 0.0) for n in range(4)] == [0.5, 1.0, 1.5, 1.5]
    assert [retry_delay_seconds(n, error, policy, rng=lambda: 1.0) for n in range(4)] == [1.0, 2.0, 3.0, 3.0]
    exact = RetryPolicy(initial_backoff_seconds=0.2, max_backoff_seconds=1, jitter=0.0)
    assert retry_delay_seconds(1, error, exact, rng=lambda: 0.9) == 0.4


def test_retry_after_wins_over_backoff_and_is_capped() -> None:
    policy = RetryPolicy(max_retry_after_seconds=10)
    assert retry_delay_seconds(0, HelixError("x", code="provider_rate_limited", retry_after_seconds=3), policy) == 3
    assert retry_delay_seconds(0, HelixError("x", code="provider_rate_limited", retry_after_seconds=99), policy) == 10
    assert retry_delay_seconds(0, HelixError("x", code="provider_rate_limited", retry_after_seconds=-1), policy) == 0


@pytest.mark.parametrize(
    ("code", "retryable", "attempts", "has_next", "move"),
    [
        ("provider_error", True, 1, True, "retry"),
        ("provider_rate_limited", True, 2, True, "fall_back"),  # attempts used up
        ("provider_timeout", True, 2, False, "fail"),  # and no model left
        ("provider_auth_error", False, 1, True, "fall_back"),  # never the same model again
        ("provider_invalid_request", False, 1, False, "fail"),
        ("provider_content_filtered", False, 1, True, "fall_back"),
        ("framework_cancelled", False, 1, True, "fail"),  # an abort: no model would do better
        ("framework_internal_error", True, 1, True, "fail"),  # a bug is not the provider's
    ],
)
def test_next_move(code: str, retryable: bool, attempts: int, has_next: bool, move: str) -> None:
    error = HelixError("x", code=code, retryable=retryable)  # type: ignore[arg-type]
    policy = RetryPolicy(max_attempts=2)
    got = next_move(
        error, attempts_on_model=attempts, policy=policy, has_next_model=has_next, fallback_on=PROVIDER_ERROR_CODES
    )
    assert got == move


def test_a_code_outside_fallback_on_fails_instead_of_falling_back() -> None:
    error = HelixError("x", code="provider_auth_error", retryable=False)
    move = next_move(
        error,
        attempts_on_model=1,
        policy=RetryPolicy(),
        has_next_model=True,
        fallback_on=frozenset({"provider_error"}),
    )
    assert move == "fail"


def test_a_step_recorded_before_attempts_reads_back_with_none() -> None:
    """Runs recorded by an older version lack ``model_attempts``: they validate, with no model named."""
    old = StepResultAdapter.validate_python({"type": "text", "content": "hi", "usage": {"input_tokens": 1}})
    assert old.model_attempts == [] and old.answered_by is None
    new = TextStepResult(content="hi", model_attempts=[ModelAttempt(model="openai/b", outcome="answered")])
    assert StepResultAdapter.validate_json(StepResultAdapter.dump_json(new)).answered_by == "openai/b"
