"""Model chains: retries and fallbacks of the real LiteLLMAdapter, through real litellm, against the
scripted OpenAI-compatible server.

One server serves every model of the chain; it answers by the model a request names (``primary``,
``backup``), so each test states what each model says. Waits are measured on the server's side,
from the arrival times of the requests (``ScriptedOpenAIServer.request_times``): the adapter really
sleeps, and the test never times itself.
"""

from __future__ import annotations

import email.utils
import itertools
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from helix_dbos.errors import HelixError
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.litellm import LiteLLMAdapter, import_litellm
from helix_dbos.llm.retry import RetryPolicy
from helix_dbos.messages import SystemMessage, UserMessage
from helix_dbos.step_result import ErrorStepResult, StepResult, TextStepResult
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer

BACKOFF = 0.2
"""The exact backoff of the tests' retry policy (no jitter)."""


class ByModel:
    """Answers each request from the script of the model it names; an unscripted request fails the test."""

    def __init__(self, scripts: Mapping[str, Sequence[dict[str, Any]]]) -> None:
        self.scripts = {model: list(items) for model, items in scripts.items()}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        script = self.scripts.get(body["model"])
        if not script:
            return {"status": 599, "error_message": f"unexpected request to {body['model']}"}
        return script.pop(0)


@pytest.fixture(scope="module", autouse=True)
def _litellm_imported() -> None:
    import_litellm()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptedOpenAIServer] = []

    def start(scripts: Mapping[str, Sequence[dict[str, Any]]]) -> ScriptedOpenAIServer:
        server = ScriptedOpenAIServer(handler=ByModel(scripts))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def chain(server: ScriptedOpenAIServer, **overrides: Any) -> LLMConfig:
    fields: dict[str, Any] = {
        "model": "openai/primary",
        "fallbacks": ["openai/backup"],
        "api_base": server.base_url,
        "api_key": "sk-secret-test-key",
        "timeout_seconds": 10,
        "retry": RetryPolicy(max_attempts=2, initial_backoff_seconds=BACKOFF, max_backoff_seconds=BACKOFF, jitter=0.0),
    }
    fields.update(overrides)
    return LLMConfig(**fields)


async def call(config: LLMConfig) -> StepResult:
    return await LiteLLMAdapter().generate_step(
        LLMGenerateInput(
            messages=[SystemMessage(content="Be brief."), UserMessage(content="Hi")],
            tools=[],
            config=config,
            agent_id="run-1",
            agent_type="tester",
        )
    )


def models_called(server: ScriptedOpenAIServer) -> list[str]:
    return [body["model"] for body in server.requests]


def gaps(server: ScriptedOpenAIServer) -> list[float]:
    times = server.request_times
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def outcomes(result: StepResult) -> list[tuple[str, str]]:
    return [(a.model, a.outcome) for a in result.model_attempts]


async def test_5xx_is_retried_with_backoff_then_fails_over(serve: Any) -> None:
    server = serve({"primary": [{"status": 500}, {"status": 503}], "backup": [{"text": "from backup"}]})
    result = await call(chain(server))
    assert isinstance(result, TextStepResult) and result.content == "from backup"
    assert models_called(server) == ["primary", "primary", "backup"]
    assert gaps(server)[0] >= BACKOFF  # the backoff was waited between the two primary attempts
    assert outcomes(result) == [
        ("openai/primary", "retried"),
        ("openai/primary", "fell_back"),
        ("openai/backup", "answered"),
    ]
    assert [a.error_code for a in result.model_attempts] == ["provider_error", "provider_overloaded", None]
    assert [a.wait_seconds for a in result.model_attempts] == [BACKOFF, 0.0, 0.0]
    assert result.answered_by == "openai/backup"
    assert result.usage is not None and result.usage.model == "openai/backup"


