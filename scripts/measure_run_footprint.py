"""Rows and bytes one agent run costs on PostgreSQL, per table; and what ``gc`` gives back.

A typical run: 10 model calls (each streaming a sentence of text deltas), 9 tool calls, one per
call, then ``__finish__``. The script launches helix-dbos the way a worker does (``launch``: DBOS,
the SQL stream tables) on a fresh database, runs ``--runs`` of them (each in a new session), and
prints per table - helix store tables, stream tables, DBOS tables - the rows and bytes added per
run: row counts are deltas of ``count(*)``, bytes deltas of ``pg_total_relation_size`` (heap,
indexes and TOAST) after ``VACUUM ANALYZE``. It then deletes every run with ``collect_garbage``
(``keep_days=0``) and prints the database size before, after the collection, and after ``VACUUM
FULL`` (PostgreSQL reuses the space of deleted rows; only ``VACUUM FULL`` returns it to the OS).

Usage:  python scripts/measure_run_footprint.py [--runs 50]
Without HELIX_BENCH_DATABASE_URL (a PostgreSQL server URL on which the script may create a
database) it starts a throw-away cluster (tests/pg.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa
from pydantic import BaseModel

from helix_dbos import LLMGenerateInput, MockLLMAdapter, define_agent, define_tool
from helix_dbos.retention import DbosWorkflowRows, RetentionPolicy, collect_garbage
from helix_dbos.runtime.launch import launch, shutdown
from helix_dbos.step_result import ParsedToolCall, ToolCallsStepResult
from helix_dbos.store.engine import create_engine_for, now_ms
from helix_dbos.store.schema import ALL_TABLES
from tests import pg

MODEL_CALLS = 10
DBOS_TABLES = (
    "workflow_status",
    "operation_outputs",
    "workflow_input",
    "workflow_output",
    "workflow_events",
    "workflow_events_history",
    "notifications",
    "streams",
)


class CityIn(BaseModel):
    city: str


class Out(BaseModel):
    answer: str


def step(inp: LLMGenerateInput) -> ToolCallsStepResult:
    """Tool calls until the tenth model call, which finishes; every call says a sentence first."""
    calls_so_far = sum(1 for m in inp.messages if m.role == "assistant")
    text = f"Looking at city number {calls_so_far}, one moment while I check the forecast for it."
    if calls_so_far + 1 >= MODEL_CALLS:
        call = ParsedToolCall(id=f"fin-{calls_so_far}", name="__finish__", arguments={"answer": "sunny everywhere"})
    else:
        call = ParsedToolCall(id=f"c-{calls_so_far}", name="weather", arguments={"city": f"city-{calls_so_far}"})
    return ToolCallsStepResult(content=text, tool_calls=[call], stop_reason="tool_use")


weather = define_tool(
    "weather", input_schema=CityIn, execute=lambda inp, ctx: {"city": inp.city, "forecast": "sunny", "high_c": 24}
)
agent = define_agent(
    "footprint", system_prompt="You report the weather.", llm_config="openai/fake", output_schema=Out, tools=[weather]
)


def table_figures(engine: sa.Engine) -> dict[str, tuple[int, int]]:
    """``table -> (rows, bytes)`` for the helix tables and DBOS's, after VACUUM ANALYZE."""
    names = [t.name for t in ALL_TABLES] + [f"dbos.{t}" for t in DBOS_TABLES]
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE")
        return {
            name: (
                int(conn.exec_driver_sql(f"SELECT count(*) FROM {name}").scalar_one()),
                int(conn.execute(sa.text("SELECT pg_total_relation_size(:t)"), {"t": name}).scalar_one()),
            )
            for name in names
        }


def database_size(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    server = os.environ.get("HELIX_BENCH_DATABASE_URL")
    cluster = None
    if server is None:
        cluster = pg.start_local_cluster()
        server = cluster.url
    url = pg.create_database(server, pg.unique_name("footprint"))
    try:
        measure(url, args.runs)
    finally:
        if cluster is not None:
            cluster.stop()


def measure(url: str, runs: int) -> None:
    executor = launch(url, agents=[agent], llm_adapter=MockLLMAdapter([step] * (MODEL_CALLS * (runs + 1))))
    engine = create_engine_for(url)
    try:
        executor.execute(agent, "warm up").result()  # first-run costs (stream rows, DBOS queues) out of the figures
        before = table_figures(engine)
        started = time.perf_counter()
        for i in range(runs):
            result = executor.execute(agent, f"weather please ({i})").result()
            assert result.status == "completed", result
        elapsed = time.perf_counter() - started
        after = table_figures(engine)
        tools = MODEL_CALLS - 1
        print(f"{runs} runs of {MODEL_CALLS} model calls (streamed text) and {tools} tool calls, {elapsed:.1f} s")
        print(f"{'table':32} {'rows/run':>9} {'bytes/run':>10}")
        total_rows = total_bytes = 0.0
        for name, (rows, size) in after.items():
            d_rows = (rows - before[name][0]) / runs
            d_bytes = (size - before[name][1]) / runs
            total_rows += d_rows
            total_bytes += d_bytes
            if d_rows or d_bytes:
                print(f"{name:32} {d_rows:9.1f} {d_bytes:10.0f}")
        print(f"{'total':32} {total_rows:9.1f} {total_bytes:10.0f}")

        size_before = database_size(engine)
        client: Any = None
        from dbos import DBOSClient

        from helix_dbos.runtime.launch import dbos_system_database_url

        client = DBOSClient(system_database_url=dbos_system_database_url(url))
        report = collect_garbage(
            engine, RetentionPolicy(keep_days=0), DbosWorkflowRows(client), now_ms=now_ms() + 1, batch_size=500
        )
        client.destroy()
        size_after = database_size(engine)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM FULL")
        size_full = database_size(engine)
        print(f"gc keep_days=0 deleted {report.sessions_deleted} sessions: {report.deleted}")
        mb = 1024 * 1024
        print(
            f"database size: {size_before / mb:.1f} MiB before gc, {size_after / mb:.1f} MiB after, "
            f"{size_full / mb:.1f} MiB after VACUUM FULL"
        )
    finally:
        shutdown(executor)
        engine.dispose()


if __name__ == "__main__":
    main()
