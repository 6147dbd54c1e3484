"""define_agent validation and AgentConfig helpers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr, TypeAdapter, ValidationError

from helix_dbos.agent import AgentConfig, AgentHooks, define_agent
from helix_dbos.errors import DefinitionError, HelixError
from helix_dbos.llm.config import LLMConfig
from helix_dbos.tool import ToolContext, define_tool


def _noop(_input: Any, _ctx: ToolContext) -> None:
    return None


class State(BaseModel):
    notes: list[str] = []
    count: int = 0


class Output(BaseModel):
    answer: str


def _agent(**overrides: Any) -> AgentConfig:
    kwargs: dict[str, Any] = {"system_prompt": "You help.", "llm_config": "openai/gpt-4o-mini"}
    kwargs.update(overrides)
    name = kwargs.pop("name", "my-agent")
    return define_agent(name, **kwargs)


def _rejects(fragment: str, **overrides: Any) -> DefinitionError:
    with pytest.raises(DefinitionError) as info:
        _agent(**overrides)
    assert fragment in str(info.value)
    assert info.value.code == "validation_error"
    return info.value


# --------------------------------------------------------------------------- a valid agent


def test_minimal_agent_defaults() -> None:
    agent = _agent()
    assert isinstance(agent, AgentConfig)
    assert agent.name == "my-agent"
    assert agent.description == ""
    assert agent.system_prompt == "You help."
    assert agent.state_schema is None
    assert agent.output_schema is None
    assert agent.tools == ()
    assert agent.max_steps == 20
    assert agent.stop_when is None
    assert agent.hooks == AgentHooks()
    assert agent.llm_config == LLMConfig(model="openai/gpt-4o-mini")
    assert agent.output_adapter() is None
    assert agent.finish_with_tools == ()


def test_full_agent() -> None:
    search = define_tool("search", execute=_noop)
    submit = define_tool("submit", execute=_noop, finish_with=True)

    def prompt(state: Any) -> str:
        return f"count={state.count}"

    def stop(_step: Any) -> bool:
        return False

    def on_start(*_: Any) -> None:
        return None

    agent = _agent(
        name="researcher.v2",
        description="Researches",
        system_prompt=prompt,
        state_schema=State,
        output_schema=Output,
        tools=[search, submit],
        max_steps=7,
        stop_when=stop,
        hooks={"on_agent_start": on_start},
    )
    assert agent.name == "researcher.v2"
    assert agent.system_prompt is prompt
    assert agent.state_schema is State
    assert agent.output_schema is Output
    assert agent.tools == (search, submit)
    assert agent.max_steps == 7
    assert agent.stop_when is stop
    assert agent.hooks.on_agent_start is on_start
    assert agent.hooks.after_tool is None


def test_agent_config_is_frozen() -> None:
    agent = _agent()
    with pytest.raises(ValidationError):
        agent.max_steps = 3  # type: ignore[misc]


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "name", ["", "-starts-with-dash", "_underscore", ".dot", "has space", "a" * 129, "slash/x", "trailing\n"]
)
def test_bad_agent_names_are_rejected(name: str) -> None:
    err = _rejects("invalid agent name", name=name)
    assert repr(name) in str(err)


@pytest.mark.parametrize("name", ["a", "A1", "my-agent", "my_agent.v2", "a" * 128, "9lives"])
def test_good_agent_names_are_accepted(name: str) -> None:
    assert _agent(name=name).name == name


def test_non_string_name_is_rejected() -> None:
    _rejects("invalid agent name", name=None)


# --------------------------------------------------------------------------- system prompt


@pytest.mark.parametrize("prompt", [None, 42, ["a"]])
def test_bad_system_prompt_is_rejected(prompt: Any) -> None:
    _rejects("system_prompt", system_prompt=prompt)


# --------------------------------------------------------------------------- tools


def test_duplicate_tool_names_are_rejected() -> None:
    a = define_tool("search", execute=_noop)
    b = define_tool("search", execute=lambda _i, _c: 1)
    err = _rejects("duplicate tool name", tools=[a, b])
    assert "'search'" in str(err)
    assert "'my-agent'" in str(err)


def test_the_same_tool_twice_is_a_duplicate() -> None:
    a = define_tool("search", execute=_noop)
    _rejects("duplicate tool name 'search'", tools=[a, a])


@pytest.mark.parametrize("bad", [{"name": "x"}, "search", _noop, None])
def test_non_tool_objects_are_rejected(bad: Any) -> None:
    _rejects("define_tool", tools=[define_tool("ok", execute=_noop), bad])


def test_tools_accept_any_sequence_and_are_stored_as_a_tuple() -> None:
    a = define_tool("a", execute=_noop)
    b = define_tool("b", execute=_noop)
    agent = _agent(tools=(t for t in [a, b]))
    assert agent.tools == (a, b)


def test_get_tool() -> None:
    a = define_tool("a", execute=_noop)
    b = define_tool("b", execute="client")
    agent = _agent(tools=[a, b])
    assert agent.get_tool("a") is a
    assert agent.get_tool("b") is b
    assert agent.get_tool("c") is None
    assert agent.get_tool("__finish__") is None


def test_finish_with_tools() -> None:
    plain = define_tool("plain", execute=_noop)
    done = define_tool("done", execute=_noop, finish_with=True)
    also = define_tool("also_done", execute=_noop, finish_with=True, finish_with_transform=str)
    agent = _agent(tools=[done, plain, also])
    assert agent.finish_with_tools == (done, also)
    assert _agent(tools=[plain]).finish_with_tools == ()


# --------------------------------------------------------------------------- llm_config


def test_llm_config_as_string() -> None:
    assert _agent(llm_config="anthropic/claude-sonnet-4-5").llm_config == LLMConfig(model="anthropic/claude-sonnet-4-5")


def test_llm_config_as_dict() -> None:
    config = _agent(
        llm_config={
            "model": "openai/gpt-4o",
            "temperature": 0.5,
            "max_output_tokens": 100,
            "provider_options": {"openai": {"reasoning_effort": "low"}},
            "strict_output": True,
            "api_key": "sk-secret",
        }
    ).llm_config
    assert config.model == "openai/gpt-4o"
    assert config.temperature == 0.5
    assert config.max_output_tokens == 100
    assert config.provider_options == {"openai": {"reasoning_effort": "low"}}
    assert config.strict_output is True
    assert isinstance(config.api_key, SecretStr)
    assert config.api_key.get_secret_value() == "sk-secret"
    assert "sk-secret" not in repr(config)


def test_llm_config_instance_is_kept() -> None:
    config = LLMConfig(model="openai/gpt-4o", temperature=0.0)
    assert _agent(llm_config=config).llm_config is config


def test_llm_config_defaults() -> None:
    config = LLMConfig(model="m")
    assert config.temperature is None
    assert config.max_output_tokens is None
    assert config.provider_options == {}
    assert config.strict_output is False
    assert config.cache is None
    assert config.api_base is None
    assert config.api_key is None
    assert config.timeout_seconds == 120.0
    assert config.max_retries == 3


@pytest.mark.parametrize(
    "llm_config",
    [
        pytest.param("", id="empty-string"),
        pytest.param("   ", id="blank-string"),
        pytest.param({"model": ""}, id="blank-model-dict"),
        pytest.param({"model": " \t"}, id="whitespace-model-dict"),
        pytest.param({}, id="missing-model"),
        pytest.param({"model": "m", "temperature": -0.1}, id="temperature-negative"),
        pytest.param({"model": "m", "temperature": 2.01}, id="temperature-too-high"),
        pytest.param({"model": "m", "max_output_tokens": 0}, id="max-output-tokens-zero"),
        pytest.param({"model": "m", "timeout_seconds": 0}, id="timeout-zero"),
        pytest.param({"model": "m", "max_retries": -1}, id="retries-negative"),
        pytest.param({"model": "m", "max_retries": 21}, id="retries-too-many"),
        pytest.param({"model": "m", "temprature": 0.5}, id="unknown-key"),
        pytest.param({"model": "m", "maxSteps": 3}, id="camel-case-key"),
        pytest.param(None, id="none"),
        pytest.param(42, id="int"),
    ],
)
def test_bad_llm_config_is_rejected(llm_config: Any) -> None:
    err = _rejects("invalid llm_config", llm_config=llm_config)
    assert "'my-agent'" in str(err)
    assert isinstance(err.__cause__, ValueError)


@pytest.mark.parametrize("temperature", [0.0, 1.0, 2.0])
def test_temperature_bounds_are_inclusive(temperature: float) -> None:
    assert _agent(llm_config={"model": "m", "temperature": temperature}).llm_config.temperature == temperature


def test_llm_config_is_frozen() -> None:
    config = LLMConfig(model="m")
    with pytest.raises(ValidationError):
        config.model = "other"  # type: ignore[misc]


# --------------------------------------------------------------------------- state_schema


def test_state_schema_without_defaults_is_rejected() -> None:
    class NoDefaults(BaseModel):
        notes: list[str]
        count: int = 0

    err = _rejects("default", state_schema=NoDefaults)
    assert "'my-agent'" in str(err)
    assert isinstance(err.__cause__, ValidationError)


@pytest.mark.parametrize("schema", [dict, State(), {"notes": []}, "State", int])
def test_non_model_state_schema_is_rejected(schema: Any) -> None:
    _rejects("state_schema must be a pydantic model class", state_schema=schema)


def test_state_schema_with_default_factory_is_accepted() -> None:
    class WithFactory(BaseModel):
        items: dict[str, int] = {}
        tags: list[str] = []

    assert _agent(state_schema=WithFactory).state_schema is WithFactory


# --------------------------------------------------------------------------- output_schema


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(object(), id="object-instance"),
        pytest.param(Callable[[int], int], id="callable"),
        pytest.param(3, id="int-instance"),
    ],
)
def test_output_schema_pydantic_cannot_handle_is_rejected(schema: Any) -> None:
    err = _rejects("output_schema", output_schema=schema)
    assert "'my-agent'" in str(err)


def test_output_schema_with_an_arbitrary_class_is_rejected() -> None:
    class Opaque:
        pass

    _rejects("output_schema", output_schema=Opaque)


@pytest.mark.parametrize("schema", [Output, list[str], int, dict[str, int], str | None])
def test_output_schema_types_are_accepted(schema: Any) -> None:
    assert _agent(output_schema=schema).output_schema == schema


def test_output_adapter_validates_the_output() -> None:
    adapter = _agent(output_schema=Output).output_adapter()
    assert isinstance(adapter, TypeAdapter)
    assert adapter.validate_python({"answer": "42"}) == Output(answer="42")
    with pytest.raises(ValidationError):
        adapter.validate_python({"wrong": 1})

    list_adapter = _agent(output_schema=list[int]).output_adapter()
    assert list_adapter is not None
    assert list_adapter.validate_python(["1", 2]) == [1, 2]
    with pytest.raises(ValidationError):
        list_adapter.validate_python("nope")


# --------------------------------------------------------------------------- max_steps, stop_when


@pytest.mark.parametrize("max_steps", [0, -1, -100, 1.5, "3", None])
def test_bad_max_steps_is_rejected(max_steps: Any) -> None:
    _rejects("max_steps", max_steps=max_steps)


def test_max_steps_one_is_accepted() -> None:
    assert _agent(max_steps=1).max_steps == 1


@pytest.mark.parametrize("stop_when", [True, "stop", 3])
def test_non_callable_stop_when_is_rejected(stop_when: Any) -> None:
    _rejects("stop_when", stop_when=stop_when)


# --------------------------------------------------------------------------- hooks


def test_hooks_dict_with_unknown_key_is_rejected() -> None:
    err = _rejects("invalid hooks", hooks={"on_agent_start": _noop, "on_tool_start": _noop})
    assert "on_tool_start" in str(err)


def test_hooks_camel_case_key_is_rejected() -> None:
    _rejects("invalid hooks", hooks={"onAgentStart": _noop})


def test_hooks_with_a_non_callable_value_is_rejected() -> None:
    _rejects("invalid hooks", hooks={"before_tool": "not callable"})


def test_hooks_as_agent_hooks_instance_is_kept() -> None:
    hooks = AgentHooks(before_tool=_noop)
    assert _agent(hooks=hooks).hooks is hooks


def test_hooks_none_means_no_hooks() -> None:
    hooks = _agent(hooks=None).hooks
    assert all(getattr(hooks, field) is None for field in AgentHooks.model_fields)


def test_every_hook_name_is_accepted() -> None:
    names = [
        "on_agent_start",
        "before_llm_call",
        "after_llm_call",
        "before_tool",
        "after_tool",
        "on_state_change",
        "on_message",
        "on_agent_complete",
        "on_agent_fail",
        "on_agent_suspended",
        "on_agent_resumed",
    ]
    assert set(AgentHooks.model_fields) == set(names)
    hooks = _agent(hooks=dict.fromkeys(names, _noop)).hooks
    assert all(getattr(hooks, n) is _noop for n in names)


def test_a_workspace_fails_fast_with_framework_not_supported() -> None:
    """Seed 001: the DBOS runtime does not support workspaces and fails fast, with a clear error."""
    with pytest.raises(HelixError) as info:
        _agent(workspace={"provider": "local", "root": "/tmp/ws"})
    assert info.value.code == "framework_not_supported"
    assert info.value.category == "framework"
    assert not info.value.retryable
    message = str(info.value)
    assert "workspace" in message and "DBOS" in message and "'my-agent'" in message


def test_workspace_none_means_no_workspace() -> None:
    assert _agent(workspace=None).name == "my-agent"
