"""define_tool validation, Tool.run, ToolContext and the __finish__ tool."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from helix_dbos.errors import DefinitionError, HelixError
from helix_dbos.state.tracker import AppendOp, ReplaceOp, StateTracker
from helix_dbos.tool import (
    COMPANION_TOOL_PREFIX,
    FINISH_TOOL_NAME,
    FINISH_VALUE_KEY,
    LOAD_SKILL_TOOL_NAME,
    READ_SKILL_FILE_TOOL_NAME,
    RESERVED_TOOL_NAMES,
    SUBAGENT_TOOL_PREFIX,
    AbortSignal,
    CustomEvent,
    Tool,
    ToolContext,
    create_finish_tool,
    create_tool_context,
    define_tool,
    is_approval_gated_tool,
    is_client_tool,
    is_companion_tool_name,
    is_finish_tool,
    is_finish_with_tool,
    is_sub_agent_tool_name,
    validation_error_message,
)


class SearchInput(BaseModel):
    query: str
    limit: int = 5


class SearchOutput(BaseModel):
    hits: list[str]


class Notes(BaseModel):
    notes: list[str] = []
    count: int = 0


def _noop(_input: Any, _ctx: ToolContext) -> None:
    return None


def _ctx(
    *,
    state: dict[str, Any] | None = None,
    schema: type[BaseModel] | None = None,
    session_id: str = "sess-1",
    tool_call_id: str = "call-1",
    tool_name: str = "t",
) -> ToolContext:
    return create_tool_context(
        agent_id="run-1",
        agent_type="agent",
        session_id=session_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        state_tracker=StateTracker(state if state is not None else {}, schema=schema),
    )


def _predicate(_input: Any, *_: Any) -> bool:
    return True


# --------------------------------------------------------------------------- constants


def test_constants_match_the_seeds() -> None:
    assert FINISH_TOOL_NAME == "__finish__"
    assert SUBAGENT_TOOL_PREFIX == "subagent__"
    assert COMPANION_TOOL_PREFIX == "companion__"
    assert LOAD_SKILL_TOOL_NAME == "load_skill"
    assert READ_SKILL_FILE_TOOL_NAME == "read_skill_file"
    assert frozenset({"__finish__", "load_skill", "read_skill_file"}) == RESERVED_TOOL_NAMES
    assert FINISH_VALUE_KEY == "value"


# --------------------------------------------------------------------------- rejected combinations


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        pytest.param({"execute": "client", "finish_with": True}, "finish_with", id="client+finish_with"),
        pytest.param({"execute": "client", "require_approval": True}, "require_approval", id="client+approval-bool"),
        pytest.param(
            {"execute": "client", "require_approval": _predicate},
            "require_approval",
            id="client+approval-predicate",
        ),
        pytest.param(
            {"execute": _noop, "require_approval": True, "finish_with": True},
            "finish_with",
            id="approval-bool+finish_with",
        ),
        pytest.param(
            {"execute": _noop, "require_approval": _predicate, "finish_with": True},
            "finish_with",
            id="approval-predicate+finish_with",
        ),
        pytest.param(
            {"execute": _noop, "finish_with_transform": lambda r: r},
            "finish_with_transform",
            id="transform-without-finish_with",
        ),
        pytest.param({}, "execute", id="missing-execute"),
        pytest.param({"execute": None}, "execute", id="execute-None"),
        pytest.param({"execute": 42}, "execute", id="execute-int"),
        pytest.param({"execute": "server"}, "execute", id="execute-other-string"),
        pytest.param({"execute": _noop, "require_approval": "yes"}, "require_approval", id="approval-str"),
        pytest.param({"execute": _noop, "require_approval": 1}, "require_approval", id="approval-int"),
        pytest.param({"execute": _noop, "input_schema": dict}, "input_schema", id="input-schema-dict"),
        pytest.param(
            {"execute": _noop, "input_schema": SearchInput(query="x")},
            "input_schema",
            id="input-schema-instance",
        ),
        pytest.param(
            {"execute": _noop, "input_schema": {"type": "object"}},
            "input_schema",
            id="input-schema-json-schema",
        ),
        pytest.param({"execute": _noop, "output_schema": str}, "output_schema", id="output-schema-str"),
        pytest.param({"execute": _noop, "output_schema": list[str]}, "output_schema", id="output-schema-generic"),
    ],
)
def test_rejected_combinations_raise_definition_error_naming_the_tool(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(DefinitionError) as info:
        define_tool("my_tool", **kwargs)
    message = str(info.value)
    assert "'my_tool'" in message
    assert fragment in message
    # DefinitionError is both a HelixError with a validation code and a ValueError.
    assert isinstance(info.value, HelixError)
    assert isinstance(info.value, ValueError)
    assert info.value.code == "validation_error"
    assert info.value.retryable is False


def test_finish_with_transform_false_finish_with_is_rejected_even_with_approval_off() -> None:
    with pytest.raises(DefinitionError, match="finish_with_transform"):
        define_tool("t", execute=_noop, finish_with=False, finish_with_transform=str)


@pytest.mark.parametrize("name", sorted(RESERVED_TOOL_NAMES))
def test_reserved_names_are_rejected(name: str) -> None:
    with pytest.raises(DefinitionError, match="reserved") as info:
        define_tool(name, execute=_noop)
    assert repr(name) in str(info.value)


@pytest.mark.parametrize("prefix", [SUBAGENT_TOOL_PREFIX, COMPANION_TOOL_PREFIX])
@pytest.mark.parametrize("suffix", ["", "worker", "spawnAgent"])
def test_reserved_prefixes_are_rejected(prefix: str, suffix: str) -> None:
    name = prefix + suffix
    if not suffix:
        # "subagent__" alone is still a valid-looking name that uses the prefix.
        assert name.endswith("__")
    with pytest.raises(DefinitionError, match="reserved prefix") as info:
        define_tool(name, execute=_noop)
    assert repr(name) in str(info.value)
    assert repr(prefix) in str(info.value)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "has space",
        " leading",
        "trailing ",
        "a" * 65,
        "dot.name",
        "slash/name",
        "colon:name",
        "ünïcode",
        "tab\tname",
        "newline_at_end\n",
        "\nnewline_at_start",
    ],
)
def test_invalid_names_are_rejected(name: str) -> None:
    with pytest.raises(DefinitionError, match="invalid tool name") as info:
        define_tool(name, execute=_noop)
    assert repr(name) in str(info.value)


@pytest.mark.parametrize("name", [None, 123, b"bytes"])
def test_non_string_names_are_rejected(name: Any) -> None:
    with pytest.raises(DefinitionError, match="invalid tool name"):
        define_tool(name, execute=_noop)


@pytest.mark.parametrize(
    "name",
    ["a", "a" * 64, "search", "Search-Web_2", "_private", "-dash", "subagent_single", "finish", "__finish"],
)
def test_valid_names_are_accepted(name: str) -> None:
    assert define_tool(name, execute=_noop).name == name


def test_prefix_check_is_case_sensitive_and_only_a_prefix() -> None:
    assert define_tool("my_subagent__x", execute=_noop).name == "my_subagent__x"
    assert define_tool("Subagent__x", execute=_noop).name == "Subagent__x"
    assert define_tool("xcompanion__", execute=_noop).name == "xcompanion__"


# --------------------------------------------------------------------------- valid tools of each kind


def test_plain_server_tool() -> None:
    tool = define_tool(
        "search",
        description="Search the web",
        input_schema=SearchInput,
        output_schema=SearchOutput,
        execute=_noop,
    )
    assert isinstance(tool, Tool)
    assert tool.description == "Search the web"
    assert tool.input_schema is SearchInput
    assert tool.output_schema is SearchOutput
    assert tool.execute is _noop
    assert not tool.is_client
    assert not is_client_tool(tool)
    assert not is_approval_gated_tool(tool)
    assert not is_finish_with_tool(tool)
    assert not is_finish_tool(tool)
    assert tool.strict is False
    assert tool.finish_output_wrapped is False


def test_client_tool() -> None:
    tool = define_tool("pick_color", input_schema=SearchInput, execute="client")
    assert tool.is_client
    assert is_client_tool(tool)
    assert not is_approval_gated_tool(tool)
    assert not is_finish_with_tool(tool)


async def test_client_tool_cannot_run_on_the_server() -> None:
    tool = define_tool("pick_color", execute="client")
    with pytest.raises(TypeError, match="pick_color"):
        await tool.run({}, _ctx())


def test_approval_gated_tool_bool() -> None:
    tool = define_tool("delete_file", execute=_noop, require_approval=True)
    assert is_approval_gated_tool(tool)
    assert tool.require_approval is True
    assert not is_client_tool(tool)


def test_approval_gated_tool_predicate_is_kept_as_is() -> None:
    def predicate(inp: Any) -> bool:
        return len(inp["to"]) > 50

    tool = define_tool("send_bulk_email", execute=_noop, require_approval=predicate)
    assert is_approval_gated_tool(tool)
    assert tool.require_approval is predicate


def test_async_approval_predicate_is_accepted() -> None:
    async def predicate(_inp: Any) -> bool:
        return False

    tool = define_tool("maybe_gated", execute=_noop, require_approval=predicate)
    # A predicate counts as gated even when it would say "no": it decides at run time.
    assert is_approval_gated_tool(tool)


def test_require_approval_false_is_not_gated() -> None:
    tool = define_tool("t", execute=_noop, require_approval=False)
    assert not is_approval_gated_tool(tool)


def test_finish_with_tool_and_transform() -> None:
    def transform(result: Any) -> Any:
        return {"wrapped": result}

    tool = define_tool("submit", execute=_noop, finish_with=True, finish_with_transform=transform)
    assert is_finish_with_tool(tool)
    assert tool.finish_with_transform is transform
    assert not is_finish_tool(tool)
    assert not is_approval_gated_tool(tool)


def test_strict_flag_is_kept() -> None:
    assert define_tool("t", execute=_noop, strict=True).strict is True


def test_tool_is_frozen() -> None:
    tool = define_tool("t", execute=_noop)
    with pytest.raises(ValidationError):
        tool.name = "other"  # type: ignore[misc]


# --------------------------------------------------------------------------- Tool.run


async def test_sync_execute_runs_through_tool_run() -> None:
    seen: list[tuple[Any, ToolContext]] = []

    def execute(inp: SearchInput, ctx: ToolContext) -> dict[str, Any]:
        seen.append((inp, ctx))
        return {"hits": [inp.query] * inp.limit}

    tool = define_tool("search", input_schema=SearchInput, output_schema=SearchOutput, execute=execute)
    ctx = _ctx()
    arguments = tool.validate_input({"query": "q", "limit": 2})
    result = await tool.run(arguments, ctx)
    assert isinstance(result, SearchOutput)
    assert result.hits == ["q", "q"]
    assert seen == [(SearchInput(query="q", limit=2), ctx)]
    assert seen[0][1] is ctx


async def test_async_execute_is_awaited() -> None:
    async def execute(inp: dict[str, Any], _ctx: ToolContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"echo": inp["x"]}

    tool = define_tool("echo", execute=execute)
    result = await tool.run({"x": 3}, _ctx())
    assert result == {"echo": 3}
    assert not asyncio.iscoroutine(result)


async def test_sync_execute_returning_an_awaitable_is_awaited() -> None:
    async def inner() -> str:
        return "done"

    tool = define_tool("t", execute=lambda _i, _c: inner())
    assert await tool.run({}, _ctx()) == "done"


async def test_execute_exception_propagates() -> None:
    def execute(_inp: Any, _ctx: ToolContext) -> None:
        raise RuntimeError("boom")

    tool = define_tool("t", execute=execute)
    with pytest.raises(RuntimeError, match="boom"):
        await tool.run({}, _ctx())


async def test_output_schema_instance_passes_through_unchanged() -> None:
    out = SearchOutput(hits=["a"])
    tool = define_tool("t", output_schema=SearchOutput, execute=lambda _i, _c: out)
    assert await tool.run({}, _ctx()) is out


async def test_output_schema_rejects_a_mismatching_result() -> None:
    tool = define_tool("t", output_schema=SearchOutput, execute=lambda _i, _c: {"hits": "not a list"})
    with pytest.raises(ValidationError):
        await tool.run({}, _ctx())


async def test_output_schema_rejects_a_mismatching_async_result() -> None:
    async def execute(_inp: Any, _ctx: ToolContext) -> dict[str, Any]:
        return {"wrong": 1}

    tool = define_tool("t", output_schema=SearchOutput, execute=execute)
    with pytest.raises(ValidationError):
        await tool.run({}, _ctx())


async def test_without_output_schema_the_result_is_returned_verbatim() -> None:
    sentinel = object()
    tool = define_tool("t", execute=lambda _i, _c: sentinel)
    assert await tool.run({}, _ctx()) is sentinel


def test_validate_input_with_schema() -> None:
    tool = define_tool("search", input_schema=SearchInput, execute=_noop)
    assert tool.validate_input({"query": "q"}) == SearchInput(query="q", limit=5)
    with pytest.raises(ValidationError):
        tool.validate_input({"limit": 1})
    with pytest.raises(ValidationError):
        tool.validate_input({"query": "q", "limit": "many"})


def test_validate_input_without_schema_returns_a_dict_copy() -> None:
    tool = define_tool("t", execute=_noop)
    raw = {"a": 1}
    validated = tool.validate_input(raw)
    assert validated == raw
    assert validated is not raw


def test_json_schema() -> None:
    assert define_tool("t", execute=_noop).json_schema() == {
        "type": "object",
        "properties": {},
        "additionalProperties": True,
    }
    schema = define_tool("s", input_schema=SearchInput, execute=_noop).json_schema()
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"query", "limit"}
    assert schema["required"] == ["query"]


# --------------------------------------------------------------------------- ToolContext


async def test_update_state_through_a_dict_draft() -> None:
    def execute(inp: dict[str, Any], ctx: ToolContext) -> str:
        ctx.update_state(lambda d: d["notes"].append(inp["note"]))
        ctx.update_state(lambda d: d.__setitem__("count", d["count"] + 1))
        return "ok"

    tool = define_tool("add_note", execute=execute)
    ctx = _ctx(state={"notes": ["first"], "count": 0})
    assert await tool.run({"note": "second"}, ctx) == "ok"
    assert ctx.get_state() == {"notes": ["first", "second"], "count": 1}
    writes = ctx.state_tracker.get_step_writes()
    assert writes.ops == [AppendOp(key="notes", items=["second"]), ReplaceOp(key="count", value=1)]


async def test_update_state_through_a_model_draft() -> None:
    def execute(inp: dict[str, Any], ctx: ToolContext) -> None:
        def mutate(draft: Notes) -> None:
            assert isinstance(draft, Notes)
            draft.notes.append(inp["note"])
            draft.count += 1

        ctx.update_state(mutate)

    tool = define_tool("add_note", execute=execute)
    ctx = _ctx(state={"notes": [], "count": 0}, schema=Notes)
    await tool.run({"note": "n1"}, ctx)
    state = ctx.get_state()
    assert isinstance(state, Notes)
    assert state == Notes(notes=["n1"], count=1)
    assert ctx.state_tracker.get_step_writes().ops == [
        AppendOp(key="notes", items=["n1"]),
        ReplaceOp(key="count", value=1),
    ]


def test_update_state_with_schema_rejects_a_wrong_type_and_keeps_the_state() -> None:
    ctx = _ctx(state={"notes": [], "count": 0}, schema=Notes)
    with pytest.raises(ValidationError):
        ctx.update_state(lambda d: setattr(d, "count", "not a number"))
    assert ctx.get_state() == Notes()
    assert not ctx.state_tracker.has_changes()


def test_get_state_is_a_copy() -> None:
    ctx = _ctx(state={"notes": ["a"]})
    ctx.get_state()["notes"].append("b")
    assert ctx.get_state() == {"notes": ["a"]}
    model_ctx = _ctx(state={"notes": ["a"]}, schema=Notes)
    model_ctx.get_state().notes.append("b")
    assert model_ctx.get_state().notes == ["a"]


def test_idempotency_key_is_stable_for_the_same_call_and_distinct_otherwise() -> None:
    a = _ctx(session_id="s1", tool_call_id="c1")
    again = _ctx(session_id="s1", tool_call_id="c1")
    assert a.idempotency_key == a.idempotency_key == again.idempotency_key
    assert a.idempotency_key != _ctx(session_id="s1", tool_call_id="c2").idempotency_key
    assert a.idempotency_key != _ctx(session_id="s2", tool_call_id="c1").idempotency_key
    # The key does not depend on the run, the tool name or the state.
    other = create_tool_context(
        agent_id="another-run",
        agent_type="other-agent",
        session_id="s1",
        tool_call_id="c1",
        tool_name="other_tool",
        state_tracker=StateTracker({"x": 1}),
    )
    assert other.idempotency_key == a.idempotency_key


async def test_emit_buffers_events_in_order() -> None:
    def execute(_inp: Any, ctx: ToolContext) -> None:
        ctx.emit("progress", {"pct": 10})
        ctx.emit("progress", {"pct": 100})
        ctx.emit("done")

    tool = define_tool("t", execute=execute)
    ctx = _ctx()
    assert ctx.events == []
    await tool.run({}, ctx)
    assert ctx.events == [
        CustomEvent(event_name="progress", data={"pct": 10}),
        CustomEvent(event_name="progress", data={"pct": 100}),
        CustomEvent(event_name="done", data=None),
    ]


def test_emit_buffers_are_per_context() -> None:
    a, b = _ctx(), _ctx()
    a.emit("x", 1)
    assert b.events == []


def test_create_tool_context_fields() -> None:
    tracker = StateTracker({})
    signal = AbortSignal()
    ctx = create_tool_context(
        agent_id="run",
        agent_type="agent-type",
        session_id="sess",
        tool_call_id="call",
        tool_name="tool",
        state_tracker=tracker,
        abort_signal=signal,
    )
    assert (ctx.agent_id, ctx.agent_type, ctx.session_id, ctx.tool_call_id, ctx.tool_name) == (
        "run",
        "agent-type",
        "sess",
        "call",
        "tool",
    )
    assert ctx.state_tracker is tracker
    assert ctx.abort_signal is signal
    assert isinstance(_ctx().abort_signal, AbortSignal)
    assert _ctx().abort_signal is not _ctx().abort_signal


def test_abort_signal() -> None:
    signal = AbortSignal()
    signal.throw_if_aborted()
    signal.abort("first")
    signal.abort("second")
    assert signal.aborted
    assert signal.reason == "first"
    with pytest.raises(RuntimeError, match="first"):
        signal.throw_if_aborted()


# --------------------------------------------------------------------------- predicates


def test_is_finish_tool_by_name_and_by_tool() -> None:
    assert is_finish_tool("__finish__")
    assert not is_finish_tool("finish")
    assert is_finish_tool(create_finish_tool(SearchOutput))
    assert not is_finish_tool(define_tool("submit", execute=_noop, finish_with=True))


def test_name_predicates() -> None:
    assert is_sub_agent_tool_name("subagent__worker")
    assert not is_sub_agent_tool_name("worker")
    assert is_companion_tool_name("companion__spawnAgent")
    assert not is_companion_tool_name("subagent__worker")


# --------------------------------------------------------------------------- create_finish_tool


def test_finish_tool_for_a_model() -> None:
    tool = create_finish_tool(SearchOutput)
    assert tool.name == FINISH_TOOL_NAME
    assert tool.execute is None
    assert tool.strict is False
    assert tool.finish_output_wrapped is False
    assert tool.description
    assert tool.json_schema() == SearchOutput.model_json_schema()
    assert tool.json_schema()["type"] == "object"
    assert tool.json_schema()["required"] == ["hits"]


def test_finish_tool_strict_flag() -> None:
    assert create_finish_tool(SearchOutput, strict=True).strict is True
    assert create_finish_tool(list[str], strict=True).strict is True


def test_finish_tool_for_a_list_is_wrapped_under_value() -> None:
    tool = create_finish_tool(list[str])
    assert tool.finish_output_wrapped is True
    schema = tool.json_schema()
    assert schema == {
        "type": "object",
        "properties": {"value": {"type": "array", "items": {"type": "string"}}},
        "required": ["value"],
    }


def test_finish_tool_for_an_int_is_wrapped_under_value() -> None:
    tool = create_finish_tool(int)
    assert tool.finish_output_wrapped is True
    assert tool.json_schema() == {
        "type": "object",
        "properties": {"value": {"type": "integer"}},
        "required": ["value"],
    }


def test_finish_tool_for_a_list_of_models_keeps_defs_at_the_top_level() -> None:
    schema = create_finish_tool(list[SearchOutput]).json_schema()
    assert "$defs" in schema
    assert "SearchOutput" in schema["$defs"]
    assert "$defs" not in schema["properties"]["value"]
    assert schema["properties"]["value"]["items"] == {"$ref": "#/$defs/SearchOutput"}


def test_finish_tool_for_a_dict_type_is_not_wrapped() -> None:
    tool = create_finish_tool(dict[str, int])
    assert tool.finish_output_wrapped is False
    assert tool.json_schema()["type"] == "object"


async def test_finish_tool_never_executes() -> None:
    with pytest.raises(TypeError):
        await create_finish_tool(SearchOutput).run({"hits": []}, _ctx())


# --------------------------------------------------------------------------- validation_error_message


def test_validation_error_message_names_the_tool_and_every_problem() -> None:
    with pytest.raises(ValidationError) as info:
        SearchInput.model_validate({"limit": "many"})
    message = validation_error_message("search", info.value)
    assert message.startswith("Invalid arguments for tool 'search': ")
    assert "query: Field required" in message
    assert "limit: Input should be a valid integer" in message
    assert message.count(";") == 1


def test_validation_error_message_nested_location_and_root() -> None:
    class Outer(BaseModel):
        inner: SearchInput

    with pytest.raises(ValidationError) as info:
        Outer.model_validate({"inner": {"query": 1}})
    assert "inner.query: Input should be a valid string" in validation_error_message("t", info.value)

    with pytest.raises(ValidationError) as root_info:
        SearchInput.model_validate("not an object")
    assert "<root>: " in validation_error_message("t", root_info.value)


def test_abort_signal_probe_is_rate_limited_and_trips_once() -> None:
    answers: list[str | None] = [None, "aborted: remote"]
    probes: list[float] = []

    def probe() -> str | None:
        probes.append(time.monotonic())
        return answers[min(len(probes) - 1, 1)]

    signal = AbortSignal(probe, probe_interval_seconds=0.05)
    assert not signal.aborted  # first read probes: not yet
    assert not signal.aborted and len(probes) == 1  # within the interval: no second probe
    time.sleep(0.06)
    assert signal.aborted and signal.reason == "aborted: remote"
    assert signal.aborted and len(probes) == 2  # tripped: never probed again
    signal.abort("later")
    assert signal.reason == "aborted: remote"


def test_abort_signal_wait_and_a_failing_probe() -> None:
    def broken() -> str | None:
        raise OSError("database unreachable")

    signal = AbortSignal(broken, probe_interval_seconds=0.01)
    started = time.monotonic()
    assert signal.wait(0.1) is False  # a probe that cannot read is not an abort
    assert 0.09 <= time.monotonic() - started < 1.0
    threading.Timer(0.05, signal.abort, args=("stop",)).start()
    assert signal.wait(5) is True and signal.reason == "stop"


# -- retry_safe ---------------------------------------------------------------------------------------


def test_tools_are_retry_safe_by_default_and_a_not_retry_safe_one_asks_by_default() -> None:
    assert define_tool("t", execute=lambda i, c: 1).retry_safe is True
    unsafe = define_tool("charge", execute=lambda i, c: 1, retry_safe=False)
    assert (unsafe.retry_safe, unsafe.unknown_outcome) == (False, "ask")
    reporting = define_tool("c", execute=lambda i, c: 1, retry_safe=False, unknown_outcome="report")
    assert reporting.unknown_outcome == "report"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"execute": "client", "retry_safe": False}, "execute='client' cannot be combined with retry_safe=False"),
        ({"finish_with": True, "retry_safe": False}, "finish_with cannot be combined with retry_safe=False"),
        ({"unknown_outcome": "report"}, "unknown_outcome applies only to retry_safe=False tools"),
        ({"retry_safe": False, "unknown_outcome": "retry"}, "unknown_outcome must be 'ask' or 'report'"),
        ({"retry_safe": "no"}, "retry_safe must be a bool"),
    ],
)
def test_retry_safety_combinations_that_cannot_work_are_refused_at_definition(
    options: dict[str, Any], message: str
) -> None:
    kwargs: dict[str, Any] = {"execute": lambda i, c: 1, **options}
    with pytest.raises(DefinitionError, match=re.escape(message)) as caught:
        define_tool("t", **kwargs)
    assert caught.value.code == "validation_error"
