"""Files over HTTP: the served schema states what a file may be, and the server holds to it.

The schemathesis run (``test_fuzz_openapi.py``) found schema-valid files the server refused (an
empty ``media_type``, for one). ``FileInput`` now carries its rules, so the schema and the 422s
say the same thing; these tests pin the two ends on the live service.
"""

from __future__ import annotations

import base64

import httpx
import pytest

from tests.service.conftest import Service
from tests.service.test_routes import assert_error

pytestmark = pytest.mark.postgres

PNG = base64.b64encode(b"\x89PNG fake").decode()


async def test_the_fuzzers_file_is_a_422_naming_the_rule_and_creates_nothing(
    service: Service, client: httpx.AsyncClient
) -> None:
    file = {"data": "", "filename": None, "media_type": ""}
    message = [{"content": "", "files": [file], "role": "user"}]
    for path, body in (
        ("/v1/chat", {"agent": "echo", "message": message, "session_id": "bad-file"}),
        ("/v1/runs", {"agent": "echo", "input": {"message": message}, "session_id": "bad-file"}),
    ):
        error = assert_error(await client.post(path, json=body), 422, "validation_error")
        assert "unsupported media_type" in error["message"], error
        assert any("files" in d["loc"] for d in error["details"]), error
    url_pdf = {"data": "https://example.com/a.pdf", "media_type": "application/pdf"}
    body = {"agent": "echo", "message": [{"content": "x", "files": [url_pdf]}], "session_id": "bad-file"}
    error = assert_error(await client.post("/v1/chat", json=body), 422, "validation_error")
    assert "only images may be given by URL" in error["message"]
    assert service.executor.store.load_session("bad-file") is None


async def test_files_the_schema_allows_are_accepted(service: Service, client: httpx.AsyncClient) -> None:
    files = [
        {"data": PNG, "media_type": "image/png"},
        {"data": "https://example.com/cat.png", "media_type": "image/png"},
        {"data": f"data:image/jpeg;base64,{PNG}", "media_type": "text/plain", "filename": "t.txt"},
    ]
    body = {"agent": "echo", "message": [{"content": "look", "files": files}], "session_id": "good-file"}
    response = await client.post("/v1/chat", json=body)
    assert response.status_code == 202, response.text
    stored = service.executor.store.load_session("good-file")
    assert stored is not None


async def test_the_served_schema_gives_a_file_two_variants(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    file = schema["components"]["schemas"]["FileInput"]
    image, other = file["anyOf"]
    assert image["properties"]["media_type"]["pattern"] == "^(?:image/(?:png|jpeg|gif|webp))$"
    assert "https?://" in image["properties"]["data"]["pattern"]
    assert "https?://" not in other["properties"]["data"]["pattern"]
    assert image["additionalProperties"] is False and other["additionalProperties"] is False
