"""HTTP fuzzing of the live service with schemathesis, against its own ``/openapi.json``.

The service runs on a real port (uvicorn, PostgreSQL, DBOS, the durable SQL streams); schemathesis
runs as its command line does for a user (``st run .../openapi.json --checks all``), authenticated,
in every phase: the schema's examples, coverage of its boundaries, random fuzzing, and stateful
sequences that follow the schema's links from a started run to its session's routes. It passes
only with no failure of any check: no 5xx, every status documented, every response matching its
schema, every schema-valid request accepted, every invalid one refused. The server also counts
what it answered, so "no 5xx" is measured on both sides.

- The default suite runs a bounded version (a fixed seed, ``BOUNDED_EXAMPLES`` per operation and
  phase): a fixed amount of CPU-bound work, about a minute alone and up to two while the default
  run's parallel workers (pytest-xdist, ``addopts``) share the cores, hence its own timeout.
- The long version is marked ``fuzz`` (deselected by default) and runs 500 examples per operation,
  or ``HELIX_FUZZ_EXAMPLES``::

      python -m pytest -m fuzz tests/service/test_fuzz_openapi.py -s

  (``HELIX_FUZZ_SEED`` fixes its seed; ``HELIX_FUZZ_SECONDS`` adds a time budget, which
  schemathesis spends repeating its fuzzing and stateful phases.)
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request, Response

from helix_dbos.errors import HelixError
from helix_dbos.runtime.aio import background_loop
from helix_dbos.service import create_app
from helix_dbos.service.openapi import pattern_admits_nul, request_text_patterns
from helix_dbos.stream.sql import SqlStreamManager
from tests.runtime.conftest import ExecutorFactory
from tests.service.agents import agents, model
from tests.service.conftest import TOKEN, serve

pytestmark = pytest.mark.postgres

BOUNDED_EXAMPLES = 10
BOUNDED_SEED = 20260915


@dataclass
class FuzzTarget:
    url: str
    statuses: collections.Counter[int]


@pytest.fixture
def fuzz_target(make_executor: ExecutorFactory, runtime_db: str) -> Iterator[FuzzTarget]:
    """The service as a user would serve it, counting the statuses it answers."""
    manager = SqlStreamManager(runtime_db)
    executor = make_executor(model(), agents, stream_manager=manager, hot_window_seconds=0.5)
    # Short waits keep the fuzzer's requests short; the schema says these bounds.
    app = create_app(executor, bearer_tokens=[TOKEN], max_result_wait_seconds=2.0)
    statuses: collections.Counter[int] = collections.Counter()
    _count_statuses(app, statuses)
    with serve(app, log_level="error") as url:  # the fuzzer's malformed HTTP is uvicorn's to refuse
        yield FuzzTarget(url, statuses)
    for info in executor.schedules.list():  # the fuzzer's schedules must not fire into the next module
        executor.schedules.delete(info.schedule.name)
    for session in executor.store.list_sessions(status="active", limit=10_000):
        with contextlib.suppress(HelixError):
            executor.abort(session.session_id, "test teardown")
    background_loop.run(manager.aclose())


def _count_statuses(app: FastAPI, statuses: collections.Counter[int]) -> None:
    @app.middleware("http")
    async def count(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        statuses[response.status_code] += 1
        return response


def _schemathesis() -> list[str]:
    st = shutil.which("st")
    return [st] if st else [sys.executable, "-m", "schemathesis.cli"]


@dataclass
class FuzzRun:
    exit_code: int
    generated: int
    output: str
    seconds: float


CONFIG = """
request-timeout = 20
# An SSE response of a run in flight (or parked) stays open: read a few events, or for 2 s at most.
max-stream-events = 5

[[operations]]
include-path-regex = "/stream$"
request-timeout = 2