async def test_429_waits_its_retry_after_seconds(serve: Any) -> None:
    server = serve(
        {"primary": [{"status": 429, "headers": {"Retry-After": "1"}}, {"text": "after the wait"}], "backup": []}
    )
    result = await call(chain(server))
    assert isinstance(result, TextStepResult) and result.content == "after the wait"
    assert models_called(server) == ["primary", "primary"]
    assert gaps(server)[0] >= 1.0
    assert result.model_attempts[0].error_code == "provider_rate_limited"
    assert result.model_attempts[0].wait_seconds == 1.0


async def test_429_waits_until_its_retry_after_http_date(serve: Any) -> None:
    until = email.utils.formatdate(time.time() + 2, usegmt=True)  # one-second resolution: 1 to 2 s away
    server = serve({"primary": [{"status": 429, "headers": {"Retry-After": until}}, {"text": "ok"}]})
    result = await call(chain(server, fallbacks=[]))
    assert isinstance(result, TextStepResult)
    assert models_called(server) == ["primary", "primary"]
    assert gaps(server)[0] >= 0.9
    assert 0.9 <= result.model_attempts[0].wait_seconds <= 2.0


async def test_a_long_retry_after_is_capped(serve: Any) -> None:
    server = serve({"primary": [{"status": 429, "headers": {"Retry-After": "30"}}, {"text": "ok"}]})
    policy = RetryPolicy(max_attempts=2, max_retry_after_seconds=0.3)
    result = await call(chain(server, fallbacks=[], retry=policy))
    assert isinstance(result, TextStepResult)
    assert result.model_attempts[0].wait_seconds == 0.3
    assert 0.3 <= gaps(server)[0] < 10  # the cap, not the server's 30 s


async def test_rate_limits_exhaust_the_primary_then_fail_over(serve: Any) -> None:
    limited = {"status": 429, "headers": {"Retry-After": "0.3"}}
    server = serve({"primary": [limited, limited], "backup": [{"text": "from backup"}]})
    result = await call(chain(server))
    assert isinstance(result, TextStepResult)
    assert models_called(server) == ["primary", "primary", "backup"]
    assert gaps(server)[0] >= 0.3
    assert outcomes(result)[-1] == ("openai/backup", "answered")


@pytest.mark.parametrize(
    ("status", "message", "code"),
    [
        (400, "bad field", "provider_invalid_request"),
        (401, "Incorrect API key provided", "provider_auth_error"),
        (403, "forbidden", "provider_auth_error"),
        (400, "This model's maximum context length is 10 tokens. You requested 99", "provider_context_window_exceeded"),
        (400, "Your request was rejected as a result of our safety system", "provider_content_filtered"),
    ],
)
async def test_non_retryable_errors_fail_over_at_once(serve: Any, status: int, message: str, code: str) -> None:
    server = serve({"primary": [{"status": status, "error_message": message}], "backup": [{"text": "ok"}]})
    result = await call(chain(server))
    assert isinstance(result, TextStepResult)
    assert models_called(server) == ["primary", "backup"]  # never the same model twice
    assert outcomes(result) == [("openai/primary", "fell_back"), ("openai/backup", "answered")]
    assert result.model_attempts[0].error_code == code
    assert result.model_attempts[0].status_code == status


async def test_an_error_outside_fallback_on_fails_at_once(serve: Any) -> None:
    server = serve({"primary": [{"status": 401, "error_message": "Incorrect API key provided"}], "backup": []})
    result = await call(chain(server, fallback_on={"provider_error", "provider_rate_limited"}))
    assert isinstance(result, ErrorStepResult)
    assert models_called(server) == ["primary"]
    assert isinstance(result.error, HelixError) and result.error.code == "provider_auth_error"
    assert outcomes(result) == [("openai/primary", "failed")]


