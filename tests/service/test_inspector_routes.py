"""The routes the web inspector reads (``GET /v1/agents``, ``/v1/sessions``, ``.../timeline``, ``.../state``) and the
page itself (``GET /ui``): authenticated like every ``/v1`` route, the page static and locked down."""

from __future__ import annotations

from typing import Any

import httpx

from helix_dbos.service.ui import UI_FILES
from tests.service.conftest import Service
from tests.service.test_bad_input import completed_echo
from tests.service.test_routes import assert_error


async def test_agents_are_the_served_ones_sorted_with_their_descriptions(
    service: Service, client: httpx.AsyncClient
) -> None:
    served = (await client.get("/v1/agents")).json()["agents"]
    assert [a["name"] for a in served] == service.executor.registry.names()
    assert [a["name"] for a in served] == sorted(a["name"] for a in served)
    echo = next(a for a in served if a["name"] == "echo")
    assert echo == {"name": "echo", "description": service.executor.registry.require("echo").description}


async def test_sessions_list_filters_pages_and_prices(client: httpx.AsyncClient) -> None:
    for i in range(3):
        await completed_echo(client, f"insp-echo-{i}")
    page: dict[str, Any] = (await client.get("/v1/sessions", params={"agent": "echo", "limit": 2})).json()
    assert [s["session_id"] for s in page["items"]] == ["insp-echo-2", "insp-echo-1"]
    assert page["has_more"] is True and (page["offset"], page["limit"]) == (0, 2)
    first = page["items"][0]
    assert (first["agent"], first["status"], first["turn"]) == ("echo", "completed", 1)
    assert first["cost_usd"] == 0.0 and first["total_tokens"] >= 0
    assert first["updated_at"] >= first["created_at"] > 0
    rest = (await client.get("/v1/sessions", params={"agent": "echo", "limit": 2, "offset": 2})).json()
    assert [s["session_id"] for s in rest["items"]] == ["insp-echo-0"] and rest["has_more"] is False
    assert (await client.get("/v1/sessions", params={"agent": "echo", "status": "failed"})).json()["items"] == []
    assert (await client.get("/v1/sessions", params={"agent": "nobody"})).json()["items"] == []
    assert_error(await client.get("/v1/sessions", params={"status": "bogus"}), 422, "validation_error")
    assert_error(await client.get("/v1/sessions", params={"limit": 0}), 422, "validation_error")


async def test_timeline_has_each_runs_steps_with_checkpoints(client: httpx.AsyncClient) -> None:
    await completed_echo(client, "insp-timeline")
    timeline = (await client.get("/v1/sessions/insp-timeline/timeline")).json()
    assert timeline["session_id"] == "insp-timeline"
    [run] = timeline["runs"]
    assert (run["turn"], run["status"], run["mode"]) == (1, "completed", "execute")
    assert run["duration_ms"] is not None and run["duration_ms"] >= 0
    steps = run["steps"]
    assert [s["step"] for s in steps] == [0, 1]
    assert all(s["checkpoint_id"].startswith("cpv1-insp-timeline-") for s in steps)
    assert steps[1]["llm_calls"] == 1 and steps[1]["model"]
    assert timeline["totals"]["llm_calls"] == 1
    # What the timeline names is what retry takes.
    retried = await client.post("/v1/sessions/insp-timeline/retry", json={"checkpoint_id": steps[0]["checkpoint_id"]})
    assert retried.status_code == 202, retried.text
    assert_error(await client.get("/v1/sessions/insp-none/timeline"), 404, "state_session_not_found")


async def test_state_is_the_sessions_custom_state(service: Service, client: httpx.AsyncClient) -> None:
    await completed_echo(client, "insp-state")
    assert (await client.get("/v1/sessions/insp-state/state")).json() == {"session_id": "insp-state", "state": {}}
    assert_error(await client.get("/v1/sessions/insp-none/state"), 404, "state_session_not_found")


async def test_inspector_data_needs_the_token(service: Service) -> None:
    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as anonymous:
        for path in ("/v1/agents", "/v1/sessions", "/v1/sessions/x/timeline", "/v1/sessions/x/state"):
            assert_error(await anonymous.get(path), 401, "unauthenticated")
            assert_error(await anonymous.get(path, headers={"Authorization": "Bearer wrong"}), 401, "unauthenticated")


async def test_the_page_is_static_locked_down_and_not_in_the_schema(service: Service) -> None:
    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as anonymous:
        page = await anonymous.get("/ui")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe" not in csp and "connect-src 'self'" in csp
        assert page.headers["x-content-type-options"] == "nosniff"
        # No CDN: every script and style the page loads is one of ours.
        assert "http://" not in page.text and "https://" not in page.text
        for name, media_type in UI_FILES.items():
            asset = await anonymous.get(f"/ui/{name}")
            assert asset.status_code == 200, name
            assert asset.headers["content-type"] == media_type
            assert "https://" not in asset.text and "http://" not in asset.text, name
        for path in ("/ui/../app.py", "/ui/nope.js", "/ui/ui.py"):
            assert (await anonymous.get(path)).status_code == 404, path
        assert (await anonymous.get("/ui/", follow_redirects=False)).status_code == 308
        schema = (await anonymous.get("/openapi.json")).json()
        assert not any(path.startswith("/ui") for path in schema["paths"])
        assert {"/v1/sessions", "/v1/sessions/{session_id}/timeline", "/v1/sessions/{session_id}/state"} <= set(
            schema["paths"]
        )
