"""Agent schedules over HTTP (``/v1/schedules``, in-process through the ASGI transport) and the CLI.

The same DBOS (PostgreSQL) and worker serve both: schedules created over HTTP or from the CLI fire
in the launched process, and each face answers bad input with a typed refusal: a 422 with
``validation_invalid_schedule``, a 404 with ``state_schedule_not_found``, a 409 for a taken name,
and on the command line one line with a hint and a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from typer.testing import CliRunner

from helix_dbos.cli import app as cli_app
from helix_dbos.service import create_app
from tests.schedules.conftest import Scheduled

pytestmark = pytest.mark.postgres

TOKEN = "schedule-token-0123456789"
runner = CliRunner()


@pytest.fixture
async def http(scheduled: Scheduled) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(scheduled.executor, bearer_tokens=[TOKEN])
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://service", headers=headers) as client:
        yield client


def _schedule(name: str, **extra: object) -> dict[str, object]:
    return {"name": name, "agent": "reporter", "cron": "* * * * *", "message": "Report.", **extra}


async def test_http_creates_lists_pauses_backfills_and_lists_fires(http: httpx.AsyncClient) -> None:
    created = await http.post("/v1/schedules", json=_schedule("http-minutely", enabled=False))
    assert created.status_code == 201, created.text
    assert created.json()["status"] == "paused" and created.json()["schedule"]["cron"] == "* * * * *"
    listed = await http.get("/v1/schedules")
    assert [s["schedule"]["name"] for s in listed.json()["schedules"]] == ["http-minutely"]
    assert (await http.post("/v1/schedules/http-minutely/resume")).json()["status"] == "active"
    assert (await http.post("/v1/schedules/http-minutely/pause")).json()["status"] == "paused"
    end = datetime.now(UTC)
    window = {"start": (end - timedelta(minutes=3, seconds=30)).isoformat(), "end": end.isoformat()}
    first = await http.post("/v1/schedules/http-minutely/backfill", json=window)
    assert first.status_code == 200, first.text
    enqueued = first.json()["enqueued"]
    assert len(enqueued) in (3, 4) and first.json()["already_fired"] == []
    second = (await http.post("/v1/schedules/http-minutely/backfill", json=window)).json()
    assert second["enqueued"] == [] and sorted(second["already_fired"]) == sorted(enqueued)
    deadline = time.monotonic() + 20
    while True:
        fires = (await http.get("/v1/schedules/http-minutely/fires")).json()
        if len(fires) == len(enqueued) and all(f["outcome"] for f in fires):
            break
        assert time.monotonic() < deadline, fires
        time.sleep(0.1)
    assert {f["outcome"]["status"] for f in fires} == {"started"}
    assert len({f["outcome"]["run_id"] for f in fires}) == len(enqueued)
    deleted = await http.delete("/v1/schedules/http-minutely")
    assert deleted.status_code == 200 and deleted.json() == {"name": "http-minutely", "deleted": True}
    assert (await http.get("/v1/schedules/http-minutely")).status_code == 404


async def test_http_refuses_bad_input_with_typed_4xx(http: httpx.AsyncClient) -> None:
    bad_cron = await http.post("/v1/schedules", json=_schedule("bad", cron="61 * * * *"))
    assert bad_cron.status_code == 422 and bad_cron.json()["error"]["code"] == "validation_invalid_schedule"
    bad_zone = await http.post("/v1/schedules", json=_schedule("bad", timezone="Mars/Base"))
    assert bad_zone.status_code == 422 and bad_zone.json()["error"]["code"] == "validation_invalid_schedule"
    bad_name = await http.post("/v1/schedules", json=_schedule("no spaces"))
    assert bad_name.status_code == 422 and bad_name.json()["error"]["code"] == "validation_error"
    unknown_agent = await http.post("/v1/schedules", json=_schedule("ok", agent="nobody"))
    assert unknown_agent.status_code == 404 and unknown_agent.json()["error"]["code"] == "state_agent_not_found"
    assert (await http.post("/v1/schedules", json=_schedule("taken"))).status_code == 201
    taken = await http.post("/v1/schedules", json=_schedule("taken"))
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "state_conflict"
    for method, path in (
        ("GET", "/v1/schedules/nope"),
        ("POST", "/v1/schedules/nope/pause"),
        ("POST", "/v1/schedules/nope/resume"),
        ("DELETE", "/v1/schedules/nope"),
        ("GET", "/v1/schedules/nope/fires"),
    ):
        missing = await http.request(method, path)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "state_schedule_not_found", path
    now = datetime.now(UTC)
    backwards = {"start": now.isoformat(), "end": (now - timedelta(hours=1)).isoformat()}
    reversed_window = await http.post("/v1/schedules/taken/backfill", json=backwards)
    assert reversed_window.status_code == 422
    assert reversed_window.json()["error"]["code"] == "validation_invalid_schedule"
    unauthenticated = await http.get("/v1/schedules", headers={"Authorization": "Bearer wrong"})
    assert unauthenticated.status_code == 401
    # Two routes serve each of these paths: a 405 names both methods (Starlette's named the first's only).
    for path, allow in (("/v1/schedules", "GET, POST"), ("/v1/schedules/taken", "GET, DELETE")):
        not_allowed = await http.request("PATCH", path)
        assert not_allowed.status_code == 405 and not_allowed.headers["allow"] == allow


def _cli(url: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli_app, ["schedules", *args, "--database-url", url], env={"HELIX_DATABASE_URL": ""})
    return result.exit_code, result.stdout, result.stderr


def test_cli_creates_lists_pauses_resumes_backfills_and_deletes(scheduled: Scheduled, schedule_db: str) -> None:
    code, out, err = _cli(schedule_db, "create", "cli-hourly", "--agent", "reporter", "--cron", "0 * * * *",
                          "--message", "Report.", "--paused")  # fmt: skip
    assert code == 0, err
    assert "cli-hourly  paused  cron '0 * * * *'" in out
    code, out, _ = _cli(schedule_db, "list", "--json")
    assert [s["schedule"]["name"] for s in json.loads(out)] == ["cli-hourly"]
    assert "active" in _cli(schedule_db, "resume", "cli-hourly")[1]
    assert "paused" in _cli(schedule_db, "pause", "cli-hourly")[1]
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = hour - timedelta(hours=3, minutes=30), hour - timedelta(minutes=30)
    window = ("--start", start.isoformat(), "--end", end.isoformat())
    code, out, _ = _cli(schedule_db, "backfill", "cli-hourly", *window)
    assert code == 0 and out.startswith("backfilled cli-hourly: 3 fires enqueued, 0 had fired already"), out
    code, out, _ = _cli(schedule_db, "backfill", "cli-hourly", *window)
    assert "0 fires enqueued, 3 had fired already" in out
    fires = scheduled.wait_fires("cli-hourly", 3)
    code, out, _ = _cli(schedule_db, "fires", "cli-hourly", "--json")
    assert sorted(f["fire_id"] for f in json.loads(out)) == sorted(f.fire_id for f in fires)
    assert _cli(schedule_db, "delete", "cli-hourly")[1].strip() == "deleted schedule cli-hourly"
    assert scheduled.executor.schedules.list() == []


def test_cli_bad_input_is_one_line_with_a_hint(scheduled: Scheduled, schedule_db: str) -> None:
    code, _, err = _cli(schedule_db, "create", "x", "--agent", "reporter", "--cron", "61 * * * *", "--message", "m")
    assert code == 1 and err.strip().splitlines() == [
        "helix-dbos: Invalid cron expression '61 * * * *': use 5 fields (minute hour day month weekday) "
        "or 6 with seconds first"
    ]
    code, _, err = _cli(schedule_db, "pause", "nope")
    assert code == 1 and err.strip() == (
        "helix-dbos: Schedule 'nope' does not exist: helix-dbos schedules list shows the schedules"
    )
    code, _, err = _cli(schedule_db, "create", "bad name", "--agent", "a", "--cron", "* * * * *", "--message", "m")
    assert code == 1 and err.startswith("helix-dbos: invalid name:") and "letters, digits" in err
    code, _, err = _cli(schedule_db, "backfill", "x", "--start", "yesterday")
    assert code == 1 and "--start is not an ISO 8601 time" in err


async def test_a_schedule_is_its_tenants_and_fires_in_its_sessions(scheduled: Scheduled) -> None:
    tokens = {"acme-token-0123456789": "acme", "umbrella-token-012345": "umbrella"}
    transport = httpx.ASGITransport(app=create_app(scheduled.executor, bearer_tokens=tokens))

    def as_tenant(token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=transport, base_url="http://s", headers={"Authorization": f"Bearer {token}"})

    async with as_tenant("acme-token-0123456789") as acme, as_tenant("umbrella-token-012345") as umbrella:
        body = _schedule("acme-hourly", cron="0 * * * *", enabled=False, tenant="umbrella")
        created = await acme.post("/v1/schedules", json=body)
        assert created.status_code == 201 and created.json()["schedule"]["tenant"] == "acme"  # the caller's, always
        assert (await umbrella.get("/v1/schedules")).json() == {"schedules": []}
        for method, path in (("GET", ""), ("POST", "/pause"), ("GET", "/fires"), ("DELETE", "")):
            other = await umbrella.request(method, f"/v1/schedules/acme-hourly{path}")
            assert other.status_code == 404 and other.json()["error"]["code"] == "state_schedule_not_found"
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        window = {"start": (hour - timedelta(minutes=90)).isoformat(), "end": hour.isoformat()}
        assert (await umbrella.post("/v1/schedules/acme-hourly/backfill", json=window)).status_code == 404
        assert len((await acme.post("/v1/schedules/acme-hourly/backfill", json=window)).json()["enqueued"]) == 1
        deadline = time.monotonic() + 20
        while not (fires := (await acme.get("/v1/schedules/acme-hourly/fires")).json()) or not fires[0]["outcome"]:
            assert time.monotonic() < deadline, fires
            await asyncio.sleep(0.1)
    outcome = fires[0]["outcome"]
    assert outcome["status"] == "started"
    session = scheduled.executor.get_session(outcome["session_id"])
    assert session is not None and session.tenant == "acme"