# A cron expression's validity (and a backfill window's order and size) is more than JSON Schema can
# say: a schema-valid one DBOS would not run is refused with a typed 422 (validation_invalid_schedule).
[[operations]]
include-path-regex = "^/v1/schedules(/[^/]+/backfill)?$"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422", "429"]
"""


def run_schemathesis(
    target: FuzzTarget, config_dir: Path, *, examples: int, seed: int | None, seconds: int | None
) -> FuzzRun:
    config = config_dir / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [
        *_schemathesis(),
        "--config-file",
        str(config),
        "run",
        f"{target.url}/openapi.json",
        "--checks",
        "all",
        "--header",
        f"Authorization: Bearer {TOKEN}",
        "--max-examples",
        str(examples),
        # One worker: with two threads, CPython 3.11's ast.parse (which hypothesis calls to describe
        # lambdas) fails now and then with "AST constructor recursion depth mismatch".
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--no-color",
        "--output-truncate",
        "false",
    ]
    if seed is not None:
        command += ["--seed", str(seed)]
    if seconds is not None:
        command += ["--max-time", str(seconds)]
    started = time.monotonic()
    # Run in the scratch directory: schemathesis keeps a cache (.schemathesis/) where it runs.
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=config_dir, env={**os.environ, "NO_COLOR": "1"}
    )
    output = done.stdout + done.stderr
    match = re.search(r"(\d+) generated", output)
    return FuzzRun(done.returncode, int(match.group(1)) if match else 0, output, time.monotonic() - started)


def _check(run: FuzzRun, target: FuzzTarget, *, minimum: int) -> None:
    server_errors = sum(count for status, count in target.statuses.items() if status >= 500)
    print(  # the figures, for the record (pytest -s)
        f"\nschemathesis: {run.generated} cases generated in {run.seconds:.0f} s; exit code {run.exit_code}; "
        f"server answered {sum(target.statuses.values())} requests, {server_errors} with a 5xx; "
        f"statuses {dict(sorted(target.statuses.items()))}"
    )
    if run.exit_code != 0:
        print(run.output)  # shown with the failure: schemathesis's own report, with curl reproductions
    assert run.exit_code == 0, "schemathesis failed: its report is in the captured output above"
    assert server_errors == 0, dict(target.statuses)
    assert run.generated >= minimum, run.output[-5_000:]


@pytest.mark.timeout(300)
def test_schemathesis_finds_no_5xx_and_no_conformance_failure(fuzz_target: FuzzTarget, tmp_path: Path) -> None:
    run = run_schemathesis(fuzz_target, tmp_path, examples=BOUNDED_EXAMPLES, seed=BOUNDED_SEED, seconds=None)
    _check(run, fuzz_target, minimum=500)


@pytest.mark.fuzz
@pytest.mark.timeout(0)
def test_schemathesis_long(fuzz_target: FuzzTarget, tmp_path: Path) -> None:
    examples = int(os.environ.get("HELIX_FUZZ_EXAMPLES", "500"))
    seed = int(os.environ["HELIX_FUZZ_SEED"]) if os.environ.get("HELIX_FUZZ_SEED") else None
    seconds = int(os.environ["HELIX_FUZZ_SECONDS"]) if os.environ.get("HELIX_FUZZ_SECONDS") else None
    run = run_schemathesis(fuzz_target, tmp_path, examples=examples, seed=seed, seconds=seconds)
    _check(run, fuzz_target, minimum=examples)


def test_the_schema_given_to_schemathesis_refuses_nul_wherever_a_request_has_text(fuzz_target: FuzzTarget) -> None:
    schema = httpx.get(f"{fuzz_target.url}/openapi.json").json()
    request_side = {
        "paths": schema["paths"],
        "components": {k: v for k, v in schema["components"]["schemas"].items() if not k.startswith("Error")},
    }
    patterns = request_text_patterns(request_side)
    assert patterns and not [p for p in patterns if pattern_admits_nul(p)]
    components = schema["components"]["schemas"]
    # The discriminators are required where requests use them.
    assert "role" in components["UserMessageInput"]["required"]
    assert "kind" in components["ClientToolResult"]["required"]
    # Responses keep their own components, not constrained by request rules.
    assert "pattern" not in components["UserMessage"]["properties"]["content"]
    start = components["StartRunRequest"]["properties"]["agent"]
    assert set(start["examples"]) >= {"echo", "locator"}
    links = schema["paths"]["/v1/runs"]["post"]["responses"]["202"]["links"]
    assert links["GetSession"]["parameters"] == {"session_id": "$response.body#/session_id"}
