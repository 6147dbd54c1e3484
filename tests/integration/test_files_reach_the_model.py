"""Files reach the model as content parts, or are refused before the run starts (issue 9 item 6).

A real DBOS run on PostgreSQL, the real LiteLLM adapter, and the scripted OpenAI-compatible server,
which records the request bodies LiteLLM sent.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from helix_dbos import FileInput, HelixError, LLMConfig, UserInputMessage, define_agent
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.testing.fake_openai import ScriptedOpenAIServer
from tests.runtime.conftest import ExecutorFactory, make_executor, runtime_db

__all__ = ["make_executor", "runtime_db"]

pytestmark = pytest.mark.postgres

# A 1x1 PNG.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()
PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n").decode()


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def agent_on(model: str, server: ScriptedOpenAIServer | None = None, name: str = "viewer") -> Any:
    config = LLMConfig(model=model, api_base=server.base_url if server else None, api_key="test", max_retries=0)
    return define_agent(name, system_prompt="Describe attachments.", llm_config=config)


def executor_for(make_executor: ExecutorFactory, agent: Any) -> DBOSAgentExecutor:
    return make_executor(LiteLLMAdapter(), [agent])


def user(content: str, *files: dict[str, Any]) -> dict[str, Any]:
    return {"message": [{"role": "user", "content": content, "files": list(files)}]}


def test_an_image_a_pdf_and_a_text_file_reach_the_model_as_content_parts(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    agent = agent_on("openai/fake", server)
    executor = executor_for(make_executor, agent)
    server.add({"text": "A dot."}, {"text": "Still a dot."})
    files = (
        {"data": PNG, "media_type": "image/png", "filename": "dot.png"},
        {"data": f"data:application/pdf;base64,{PDF}", "media_type": "application/pdf", "filename": "a.pdf"},
        {"data": base64.b64encode("héllo".encode()).decode(), "media_type": "text/plain", "filename": "n.txt"},
        # Not UTF-8: decoded with replacement characters, not refused (a schema cannot say "UTF-8").
        {"data": base64.b64encode(b"caf\xe9").decode(), "media_type": "text/csv", "filename": "l.csv"},
    )
    handle = executor.execute(agent, user("What is this?", *files))
    assert handle.result().status == "completed"

    content = server.requests[0]["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "What is this?"}
    assert content[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert content[2]["type"] == "file"
    assert content[2]["file"]["file_data"] == f"data:application/pdf;base64,{PDF}"
    assert content[2]["file"]["filename"] == "a.pdf"
    assert content[3] == {"type": "text", "text": '<file name="n.txt" media_type="text/plain">\nhéllo\n</file>'}
    assert content[4] == {"type": "text", "text": '<file name="l.csv" media_type="text/csv">\ncaf\ufffd\n</file>'}

    # The files stay on the stored message and go out again with the history of the next turn.
    again = executor.execute(agent, "And now?", session_id=handle.session_id)
    assert again.result().status == "completed"
    history = server.requests[1]["messages"]
    assert history[1]["content"][1]["type"] == "image_url"
    assert history[-1] == {"role": "user", "content": "And now?"}


def test_an_image_url_is_sent_as_the_url(make_executor: ExecutorFactory, server: ScriptedOpenAIServer) -> None:
    agent = agent_on("openai/fake", server, name="url-viewer")
    executor = executor_for(make_executor, agent)
    server.add({"text": "A cat."})
    url = "https://example.com/cat.png"
    handle = executor.execute(agent, user("What is this?", {"data": url, "media_type": "image/png"}))
    assert handle.result().status == "completed"
    assert server.requests[0]["messages"][-1]["content"][1] == {"type": "image_url", "image_url": {"url": url}}


@pytest.mark.parametrize(
    ("file", "match"),
    [
        ({"data": PNG, "media_type": "application/zip"}, "unsupported media_type"),
        ({"data": PNG, "media_type": "IMAGE/PNG"}, "unsupported media_type"),
        ({"data": "not base64!", "media_type": "image/png"}, "data must be padded base64"),
        ({"data": "", "media_type": "image/png"}, "data must be padded base64"),
        ({"data": "data:text/plain,hi", "media_type": "text/plain"}, "data must be padded base64"),
        ({"data": "https://example.com/a.pdf", "media_type": "application/pdf"}, "only images"),
    ],
)
def test_files_that_are_not_files_a_model_takes_are_refused_when_the_input_is_read(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer, file: dict[str, Any], match: str
) -> None:
    """What ``FileInput``'s schema refuses, its validation refuses (the service answers it with a 422)."""
    agent = agent_on("openai/fake", server, name="shape")
    executor = executor_for(make_executor, agent)
    session_id = f"refused-file-{uuid.uuid4().hex}"
    with pytest.raises(ValidationError, match=match):
        executor.execute(agent, user("look", file), session_id=session_id)
    assert executor.store.load_session(session_id) is None
    assert server.request_count == 0


@pytest.mark.parametrize(
    ("model", "file", "match"),
    [
        ("openai/gpt-3.5-turbo", {"data": PNG, "media_type": "image/png"}, "does not take images"),
        ("deepseek/deepseek-chat", {"data": PDF, "media_type": "application/pdf"}, "does not take PDFs"),
    ],
)
def test_files_the_agents_model_cannot_take_are_refused_before_anything_is_written(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer, model: str, file: dict[str, Any], match: str
) -> None:
    agent = agent_on(model, server, name="picky")
    executor = executor_for(make_executor, agent)
    session_id = f"refused-file-{uuid.uuid4().hex}"
    with pytest.raises(HelixError, match=match) as caught:
        executor.execute(agent, user("look", file), session_id=session_id)
    assert caught.value.code == "validation_error"
    assert executor.store.load_session(session_id) is None
    assert server.request_count == 0


def test_a_resume_message_with_a_file_the_model_cannot_take_is_refused(
    make_executor: ExecutorFactory, server: ScriptedOpenAIServer
) -> None:
    agent = agent_on("openai/gpt-3.5-turbo", server, name="picky-resume")
    executor = executor_for(make_executor, agent)
    server.add({"text": "hi"})
    handle = executor.execute(agent, "hello")
    assert handle.result().status == "completed"
    before = executor.store.load_session(handle.session_id)
    message = [UserInputMessage(content="see", files=[FileInput(data=PNG, media_type="image/png")])]
    with pytest.raises(HelixError, match="does not take images"):
        executor.retry(handle.session_id, message=message)
    after = executor.store.load_session(handle.session_id)
    assert before is not None and after is not None and after.version == before.version
