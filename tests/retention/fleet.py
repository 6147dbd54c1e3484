"""A fleet of real runs for retention tests: old, recent, failed, multi-turn, parked and companion sessions.

Every run goes through DBOS with a scripted model (one tool call, then ``__finish__``; a prompt
containing ``fail`` makes the model call fail, so the run fails) and streams into the SQL stream
tables. Ages are set afterwards by moving a session's timestamps back (:func:`backdate`): the
policy reads ``completed_at``/``started_at``/``updated_at``, nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy import Engine

from helix_dbos import HelixError, LLMGenerateInput, MockLLMAdapter, ToolResultMessage, define_agent, define_tool
from helix_dbos.step_result import ParsedToolCall, ToolCallsStepResult
from helix_dbos.store.schema import (
    checkpoints,
    messages,
    pending_tool_calls,
    runs,
    sessions,
    stream_chunks,
    streams,
    sub_session_refs,
    usage,
)

DAY_MS = 86_400_000

HELIX_TABLES = (
    sessions,
    runs,
    messages,
    checkpoints,
    usage,
    sub_session_refs,
    pending_tool_calls,
    streams,
    stream_chunks,
)
DBOS_TABLES = ("workflow_status", "operation_outputs", "workflow_input", "workflow_output")


class CityIn(BaseModel):
    city: str


class Out(BaseModel):
    answer: str


weather = define_tool("weather", input_schema=CityIn, execute=lambda inp, ctx: {"city": inp.city, "temp": 21})
location = define_tool("get_location", input_schema=CityIn, execute="client")
plain_agent = define_agent(
    "retention-plain", system_prompt="x", llm_config="openai/fake", output_schema=Out, tools=[weather, location]
)


def _call(call_id: str, name: str, args: dict[str, Any]) -> ToolCallsStepResult:
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id=call_id, name=name, arguments=args)], stop_reason="tool_use"
    )


def scripted_step(inp: LLMGenerateInput) -> ToolCallsStepResult:
    """``fail`` -> the model call fails; ``ask`` -> a client tool (the run parks); else weather, then finish."""
    prompt = str(inp.messages[-1].content) if inp.messages else ""
    last_user = next((str(m.content) for m in reversed(inp.messages) if m.role == "user"), "")
    if "fail" in last_user:
        raise HelixError("scripted model failure", code="provider_invalid_request", retryable=False)
    if isinstance(inp.messages[-1], ToolResultMessage):
        return _call(f"fin-{time.monotonic_ns()}", "__finish__", {"answer": prompt[:40]})
    tool = "get_location" if "ask" in last_user else "weather"
    return _call(f"c-{time.monotonic_ns()}", tool, {"city": "Lyon"})


def scripted_model() -> MockLLMAdapter:
    return MockLLMAdapter([scripted_step] * 100_000)


def run_sessions(executor: Any, prompts: Sequence[str], *, prefix: str) -> list[str]:
    """Run one turn per prompt, each in a new session, all at once; return the session ids."""
    handles = [executor.execute(plain_agent, p, session_id=f"{prefix}-{i}") for i, p in enumerate(prompts)]
    for handle in handles:
        handle.result()
    return [h.session_id for h in handles]


def continue_session(executor: Any, session_id: str, prompt: str) -> None:
    executor.execute(plain_agent, prompt, session_id=session_id).result()


def backdate(engine: Engine, session_ids: Sequence[str], days: float) -> None:
    """Move every timestamp of these sessions' runs (and the sessions) ``days`` into the past."""
    shift = int(days * DAY_MS)
    with engine.begin() as conn:
        conn.execute(
            sa.update(runs)
            .where(runs.c.session_id.in_(session_ids))
            .values(started_at=runs.c.started_at - shift, completed_at=runs.c.completed_at - shift)
        )
        conn.execute(
            sa.update(sessions)
            .where(sessions.c.session_id.in_(session_ids))
            .values(updated_at=sessions.c.updated_at - shift)
        )


def helix_counts(
    engine: Engine, where_session: Callable[[sa.Table], sa.ColumnElement[bool]] | None = None
) -> dict[str, int]:
    """Rows per helix table (optionally only those ``where_session(table)`` selects)."""
    out: dict[str, int] = {}
    with engine.connect() as conn:
        for table in HELIX_TABLES:
            query = sa.select(sa.func.count()).select_from(table)
            if where_session is not None:
                query = query.where(where_session(table))
            out[table.name] = int(conn.execute(query).scalar_one())
    return out


def dbos_counts(engine: Engine, workflow_ids: Sequence[str] | None = None) -> dict[str, int]:
    """Rows per DBOS table (optionally only those of ``workflow_ids``)."""
    out: dict[str, int] = {}
    with engine.connect() as conn:
        for name in DBOS_TABLES:
            query = f"SELECT count(*) FROM dbos.{name}"
            params: dict[str, Any] = {}
            if workflow_ids is not None:
                query += " WHERE workflow_uuid = ANY(:ids)"
                params["ids"] = list(workflow_ids)
            out[f"dbos.{name}"] = int(conn.execute(sa.text(query), params).scalar_one())
    return out


def database_bytes(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one())