async def test_the_primarys_fallback_on_holds_for_the_whole_chain(serve: Any) -> None:
    server = serve(
        {
            "primary": [{"status": 500}],
            "second": [{"status": 401, "error_message": "Incorrect API key provided"}],
            "third": [{"text": "never asked"}],
        }
    )
    second = LLMConfig(model="openai/second", api_base=server.base_url, api_key="k", max_retries=0)
    config = chain(
        server,
        fallbacks=[second, "openai/third"],
        retry=RetryPolicy(max_attempts=1),
        fallback_on={"provider_error"},  # second's own (default: every provider code) is not read
    )
    result = await call(config)
    assert isinstance(result, ErrorStepResult)
    assert models_called(server) == ["primary", "second"]
    assert outcomes(result) == [("openai/primary", "fell_back"), ("openai/second", "failed")]
    assert isinstance(result.error, HelixError) and result.error.code == "provider_fallbacks_exhausted"


async def test_an_exhausted_chain_is_one_typed_error_naming_each_model(serve: Any) -> None:
    server = serve(
        {
            "primary": [{"status": 500}, {"status": 500}],
            "backup": [{"status": 401, "error_message": "Incorrect API key provided: sk-secret-test-key"}],
        }
    )
    result = await call(chain(server))
    assert isinstance(result, ErrorStepResult)
    assert models_called(server) == ["primary", "primary", "backup"]
    error = result.error
    assert isinstance(error, HelixError) and error.code == "provider_fallbacks_exhausted"
    assert "openai/primary: provider_error (500) after 2 attempts" in error.message
    assert "openai/backup: provider_auth_error (401) after 1 attempt" in error.message
    assert "127.0.0.1" not in error.message and "sk-secret" not in error.message
    assert not error.retryable  # the last model's failure (a 401) is not
    assert outcomes(result) == [
        ("openai/primary", "retried"),
        ("openai/primary", "fell_back"),
        ("openai/backup", "failed"),
    ]
    # the recorded form keeps the code
    assert ErrorStepResult.model_validate_json(result.model_dump_json()).error.code == "provider_fallbacks_exhausted"  # type: ignore[attr-defined]


async def test_a_fallback_may_be_a_full_config_with_its_own_endpoint_and_retries(serve: Any) -> None:
    down = serve({"primary": [{"status": 500}, {"status": 500}]})
    other = serve({"other": [{"status": 502}, {"status": 502}, {"text": "from the other endpoint"}]})
    fallback = LLMConfig(
        model="openai/other",
        api_base=other.base_url,
        api_key="k2",
        retry=RetryPolicy(max_attempts=3, initial_backoff_seconds=0.05, max_backoff_seconds=0.05),
    )
    result = await call(chain(down, fallbacks=[fallback]))
    assert isinstance(result, TextStepResult) and result.content == "from the other endpoint"
    # per-model attempts: the primary's policy allows 2, the fallback's 3
    assert (models_called(down), models_called(other)) == (["primary"] * 2, ["other"] * 3)
    assert other.request_headers[0]["authorization"] == "Bearer k2"


async def test_litellm_does_not_retry_under_the_engine(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """One attempt is one request: LiteLLM's and the openai SDK's own retries stay off, even when an
    application turned LiteLLM's global retries on."""
    import litellm

    monkeypatch.setattr(litellm, "num_retries", 3)
    server = serve({"primary": [{"status": 500}, {"status": 429}]})
    codes = []
    for _ in range(2):
        result = await call(chain(server, fallbacks=[], retry=RetryPolicy(max_attempts=1)))
        assert isinstance(result, ErrorStepResult) and isinstance(result.error, HelixError)
        codes.append(result.error.code)
    assert codes == ["provider_error", "provider_rate_limited"]
    assert server.request_count == 2  # one request per attempt, for a 500 and for a 429


@pytest.mark.parametrize("option", ["fallbacks", "max_retries", "context_window_fallbacks"])
async def test_provider_options_may_not_turn_on_litellm_retries_or_fallbacks(serve: Any, option: str) -> None:
    server = serve({"primary": [{"text": "never"}]})
    config = chain(server, provider_options={"openai": {option: 2 if option == "max_retries" else ["x"]}})
    with pytest.raises(HelixError) as raised:
        await call(config)
    assert raised.value.code == "validation_error" and option in raised.value.message
    assert server.request_count == 0
