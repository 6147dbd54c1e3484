"""The floor: bare DBOS plus the least durable bookkeeping an agent engine with helix-dbos's contract writes.

``bench_overhead.py`` compares helix-dbos with a bare DBOS workflow making the same 19 steps. Bare
DBOS keeps no transcript, no run row and no stream, so part of the gap is the price of the contract,
not of helix-dbos's code. This module measures that price with the smallest implementation we could
write: the same 19 DBOS steps, plus, in hand-written SQL on the same kind of engine

- one transaction at the start (the run's row and the user's message, as a caller must see the
  run ``running`` at once);
- one statement per model call, inside its step, storing what the call completed: the two new
  transcript messages (the previous tool result and the assistant turn), a checkpoint, two usage
  records and three stream chunks, guarded so a re-executed step writes nothing twice, with a
  ``NOTIFY`` for live stream readers;
- one statement at the end (the run ``completed`` and the stream's end chunk), idempotent, so it
  needs no DBOS step of its own.

Nothing here is used by helix-dbos: it is a yardstick. ``helix / floor`` is what helix-dbos's own
code costs; ``floor / bare`` is what any engine keeping a durable transcript and stream pays.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, SetWorkflowID

TOOL_CALLS = 9

_TABLES = """
CREATE TABLE IF NOT EXISTS floor_runs (run_id text PRIMARY KEY, status text NOT NULL, steps int NOT NULL,
    updated_ms bigint NOT NULL);
CREATE TABLE IF NOT EXISTS floor_messages (run_id text, seq int, body jsonb NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS floor_checkpoints (run_id text, step int, body jsonb NOT NULL, PRIMARY KEY (run_id, step));
CREATE TABLE IF NOT EXISTS floor_usage (run_id text, step int, kind text, body jsonb NOT NULL,
    PRIMARY KEY (run_id, step, kind));
CREATE TABLE IF NOT EXISTS floor_chunks (run_id text, seq int, body jsonb NOT NULL, PRIMARY KEY (run_id, seq));
"""

_START = sa.text(
    """
    WITH r AS (INSERT INTO floor_runs VALUES (:run, 'running', 0, :now) ON CONFLICT DO NOTHING RETURNING run_id)
    INSERT INTO floor_messages SELECT run_id, 0, CAST(:message AS jsonb) FROM r
    """
)

# One round trip: the run's step counter is the guard (a re-executed step finds it moved on).
_COMMIT = sa.text(
    """
    WITH guard AS (
        UPDATE floor_runs SET steps = :step, updated_ms = :now WHERE run_id = :run AND steps = :step - 1
        RETURNING run_id),
    m AS (INSERT INTO floor_messages SELECT g.run_id, x.seq, x.body
          FROM guard g, jsonb_to_recordset(CAST(:messages AS jsonb)) AS x(seq int, body jsonb)),
    k AS (INSERT INTO floor_checkpoints SELECT g.run_id, :step, CAST(:checkpoint AS jsonb) FROM guard g),
    u AS (INSERT INTO floor_usage SELECT g.run_id, :step, x.kind, x.body
          FROM guard g, jsonb_to_recordset(CAST(:usage AS jsonb)) AS x(kind text, body jsonb)),
    c AS (INSERT INTO floor_chunks SELECT g.run_id, x.seq, x.body
          FROM guard g, jsonb_to_recordset(CAST(:chunks AS jsonb)) AS x(seq int, body jsonb))
    SELECT count(*), pg_notify('floor_stream', :run) FROM guard
    """
)

_FINISH = sa.text(
    """
    WITH done AS (UPDATE floor_runs SET status = 'completed', updated_ms = :now WHERE run_id = :run
                  AND status = 'running' RETURNING run_id)
    INSERT INTO floor_chunks SELECT run_id, :seq, CAST(:chunk AS jsonb) FROM done
    """
)

_engine: sa.Engine | None = None


def _instant() -> float:
    return 0.0


model_latency: Callable[[], float] = _instant
"""Seconds the model step sleeps (``bench_capacity.py`` sets it for its load; instant otherwise)."""


def install(url: str) -> None:
    """Create the floor's tables and its engine (psycopg, as helix-dbos's store uses)."""
    global _engine
    _engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1), pool_size=10)
    with _engine.begin() as conn:
        conn.exec_driver_sql(_TABLES)


def close() -> None:
    if _engine is not None:
        _engine.dispose()


def _now() -> int:
    return int(time.time() * 1000)


def _commit(run_id: str, i: int, reply: dict[str, Any]) -> None:
    assert _engine is not None
    seq = 2 * i + 1  # the user message is 0; each step adds the tool result (if any) and the reply
    messages = [{"seq": seq, "body": {"role": "assistant", "content": reply}}]
    if i:
        messages.insert(0, {"seq": seq - 1, "body": {"role": "tool", "content": {"ok": True, "i": i - 1}}})
    usage = [{"kind": "llm", "body": {"model": "none", "input_tokens": 0}}, {"kind": "tool", "body": {"ms": 0}}]
    kinds = ("tool_end", "tool_call", "checkpoint")
    chunks = [{"seq": 3 * i + k, "body": {"type": kind, "step": i}} for k, kind in enumerate(kinds)]
    with _engine.begin() as conn:
        conn.execute(
            _COMMIT,
            {
                "run": run_id,
                "step": i + 1,
                "now": _now(),
                "messages": json.dumps(messages),
                "checkpoint": json.dumps({"step": i, "messages": len(messages)}),
                "usage": json.dumps(usage),
                "chunks": json.dumps(chunks),
            },
        )


@DBOS.step(name="floor.llm")
def floor_llm(run_id: str, i: int) -> dict[str, Any]:
    latency = model_latency()
    if latency:
        time.sleep(latency)
    reply: dict[str, Any] = (
        {"type": "tool_calls", "tool_calls": [{"id": f"c{i}", "name": "noop", "arguments": {"i": i}}]}
        if i < TOOL_CALLS
        else {"type": "text", "content": "done"}
    )
    _commit(run_id, i, reply)
    return reply


@DBOS.step(name="floor.tool")
def floor_tool(i: int) -> dict[str, Any]:
    return {"ok": True, "i": i}


@DBOS.workflow(name="floor.agent")
def floor_workflow(run_id: str) -> str:
    for i in range(TOOL_CALLS + 1):
        out = floor_llm(run_id, i)
        if out["type"] == "text":
            assert _engine is not None
            with _engine.begin() as conn:
                conn.execute(_FINISH, {"run": run_id, "now": _now(), "seq": 3 * (i + 1), "chunk": '{"type": "end"}'})
            return str(out["content"])
        floor_tool(i)
    return "unreachable"


def start_run(run_id: str) -> None:
    """The caller's part of a start: the run's row and the user's message, in one statement."""
    assert _engine is not None
    with _engine.begin() as conn:
        conn.execute(_START, {"run": run_id, "now": _now(), "message": '{"role": "user", "content": "go"}'})


def run_floor() -> float:
    """One run, as the caller sees it: the run's row, the workflow, its result. Returns milliseconds."""
    started = time.perf_counter()
    run_id = f"floor-{uuid.uuid4().hex}"
    start_run(run_id)
    with SetWorkflowID(run_id):
        handle = DBOS.start_workflow(floor_workflow, run_id)
    assert handle.get_result() == "done"
    return (time.perf_counter() - started) * 1000
