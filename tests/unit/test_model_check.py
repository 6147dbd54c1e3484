"""Model strings checked before a run: what is refused, with which hint, and what is let through.

The checks read LiteLLM's offline tables; nothing here calls a model. The command-line behaviour
(one line, nothing written) is in ``tests/test_cli_demo.py``.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel, SecretStr

from helix_dbos import create_sub_agent_tool, define_agent
from helix_dbos.cli.inputs import CliError
from helix_dbos.cli.model_check import check_agent_models, check_model

pytest.importorskip("litellm")


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("model", "reason", "suggestion"),
    [
        ("opnai/gpt-4o-mini", "LiteLLM knows no provider 'opnai'", "did you mean openai/gpt-4o-mini?"),
        ("gpt4o-mini", "LiteLLM cannot tell which provider serves it", "openai/gpt-4o-mini"),
        ("helix/demo-scripte", "helix-dbos serves helix/demo-scripted", ""),
    ],
)
def test_a_model_string_that_names_nothing_is_a_bad_argument(model: str, reason: str, suggestion: str) -> None:
    with pytest.raises(CliError) as raised:
        check_model(model)
    assert raised.value.exit_code == 2
    assert raised.value.message.startswith(f"unknown model {model!r}: {reason}"), raised.value.message
    assert suggestion in raised.value.message and "\n" not in raised.value.message


def test_a_missing_api_key_is_named() -> None:
    with pytest.raises(CliError) as raised:
        check_model("anthropic/claude-sonnet-4-5", agent="writer")
    assert raised.value.exit_code == 1
    assert raised.value.message == (
        "agent 'writer': model 'anthropic/claude-sonnet-4-5' needs an API key: set ANTHROPIC_API_KEY "
        "(or LLMConfig.api_key)"
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"api_key": SecretStr("sk-test")},  # the agent carries its key
        {"api_base": "http://127.0.0.1:9/v1"},  # a server of its own, which may take any key or none
    ],
)
def test_an_agent_with_its_own_key_or_server_is_not_asked_for_the_environment_key(kwargs: dict[str, object]) -> None:
    check_model("openai/gpt-4o-mini", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("model", ["helix/demo-scripted", "hosted_vllm/my-model", "ollama/llama3"])
def test_models_that_need_no_key_from_here_pass(model: str) -> None:
    check_model(model)  # helix's own model; self-hosted servers; credentials this check cannot see


def test_the_agents_an_agent_delegates_to_are_checked_too() -> None:
    class Question(BaseModel):
        q: str

    child = define_agent("child", system_prompt="Hi.", llm_config="opnai/gpt-4o-mini", output_schema=Question)
    tool = create_sub_agent_tool(child, description="Ask", input_schema=Question)
    parent = define_agent("parent", system_prompt="Hi.", llm_config="helix/demo-scripted", tools=[tool])
    with pytest.raises(CliError, match=r"^agent 'child': unknown model 'opnai/gpt-4o-mini'"):
        check_agent_models([parent])
