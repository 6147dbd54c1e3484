"""The AG-UI routes in process: typed refusals of bodies they cannot act on, OpenAPI, repeats, re-attach.

The protocol itself is proven with AG-UI's own client in ``test_agui_client.py``; these pin what a
client library would never send: malformed bodies, unknown threads, bad ``Last-Event-ID`` values.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.service.conftest import Service
from tests.service.test_routes import assert_error

pytestmark = pytest.mark.postgres


def run_input(thread: str, run: str = "r1", text: str = "hi", **extra: Any) -> dict[str, Any]:
    messages = [{"id": f"u-{run}", "role": "user", "content": text}]
    return {"threadId": thread, "runId": run, "messages": messages, "forwardedProps": {"agent": "echo"}, **extra}


def events(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return [json.loads(line[len("data: ") :]) for line in response.text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize(
    ("body", "code", "where"),
    [
        (
            {"runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]},
            "validation_error",
            ["body", "threadId"],
        ),
        ({"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "robot"}]}, "validation_error", None),
        ({"threadId": "t", "runId": "r", "messages": []}, "validation_error", ["body", "messages"]),
        (run_input("t", text="a\u0000b"), "validation_invalid_text", None),
        (run_input("t", state=[1, 2]), "validation_error", ["body", "state"]),
    ],
)
async def test_a_run_agent_input_it_cannot_act_on_is_a_typed_422(
    client: httpx.AsyncClient, body: dict[str, Any], code: str, where: list[str] | None
) -> None:
    error = assert_error(await client.post("/v1/agui", json=body), 422, code)
    if where is not None:
        assert [d["loc"] for d in error["details"]] == [where]


async def test_a_schema_valid_body_it_cannot_act_on_is_a_run_error_with_the_code(client: httpx.AsyncClient) -> None:
    """The schema allows it, so no 4xx: the client sees the refusal as the run's failure (RUN_ERROR)."""
    unnamed = run_input("t-agent")
    del unnamed["forwardedProps"]
    assistant_last = run_input("t-agent", messages=[{"id": "a", "role": "assistant", "content": "x"}])
    for refused, says in ((unnamed, "forwardedProps"), (assistant_last, "last message")):
        got = events(await client.post("/v1/agui", json=refused))
        assert [e["type"] for e in got] == ["RUN_STARTED", "RUN_ERROR"]
        assert got[1]["code"] == "validation_error" and says in got[1]["message"]
    unknown = run_input("t-agent", forwardedProps={"agent": "nobody"})
    assert_error(await client.post("/v1/agui", json=unknown), 404, "state_agent_not_found")


async def test_a_repeated_run_id_is_the_same_run_and_a_new_one_the_next_turn(
    service: Service, client: httpx.AsyncClient
) -> None:
    first = events(await client.post("/v1/agui", json=run_input("t-repeat")))
    again = events(await client.post("/v1/agui", json=run_input("t-repeat")))
    message_ids = {e["messageId"] for e in first if e["type"] == "TEXT_MESSAGE_START"}
    assert message_ids == {e["messageId"] for e in again if e["type"] == "TEXT_MESSAGE_START"}
    assert first[-1]["result"] == again[-1]["result"] == "echo: hi"
    events(await client.post("/v1/agui", json=run_input("t-repeat", run="r2", text="more")))
    session_id = next(s.session_id for s in service.executor.store.list_sessions(limit=100) if s.agent_type == "echo")
    assert len(service.executor.reads.list_runs(session_id)) == 2


async def test_the_re_attach_resumes_after_last_event_id(client: httpx.AsyncClient) -> None:
    posted = await client.post("/v1/agui", json=run_input("t-again", text="twice"))
    ids = [line[len("id: ") :] for line in posted.text.splitlines() if line.startswith("id: ")]
    assert ids, posted.text
    replay = events(await client.get("/v1/agui/threads/t-again/stream", params={"runId": "r1"}))
    assert [e["type"] for e in replay] == [e["type"] for e in events(posted)]
    assert replay[0]["runId"] == "r1"
    after = events(await client.get("/v1/agui/threads/t-again/stream", headers={"Last-Event-ID": ids[-1]}))
    # The text was sent before that id: the re-attach has only what followed it.
    assert "TEXT_MESSAGE_CONTENT" not in [e["type"] for e in after]
    assert [after[0]["type"], after[-1]["type"]] == ["RUN_STARTED", "RUN_FINISHED"]


async def test_re_attaching_to_an_unknown_thread_or_with_a_bad_event_id_is_a_typed_4xx(
    client: httpx.AsyncClient,
) -> None:
    assert_error(await client.get("/v1/agui/threads/nobody/stream"), 404, "state_session_not_found")
    bad = await client.get("/v1/agui/threads/nobody/stream", headers={"Last-Event-ID": "abc"})
    assert_error(bad, 422, "validation_error")


async def test_the_routes_are_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert paths["/v1/agui"]["post"]["tags"] == ["agui"]
    assert "422" in paths["/v1/agui"]["post"]["responses"]
    assert "404" in paths["/v1/agui/threads/{thread_id}/stream"]["get"]["responses"]
